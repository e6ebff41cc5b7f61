#pragma once
// A persistent pool for the fast CPU kernels: the calling thread and threads-1 workers share
// each job, split into chunks that whoever is running claims one at a time. A worker the
// system has not scheduled yet simply finds no chunk left, so a busy machine slows a step
// down to the threads it actually got instead of stalling it on the missing one. Workers
// spin briefly between jobs (a decode step runs a few hundred small jobs), then yield, then
// sleep on an atomic wait, so an idle session costs no CPU.
#include <atomic>
#include <cstdint>
#include <functional>
#include <thread>
#include <vector>

namespace lazyscope::cpu {

class ThreadPool {
 public:
  explicit ThreadPool(int threads);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int threads() const { return threads_; }
  // Runs fn(chunk) once for every chunk in [0, chunks), spread over the threads, and returns
  // when all are done. At most kMaxChunks chunks. Not reentrant: fn must not call the pool.
  void run_chunks(int chunks, const std::function<void(int chunk)>& fn);
  // run_chunks(threads(), fn): fn(i) once for each i in [0, threads()).
  void run(const std::function<void(int)>& fn) { run_chunks(threads_, fn); }
  // Splits [0, count) into at most chunks_per_thread * threads() ranges of whole multiples of
  // `grain` (the last may be shorter) and runs fn(begin, end) on each.
  void parallel_for(int64_t count, int64_t grain, const std::function<void(int64_t, int64_t)>& fn,
                    int chunks_per_thread = 1);

  static constexpr int kMaxChunks = (1 << 20) - 1;

 private:
  void worker_loop();
  // Claims and runs chunks of the job posted as `generation` until none is left.
  void help(uint32_t generation);

  int threads_;
  std::vector<std::thread> workers_;
  const std::function<void(int)>* job_ = nullptr;
  // The job's ticket: generation (24 bits) | chunk count (20 bits) | next chunk (20 bits).
  // Claiming a chunk is one compare-and-swap that also checks the job is the one meant.
  std::atomic<uint64_t> ticket_{0};
  std::atomic<int> done_{0};
  std::atomic<uint32_t> generation_{0};
  std::atomic<bool> stop_{false};
};

}  // namespace lazyscope::cpu

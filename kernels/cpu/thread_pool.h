#pragma once
// A persistent pool for the fast CPU kernels: the calling thread and threads-1 workers split
// each job; workers spin briefly between jobs (a decode step runs a few hundred small jobs) and
// then sleep on an atomic wait, so an idle session costs no CPU.
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
  // Runs fn(worker) once on every worker 0..threads-1 (worker 0 is the caller) and returns
  // when all are done. Not reentrant: fn must not call run.
  void run(const std::function<void(int worker)>& fn);
  // Splits [0, count) into threads() contiguous ranges of multiples of `grain` (the last may
  // be shorter) and runs fn(begin, end) on each non-empty one.
  void parallel_for(int64_t count, int64_t grain, const std::function<void(int64_t, int64_t)>& fn);

 private:
  void worker_loop(int worker);
  int threads_;
  std::vector<std::thread> workers_;
  const std::function<void(int)>* job_ = nullptr;
  std::atomic<uint32_t> generation_{0};
  std::atomic<int> pending_{0};
  std::atomic<bool> stop_{false};
};

}  // namespace lazyscope::cpu

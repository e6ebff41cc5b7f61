#include "kernels/cpu/thread_pool.h"

#include <algorithm>
#include <chrono>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

namespace lazyscope::cpu {
namespace {

inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  _mm_pause();
#else
  std::this_thread::yield();
#endif
}

// Spinning this long between jobs covers the gaps inside a forward step; longer idles sleep.
constexpr auto kSpin = std::chrono::microseconds(200);

}  // namespace

ThreadPool::ThreadPool(int threads) : threads_(std::max(1, threads)) {
  workers_.reserve(std::size_t(threads_ - 1));
  for (int w = 1; w < threads_; ++w) workers_.emplace_back([this, w] { worker_loop(w); });
}

ThreadPool::~ThreadPool() {
  stop_.store(true);
  generation_.fetch_add(1);
  generation_.notify_all();
  for (std::thread& t : workers_) t.join();
}

void ThreadPool::worker_loop(int worker) {
  uint32_t seen = 0;  // the generation at construction: a job posted before this thread ran is still seen
  for (;;) {
    const auto spin_start = std::chrono::steady_clock::now();
    uint32_t now = generation_.load(std::memory_order_acquire);
    int spins = 0;
    while (now == seen) {
      cpu_relax();
      if (++spins % 64 == 0 && std::chrono::steady_clock::now() - spin_start > kSpin) {
        generation_.wait(seen, std::memory_order_acquire);
      }
      now = generation_.load(std::memory_order_acquire);
    }
    seen = now;
    if (stop_.load()) return;
    (*job_)(worker);
    pending_.fetch_sub(1, std::memory_order_acq_rel);
  }
}

void ThreadPool::run(const std::function<void(int)>& fn) {
  if (threads_ == 1) {
    fn(0);
    return;
  }
  job_ = &fn;
  pending_.store(threads_ - 1, std::memory_order_relaxed);
  generation_.fetch_add(1, std::memory_order_release);
  generation_.notify_all();
  fn(0);
  while (pending_.load(std::memory_order_acquire) != 0) cpu_relax();
}

void ThreadPool::parallel_for(int64_t count, int64_t grain,
                              const std::function<void(int64_t, int64_t)>& fn) {
  if (count <= 0) return;
  grain = std::max<int64_t>(1, grain);
  const int64_t units = (count + grain - 1) / grain;
  const int used = int(std::min<int64_t>(threads_, units));
  if (used == 1) {
    fn(0, count);
    return;
  }
  run([&](int worker) {
    if (worker >= used) return;
    const int64_t begin = units * worker / used * grain;
    const int64_t end = std::min(count, units * (worker + 1) / used * grain);
    if (begin < end) fn(begin, end);
  });
}

}  // namespace lazyscope::cpu

#include "kernels/cpu/thread_pool.h"

#include <algorithm>
#include <chrono>

#include "base/error.h"

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

// Between jobs: spin this long (the gaps inside a forward step), then yield the core to
// whatever else wants it until kSleep, then sleep until the next job.
constexpr auto kSpin = std::chrono::microseconds(30);
constexpr auto kSleep = std::chrono::microseconds(300);

constexpr uint64_t kChunkBits = 20;
constexpr uint64_t kChunkMask = (uint64_t(1) << kChunkBits) - 1;
constexpr uint32_t kGenerationMask = (uint32_t(1) << 24) - 1;

uint64_t make_ticket(uint32_t generation, int chunks, int next) {
  return (uint64_t(generation & kGenerationMask) << (2 * kChunkBits)) | (uint64_t(chunks) << kChunkBits) |
         uint64_t(next);
}
uint32_t ticket_generation(uint64_t t) { return uint32_t(t >> (2 * kChunkBits)); }
int ticket_chunks(uint64_t t) { return int((t >> kChunkBits) & kChunkMask); }
int ticket_next(uint64_t t) { return int(t & kChunkMask); }

// Spins, then yields, while `busy()` holds and less than `limit` has passed; false on timeout.
template <typename Busy>
bool spin_while(Busy busy, std::chrono::microseconds limit) {
  const auto start = std::chrono::steady_clock::now();
  for (int spins = 1; busy(); ++spins) {
    if (spins % 64 != 0) {
      cpu_relax();
      continue;
    }
    const auto waited = std::chrono::steady_clock::now() - start;
    if (waited > limit) return false;
    if (waited > kSpin) std::this_thread::yield();
  }
  return true;
}

}  // namespace

ThreadPool::ThreadPool(int threads) : threads_(std::max(1, threads)) {
  workers_.reserve(std::size_t(threads_ - 1));
  for (int w = 1; w < threads_; ++w) workers_.emplace_back([this] { worker_loop(); });
}

ThreadPool::~ThreadPool() {
  stop_.store(true);
  generation_.fetch_add(1);
  generation_.notify_all();
  for (std::thread& t : workers_) t.join();
}

void ThreadPool::help(uint32_t generation) {
  const uint32_t want = generation & kGenerationMask;
  uint64_t t = ticket_.load(std::memory_order_acquire);
  for (;;) {
    if (ticket_generation(t) != want || ticket_next(t) >= ticket_chunks(t)) return;
    if (!ticket_.compare_exchange_weak(t, t + 1, std::memory_order_acq_rel, std::memory_order_acquire)) continue;
    // A claimed chunk keeps its job open (the poster waits for it), so job_ is that job's.
    (*job_)(ticket_next(t));
    done_.fetch_add(1, std::memory_order_acq_rel);
    t = ticket_.load(std::memory_order_acquire);
  }
}

void ThreadPool::worker_loop() {
  uint32_t seen = 0;  // the generation at construction: a job posted before this thread ran is still seen
  for (;;) {
    uint32_t now = generation_.load(std::memory_order_acquire);
    if (now == seen) {
      spin_while([&] { return (now = generation_.load(std::memory_order_acquire)) == seen; }, kSleep);
      while (now == seen) {
        generation_.wait(seen, std::memory_order_acquire);
        now = generation_.load(std::memory_order_acquire);
      }
    }
    seen = now;
    if (stop_.load()) return;
    help(now);
  }
}

void ThreadPool::run_chunks(int chunks, const std::function<void(int)>& fn) {
  if (chunks <= 0) return;
  if (chunks > kMaxChunks) throw Error("thread pool: " + std::to_string(chunks) + " chunks, at most " +
                                       std::to_string(kMaxChunks));
  if (threads_ == 1 || chunks == 1) {
    for (int c = 0; c < chunks; ++c) fn(c);
    return;
  }
  job_ = &fn;
  done_.store(0, std::memory_order_relaxed);
  const uint32_t generation = generation_.load(std::memory_order_relaxed) + 1;
  ticket_.store(make_ticket(generation, chunks, 0), std::memory_order_release);
  generation_.store(generation, std::memory_order_release);
  generation_.notify_all();
  help(generation);
  // Chunks still running on workers: short, so wait spinning (and yielding on a busy machine).
  while (!spin_while([&] { return done_.load(std::memory_order_acquire) != chunks; }, kSleep)) {
  }
}

void ThreadPool::parallel_for(int64_t count, int64_t grain,
                              const std::function<void(int64_t, int64_t)>& fn, int chunks_per_thread) {
  if (count <= 0) return;
  grain = std::max<int64_t>(1, grain);
  const int64_t units = (count + grain - 1) / grain;
  const int chunks = int(std::min<int64_t>(int64_t(threads_) * std::max(1, chunks_per_thread), units));
  run_chunks(chunks, [&](int c) {
    const int64_t begin = units * c / chunks * grain;
    const int64_t end = std::min(count, units * (c + 1) / chunks * grain);
    if (begin < end) fn(begin, end);
  });
}

}  // namespace lazyscope::cpu

#pragma once
// Continuous batching over one KV cache (one policy, its own pool and history):
// - FCFS waiting queue; a request is admitted only when the blocks its plan allocates (documents
//   encoded now, materialized/positional copies, query) plus the decode growth it may still need
//   fit beside the growth reserved by every running request. A refused request waits and costs
//   the cache nothing (KvCacheManager::estimate_admission is read-only).
// - Copies are held by their request until it finishes (KvCacheManager's ephemeral segments).
// - A segment is published (findable by later requests) as soon as its KV is complete; before
//   that a later request shares it in flight and runs its copies and prompt once it is complete.
// - Each step runs one batched decode launch for every decoding sequence and fills the rest of
//   the per-step token budget with prefill chunks (document encodes, copies, the prompt), oldest
//   admitted first.
// - Decode growth that still does not fit (only when an estimate was short) preempts the most
//   recently admitted request: its blocks are freed and it is recomputed from scratch later.
// Tokens are greedy (the device argmax path); output lengths are the workload's, or shorter when
// a request generates one of SchedulerOptions::stop_tokens (it counts, like the end of a reply).
#include <atomic>
#include <cstdint>
#include <vector>

#include "engine/kv/cache_manager.h"
#include "engine/serving/serving_result.h"
#include "engine/serving/step_executor.h"
#include "engine/workload/workload.h"

namespace lazyscope {

struct SchedulerOptions {
  Mode mode = Mode::Block;
  Policy policy = Policy::Lazy;
  int step_tokens = 2048;   // tokens per step: decode sequences + prefill chunk tokens
  int max_running = 256;    // sequences admitted at once
  bool keep_samples = true; // ServingResult::samples
  bool keep_tokens = false; // RequestRecord::tokens (eval's answers; tests compare runs token by token)
  std::vector<int32_t> stop_tokens;  // a request ends when it generates one (e.g. the model's EOS)
};

// Streams a run to a GUI or a recorder; called on the scheduler's thread.
class ServingObserver {
 public:
  virtual ~ServingObserver() = default;
  virtual void on_step(const StepSample&) {}
  virtual void on_request_finished(const RequestRecord&) {}
  // The run's cache, once before the first step: a pool map may read it (blocks(), segments())
  // from inside the callbacks above, and in on_end; not after on_end (the cache may be gone).
  virtual void on_start(const KvCacheManager&) {}
  // Once after the last step (or the cancellation), every block the run held returned: the pool
  // as the run leaves it.
  virtual void on_end(const KvCacheManager&) {}
  // ServingEngine::run: where the run's cache reports its block events (allocations, hits,
  // copies, evictions); nullptr: nowhere.
  virtual EventSink* cache_events() { return nullptr; }
};

// Runs the whole workload (or until *cancel). Throws Error when the budget cannot hold some
// request even with nothing else running, naming the budget, the request and what it needs.
// Every block the run held is returned to `cache` (published segments stay cached).
ServingResult run_scheduler(const Workload& workload, KvCacheManager& cache, StepExecutor& executor,
                            const SchedulerOptions& options, ServingObserver* observer = nullptr,
                            const std::atomic<bool>* cancel = nullptr);

}  // namespace lazyscope

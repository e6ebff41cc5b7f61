#pragma once
// The engine's front door: a session owns model, backend, one KV pool and segment cache per
// policy, and runs requests under a mode and a policy, reporting through an EventSink.
#include <atomic>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "base/byte_size.h"
#include "base/progress.h"
#include "engine/kv/cache_manager.h"
#include "engine/kv/policy.h"
#include "engine/events/events.h"
#include "engine/runtime/request.h"
#include "engine/runtime/request_preparation.h"
#include "kernels/backend.h"
#include "kernels/device_trace.h"

namespace lazyscope {

struct LoadedModel;
class Tokenizer;
struct ModelConfig;
struct Workload;
struct SchedulerOptions;
class ServingObserver;
struct ServingResult;


// Every policy a session serves (all_policies(), engine/kv/policy.h) gets its own KV pool of the
// full budget and its own history, so no policy is ever served from blocks another policy
// encoded (a fair comparison).

struct SessionOptions {
  std::filesystem::path model;           // HF directory or .gguf
  std::string synthetic;                 // instead of `model`: random weights of this shape
  uint64_t synthetic_seed = 1;
  BackendKind backend = BackendKind::Auto;
  std::size_t kv_budget_bytes = 64ull << 20;  // per policy
  // When > 0, instead of kv_budget_bytes: this many blocks per policy, whatever the backend's
  // KV element size (fp32 on the CPU, bf16 on the GPU).
  int kv_budget_blocks = 0;
  // The policies this session runs, each with a pool of kv_budget_bytes: the KV memory is
  // kv_budget_bytes x policies.size().
  std::vector<Policy> policies = all_policies();
  int block_size = 16;
  int cpu_threads = 0;                   // 0 = all cores
  int tensor_parallel = 0;               // > 0: the CUDA backend over this many GPUs (--tp); 0: one GPU, plain
  CpuPrecision cpu_precision = CpuPrecision::Fast;  // CPU backend: fast kernels or the exact fp32 reference
  bool trace_device = false;             // CUPTI device trace (CUDA backend only); NVTX ranges are always on
  DeviceTraceOptions trace_options;      // what that trace records (kernel detail for the first decode step by default)
};

struct RunOptions {
  Mode mode = Mode::Block;
  Policy policy = Policy::Lazy;
  int max_new_tokens = -1;               // -1: the request's
  bool keep_logits = true;               // fill RunResult logits; false decodes greedily on the device
  const std::atomic<bool>* cancel = nullptr;
};

struct RunResult {
  std::string mode, policy, backend;
  CpuPrecision cpu_precision = CpuPrecision::Exact;  // what a CPU backend computed with (for the equivalence rule)
  int prompt_tokens = 0;
  std::vector<int32_t> prompt_ids;              // prefix, documents in placement order, query
  std::vector<float> prompt_last_logits;
  std::vector<std::vector<float>> step_logits;  // [0] == prompt_last_logits
  std::vector<int32_t> generated_ids;
  std::string generated_text;
  double ttft_ms = 0.0;
  double decode_ms_per_token = 0.0;
  CacheStats stats;
  bool cancelled = false;
};

using TokenCallback = std::function<void(const TokenEvent&)>;

// One policy's pool as the cache manager keeps it (block ids are indexes into `blocks`).
// The prompt's token ids in order: prefix, documents as placed, query.
std::vector<int32_t> prompt_ids(const PromptLayout& layout);

struct PoolSnapshot {
  Policy policy = Policy::Lazy;
  int block_size = 0;
  std::size_t bytes_per_block = 0;
  std::vector<BlockState> blocks;
  std::vector<CachedSegment> segments;
};

class Session {
 public:
  Session(const SessionOptions& options, EventSink* sink = nullptr, const ProgressFn& progress = {});
  ~Session();
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;

  // The request as this session's model runs it (prepare_request with this model).
  PreparedRequest prepare(const Request& request, const PreparationOptions& options = {}) const;
  RunResult submit(const PreparedRequest& prepared, const RunOptions& options, const TokenCallback& on_token = {});
  // submit(prepare(request)): the default preparation (chat template auto).
  RunResult submit(const Request& request, const RunOptions& options, const TokenCallback& on_token = {});
  // Serves every request of `workload` through the serving scheduler (continuous batching, one
  // batched decode launch per step; engine/serving/scheduler.h) on this session's backend and the
  // KV pool and history of options.policy, under options.mode. Greedy tokens only (no logits).
  ServingResult serve(const Workload& workload, const SchedulerOptions& options, ServingObserver* observer = nullptr,
                      const std::atomic<bool>* cancel = nullptr);

  const ModelConfig& config() const;
  const Tokenizer& tokenizer() const;
  const LoadedModel& model() const;
  std::string backend_name() const;
  std::string device() const;
  // Non-empty when --backend auto could not use the GPU for this model, saying why.
  const std::string& backend_note() const;
  // Empty when trace_device was asked for and works; otherwise why there is no device trace.
  const std::string& device_trace_note() const;
  // Replaces the session's tracer between requests (null: host ranges only, as without
  // trace_device). The old tracer goes first (a CUPTI tracer detaches CUPTI when it goes), then
  // the backend's captured CUDA graphs (recaptured under the new tracer by the next request).
  void set_device_tracer(std::unique_ptr<DeviceTracer> tracer);
  const std::vector<Policy>& policies() const;
  int blocks_per_policy() const;
  // Throws Error when the session does not serve `policy`.
  PoolSnapshot snapshot(Policy policy) const;
  CacheStats cumulative(Policy policy) const;
  // Drops every cached segment of every policy (blocks return to the free lists).
  void clear_cache();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace lazyscope

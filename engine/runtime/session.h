#pragma once
// The engine's front door: a session owns model, backend, KV pool and segment cache, and runs
// requests under a mode and a policy, reporting through an EventSink.
#include <atomic>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "base/byte_size.h"
#include "base/progress.h"
#include "engine/kv/policy.h"
#include "engine/events/events.h"
#include "engine/runtime/request.h"
#include "kernels/backend.h"

namespace lazyscope {

struct LoadedModel;
class Tokenizer;
struct ModelConfig;


struct SessionOptions {
  std::filesystem::path model;           // HF directory or .gguf
  std::string synthetic;                 // instead of `model`: random weights of this shape
  uint64_t synthetic_seed = 1;
  BackendKind backend = BackendKind::Auto;
  std::size_t kv_budget_bytes = 64ull << 20;
  int block_size = 16;
  int cpu_threads = 0;                   // 0 = all cores
  CpuPrecision cpu_precision = CpuPrecision::Fast;  // CPU backend: fast kernels or the exact fp32 reference
  bool trace_device = false;             // CUPTI kernel trace + NVTX ranges (CUDA backend only)
};

struct RunOptions {
  Mode mode = Mode::Block;
  Policy policy = Policy::Lazy;
  int max_new_tokens = -1;               // -1: the request's
  bool keep_logits = true;               // fill RunResult logits
  const std::atomic<bool>* cancel = nullptr;
};

struct RunResult {
  std::string mode, policy, backend;
  int prompt_tokens = 0;
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

struct BlockInfo {
  int64_t segment = -1;  // -1: free
  int refcount = 0;
  int shift = 0;
  int valid = 0;
  uint64_t last_use = 0;
};

struct SegmentInfo {
  int64_t id = 0;
  SegmentKind kind = SegmentKind::Document;
  std::string label;
  int tokens = 0;
  int shift = 0;
  int refcount = 0;
  std::vector<int32_t> blocks;
};

struct PoolSnapshot {
  int block_size = 0;
  std::size_t bytes_per_block = 0;
  std::vector<BlockInfo> blocks;
  std::vector<SegmentInfo> segments;
};

class Session {
 public:
  Session(const SessionOptions& options, EventSink* sink = nullptr, const ProgressFn& progress = {});
  ~Session();
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;

  RunResult submit(const Request& request, const RunOptions& options, const TokenCallback& on_token = {});

  const ModelConfig& config() const;
  const Tokenizer& tokenizer() const;
  const LoadedModel& model() const;
  std::string backend_name() const;
  std::string device() const;
  // Non-empty when --backend auto could not use the GPU for this model, saying why.
  const std::string& backend_note() const;
  // Empty when trace_device was asked for and works; otherwise why there is no device trace.
  const std::string& device_trace_note() const;
  PoolSnapshot snapshot() const;
  CacheStats cumulative(Policy policy) const;
  // Drops every cached segment (blocks return to the free list).
  void clear_cache();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace lazyscope

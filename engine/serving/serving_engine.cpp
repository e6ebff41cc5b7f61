#include "engine/serving/serving_engine.h"

#include <sstream>

#include "base/error.h"
#include "engine/model/model_loader.h"
#include "engine/serving/step_time_model.h"
#include "kernels/backend.h"
#include "kernels/synthetic_shapes.h"

namespace lazyscope {

Mode mode_for(Policy policy) { return policy == Policy::Prefix ? Mode::Full : Mode::Block; }

std::vector<Policy> parse_policy_list(const std::string& text) {
  std::vector<Policy> out;
  std::stringstream ss(text);
  std::string item;
  while (std::getline(ss, item, ',')) {
    if (item.empty()) continue;
    try {
      out.push_back(parse_policy(item));
    } catch (const Error&) {
      throw Error("--policies: unknown policy '" + item + "' (expected a comma-separated list of none, prefix, "
                  "positional, materialized, lazy)");
    }
  }
  if (out.empty()) throw Error("--policies: empty list (expected none, prefix, positional, materialized, lazy)");
  return out;
}

ServingEngine::ServingEngine(const ServingConfig& config, const ProgressFn& progress) : config_(config) {
  if (config.block_size < 1 || config.block_size > 1024) {
    throw Error("--block-size must be between 1 and 1024 tokens (got " + std::to_string(config.block_size) + ")");
  }
  if (config.backend == "accounting") {
    if (!config.model.empty()) throw Error("--backend accounting takes a shape (--shape), not --model");
    shape_ = synthetic_shape(config.synthetic.empty() ? "llama-3.2-1b" : config.synthetic);
    identity_ = "accounting:" + config.synthetic;
    backend_name_ = "accounting";
    const std::size_t element = config.kv_element_bytes ? config.kv_element_bytes : 2;
    bytes_per_block_ = shape_.kv_bytes_per_block(config.block_size, element);
    model_ = std::make_unique<StepTimeModel>(shape_, element, StepTimeConstants::h200());
    return;
  }
  const BackendKind kind = parse_backend_kind(config.backend);
  if (kind == BackendKind::Auto) throw Error("--backend must be cpu, cuda or accounting");
  if (!config.synthetic.empty()) {
    shape_ = synthetic_shape(config.synthetic);
    identity_ = "synthetic:" + config.synthetic + ":" + std::to_string(config.weight_seed);
    backend_ = make_backend(kind, config.cpu_threads, CpuPrecision::Exact, config.tensor_parallel);
    if (std::string why = backend_->unsupported_reason(shape_); !why.empty()) throw Error(why);
    if (progress) progress(0.2, "making synthetic " + config.synthetic + " weights on " + backend_->name());
    backend_->load_synthetic(shape_, config.weight_seed);
  } else {
    if (config.model.empty()) throw Error("--backend " + config.backend + " needs --model DIR|FILE or --synthetic SHAPE");
    loaded_ = std::make_unique<LoadedModel>(load_model(config.model, progress));
    shape_ = loaded_->config.shape;
    identity_ = loaded_->identity;
    backend_ = make_backend(kind, config.cpu_threads, CpuPrecision::Exact, config.tensor_parallel);
    if (std::string why = backend_->unsupported_reason(shape_); !why.empty()) throw Error(why);
    if (progress) progress(0.9, "uploading weights to " + backend_->name());
    backend_->load(shape_, loaded_->weights.view());
  }
  backend_name_ = backend_->name();
  bytes_per_block_ = shape_.kv_bytes_per_block(config.block_size, backend_->kv_element_bytes());
  if (progress) progress(1.0, "ready");
}

ServingEngine::~ServingEngine() = default;

int ServingEngine::blocks_for_budget(int64_t budget_bytes, const Workload& w) const {
  const int B = config_.block_size;
  auto bl = [B](int64_t tokens) { return (tokens + B - 1) / B; };
  if (budget_bytes == 0) {
    if (backend_) throw Error("an unlimited --kv-budget needs --backend accounting (a real pool must fit the device)");
    const WorkloadOptions& o = w.options;
    const int64_t doc = bl(o.doc_tokens);
    const int64_t running = o.open_loop() ? std::min<int64_t>(o.requests, 65536) : o.concurrency;
    // Every base and a positional copy per (document, slot); every request's own blocks; the
    // prefix policy's chained blocks of every distinct prompt.
    int64_t blocks = int64_t(o.documents) * doc * (o.docs_per_request + 1) + bl(o.prefix_tokens) +
                     running * (doc * o.docs_per_request + bl(o.prefix_tokens) + bl(o.query_tokens + o.output_tokens) + 2) +
                     int64_t(o.requests) * (bl(o.prefix_tokens + int64_t(o.docs_per_request) * o.doc_tokens + o.query_tokens) + 1);
    if (blocks > 8'000'000) throw Error("an unlimited --kv-budget for this workload needs more than 8 million blocks");
    return int(blocks);
  }
  if (budget_bytes < 0) throw Error("--kv-budget must not be negative");
  const int64_t blocks = budget_bytes / int64_t(bytes_per_block_);
  if (blocks == 0) {
    throw Error("--kv-budget of " + std::to_string(budget_bytes) + " bytes holds no KV block (one block of " +
                std::to_string(B) + " tokens takes " + std::to_string(bytes_per_block_) + " bytes for this model)");
  }
  if (blocks > 8'000'000) throw Error("--kv-budget too large: more than 8 million blocks");
  return int(blocks);
}

ServingResult ServingEngine::run(const Workload& workload, int64_t budget_bytes, Policy policy,
                                 SchedulerOptions options, ServingObserver* observer, const std::atomic<bool>* cancel) {
  if (workload.options.vocab_size > shape_.vocab_size) {
    throw Error("the workload draws token ids below " + std::to_string(workload.options.vocab_size) +
                " but the model's vocabulary has " + std::to_string(shape_.vocab_size));
  }
  const int blocks = blocks_for_budget(budget_bytes, workload);
  options.mode = mode_for(policy);
  options.policy = policy;
  // A fresh pool and a cache without history for every run (no policy sees another's blocks).
  KvCacheManager cache(blocks, config_.block_size, bytes_per_block_, identity_,
                       observer ? observer->cache_events() : nullptr, nullptr, to_string(policy));
  std::unique_ptr<StepExecutor> executor;
  if (backend_) {
    backend_->allocate_pool(blocks, config_.block_size);
    executor = make_backend_executor(*backend_);
  } else {
    executor = make_accounting_executor(*model_);
  }
  ServingResult r = run_scheduler(workload, cache, *executor, options, observer, cancel);
  r.kv_budget_bytes = budget_bytes;
  return r;
}

}  // namespace lazyscope

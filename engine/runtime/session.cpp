#include "engine/runtime/session.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <map>
#include <mutex>
#include <optional>

#include "base/error.h"
#include "base/limits.h"
#include "engine/kv/cache_manager.h"
#include "engine/model/model_loader.h"
#include "engine/serving/scheduler.h"
#include "kernels/synthetic_shapes.h"

namespace lazyscope {
namespace {

using Clock = std::chrono::steady_clock;

double ms_since(Clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

// The greedy token: first index of the largest logit (what Backend::forward_greedy picks).
int32_t argmax(const std::vector<float>& logits) {
  int32_t best = 0;
  for (std::size_t i = 1; i < logits.size(); ++i) {
    if (logits[i] > logits[std::size_t(best)]) best = int32_t(i);
  }
  return best;
}

// One policy's share of the backend's pool: blocks [first_block, first_block + blocks). The
// cache manager numbers its blocks from 0; the backend sees them shifted into this range.
struct PolicyPool {
  Policy policy = Policy::Lazy;
  int first_block = 0;
  std::unique_ptr<KvCacheManager> cache;
};

// A plan's step in the backend's block numbering. Owns its arrays (ForwardStep only views them).
struct DeviceStep {
  std::vector<int32_t> slots;
  std::vector<BlockRef> table;
  ForwardStep step;
  DeviceStep(const SegmentTask& task, int first_block, int block_size, bool want_logits) {
    const int32_t slot_offset = first_block * block_size;
    slots.reserve(task.slots.size());
    for (int32_t s : task.slots) slots.push_back(s + slot_offset);
    table = task.table;
    for (BlockRef& r : table) r.block += first_block;
    step = ForwardStep{task.tokens, task.positions, slots, table, task.lazy, want_logits};
  }
  DeviceStep(const DeviceStep&) = delete;  // `step` views this object's own arrays
  DeviceStep& operator=(const DeviceStep&) = delete;
};

// The serving scheduler's steps on one policy's share of the backend's pool: its block ids and
// slots are the cache manager's, shifted into [first_block, first_block + blocks).
class PoolExecutor final : public StepExecutor {
 public:
  PoolExecutor(Backend& backend, int first_block, int block_size)
      : inner_(make_backend_executor(backend)), first_block_(first_block), slot_offset_(first_block * block_size) {}
  std::string mode() const override { return inner_->mode(); }
  double now_s() override { return inner_->now_s(); }
  void start() override { inner_->start(); }
  void wait_until(double t_s) override { inner_->wait_until(t_s); }
  double busy_s() const override { return inner_->busy_s(); }
  void run(StepWork& work) override {
    for (PrefillPiece& p : work.prefill) {
      for (int32_t& s : p.slots) s += slot_offset_;
      shift(p.table);
      for (BlockCopy& c : p.copies) {
        c.src += first_block_;
        c.dst += first_block_;
      }
    }
    for (auto& slots : work.decode_slots) {
      for (int32_t& s : slots) s += slot_offset_;
    }
    for (auto& table : work.decode_tables) shift(table);
    inner_->run(work);
  }

 private:
  void shift(std::vector<BlockRef>& table) const {
    for (BlockRef& r : table) r.block += first_block_;
  }
  std::unique_ptr<StepExecutor> inner_;
  int first_block_ = 0;
  int32_t slot_offset_ = 0;
};

}  // namespace

std::vector<int32_t> prompt_ids(const PromptLayout& layout) {
  std::vector<int32_t> ids = layout.prefix;
  for (const auto& doc : layout.documents) ids.insert(ids.end(), doc.begin(), doc.end());
  ids.insert(ids.end(), layout.query.begin(), layout.query.end());
  return ids;
}


struct Session::Impl {
  LoadedModel model;
  std::unique_ptr<Backend> backend;
  std::vector<Policy> policies;
  int blocks_per_policy = 0;
  std::vector<PolicyPool> pools;
  EventSink* sink = nullptr;
  bool synthetic = false;  // no tokenizer: requests must carry ids
  std::string note;        // why the backend differs from the one asked for
  CpuPrecision cpu_precision = CpuPrecision::Exact;  // the CPU backend's arithmetic (Exact on a GPU)
  std::string decode(const std::vector<int32_t>& ids) const {
    if (!synthetic) return model.tokenizer.decode(ids);
    std::string out;
    for (int32_t id : ids) {
      out.push_back('<');
      out.append(std::to_string(id));
      out.push_back('>');
    }
    return out;
  }
  PolicyPool& pool(Policy policy) {
    for (PolicyPool& p : pools) {
      if (p.policy == policy) return p;
    }
    std::string served;
    for (Policy q : policies) served += std::string(served.empty() ? "" : ", ") + to_string(q);
    throw Error(std::string("this session has no KV pool for policy '") + to_string(policy) + "' (it serves " +
                served + ")");
  }
  const PolicyPool& pool(Policy policy) const { return const_cast<Impl*>(this)->pool(policy); }
  mutable std::mutex stats_mutex;
  std::map<Policy, CacheStats> cumulative;
  std::unique_ptr<DeviceTracer> tracer;  // after `backend`: flushed before the backend goes; never null
  std::string trace_note;                // why there is no device trace, when one was asked for
  int64_t requests_finished = 0;         // the next request's number (its NVTX payload) is this + 1
};

Session::Session(const SessionOptions& options, EventSink* sink, const ProgressFn& progress)
    : impl_(std::make_unique<Impl>()) {
  impl_->sink = sink;
  if (!options.synthetic.empty()) {
    impl_->synthetic = true;
    impl_->model.config.shape = synthetic_shape(options.synthetic);
    impl_->model.config.name = "synthetic " + options.synthetic;
    // Random weights have no trained context; allow what the largest real shape (Llama 3.1) has.
    impl_->model.config.max_position_embeddings = 131072;
    impl_->model.identity = "synthetic:" + options.synthetic + ":" + std::to_string(options.synthetic_seed);
    impl_->backend = make_backend_for(options.backend, impl_->model.config.shape, options.cpu_threads, &impl_->note,
                                               options.cpu_precision, options.tensor_parallel);
    if (progress) progress(0.1, "making synthetic weights on " + impl_->backend->name());
    impl_->backend->load_synthetic(impl_->model.config.shape, options.synthetic_seed);
  } else {
    // The fast CPU backend reads GGUF blocks as stored: no fp32 copy of the matrices then.
    LoadOptions load;
    const bool cpu = options.backend == BackendKind::Cpu ||
                     (options.backend == BackendKind::Auto && cuda_device_count() == 0);
    load.fp32_matrices = !(cpu && options.cpu_precision == CpuPrecision::Fast);
    impl_->model = load_model(options.model, progress, load);
    impl_->backend = make_backend_for(options.backend, impl_->model.config.shape, options.cpu_threads, &impl_->note,
                                               options.cpu_precision, options.tensor_parallel);
    if (progress) progress(0.95, "uploading weights to " + impl_->backend->name());
    impl_->backend->load(impl_->model.config.shape, impl_->model.weights.view());
  }
  if (impl_->backend->name() == "cpu") impl_->cpu_precision = options.cpu_precision;
  if (options.block_size < 1 || options.block_size > 1024) {
    throw Error("block size must be between 1 and 1024 tokens");
  }
  const std::size_t per_block =
      impl_->model.config.shape.kv_bytes_per_block(options.block_size, impl_->backend->kv_element_bytes());
  if (options.kv_budget_blocks < 0) throw Error("KV budget in blocks must be positive");
  const std::size_t blocks =
      options.kv_budget_blocks > 0 ? std::size_t(options.kv_budget_blocks) : options.kv_budget_bytes / per_block;
  if (blocks == 0) {
    throw Error("KV budget of " + std::to_string(options.kv_budget_bytes) + " bytes holds no block (one block of " +
                std::to_string(options.block_size) + " tokens takes " + std::to_string(per_block) + " bytes)");
  }
  for (Policy p : options.policies) {
    if (std::find(impl_->policies.begin(), impl_->policies.end(), p) == impl_->policies.end()) {
      impl_->policies.push_back(p);
    }
  }
  if (impl_->policies.empty()) throw Error("the session serves no policy: give at least one");
  if (blocks * impl_->policies.size() > 8'000'000) {
    throw Error("KV budget too large for this model: more than 8 million blocks over " +
                std::to_string(impl_->policies.size()) + " policy pools");
  }
  impl_->blocks_per_policy = int(blocks);
  impl_->backend->allocate_pool(int(blocks * impl_->policies.size()), options.block_size);
  constexpr int64_t kSegmentIdsPerPool = int64_t(1) << 40;
  for (std::size_t k = 0; k < impl_->policies.size(); ++k) {
    PolicyPool pool;
    pool.policy = impl_->policies[k];
    pool.first_block = int(k * blocks);
    pool.cache = std::make_unique<KvCacheManager>(int(blocks), options.block_size, per_block, impl_->model.identity,
                                                  sink, nullptr, to_string(pool.policy),
                                                  int64_t(k) * kSegmentIdsPerPool + 1);
    impl_->pools.push_back(std::move(pool));
  }
  if (options.trace_device) {
    if (impl_->backend->name() != "cuda") {
      impl_->trace_note = "device traces need the CUDA backend (this session runs on " + impl_->backend->name() + ")";
    } else {
      impl_->tracer = make_device_tracer(options.trace_options, &impl_->trace_note);
    }
  }
  // Without a device trace the engine's ranges still reach NVTX and the report.
  if (!impl_->tracer) impl_->tracer = std::make_unique<HostRangeTracer>();
  if (progress) progress(1.0, "ready");
}

Session::~Session() = default;

const ModelConfig& Session::config() const { return impl_->model.config; }
const Tokenizer& Session::tokenizer() const { return impl_->model.tokenizer; }
const LoadedModel& Session::model() const { return impl_->model; }
std::string Session::backend_name() const { return impl_->backend->name(); }
std::string Session::device() const { return impl_->backend->device(); }
const std::string& Session::backend_note() const { return impl_->note; }
const std::string& Session::device_trace_note() const { return impl_->trace_note; }

void Session::set_device_tracer(std::unique_ptr<DeviceTracer> tracer) {
  impl_->tracer.reset();
  // Graphs captured before are dropped: every graph a trace sees is instantiated under it.
  impl_->backend->drop_graphs();
  impl_->tracer = tracer ? std::move(tracer) : std::make_unique<HostRangeTracer>();
}

CacheStats Session::cumulative(Policy policy) const {
  std::lock_guard lock(impl_->stats_mutex);
  auto it = impl_->cumulative.find(policy);
  return it == impl_->cumulative.end() ? CacheStats{} : it->second;
}

void Session::clear_cache() {
  for (PolicyPool& p : impl_->pools) p.cache->clear();
}

const std::vector<Policy>& Session::policies() const { return impl_->policies; }
int Session::blocks_per_policy() const { return impl_->blocks_per_policy; }

PoolSnapshot Session::snapshot(Policy policy) const {
  const PolicyPool& pool = impl_->pool(policy);
  PoolSnapshot snap;
  snap.policy = policy;
  snap.block_size = pool.cache->block_size();
  snap.bytes_per_block = pool.cache->bytes_per_block();
  snap.blocks = pool.cache->blocks();
  snap.segments = pool.cache->segments();
  return snap;
}

PreparedRequest Session::prepare(const Request& request, const PreparationOptions& options) const {
  return prepare_request(request, options, prompt_model_of(impl_->model, !impl_->synthetic));
}

RunResult Session::submit(const Request& request, const RunOptions& options, const TokenCallback& on_token) {
  return submit(prepare(request), options, on_token);
}

ServingResult Session::serve(const Workload& workload, const SchedulerOptions& options, ServingObserver* observer,
                             const std::atomic<bool>* cancel) {
  PolicyPool& pool = impl_->pool(options.policy);
  PoolExecutor executor(*impl_->backend, pool.first_block, pool.cache->block_size());
  return run_scheduler(workload, *pool.cache, executor, options, observer, cancel);
}

RunResult Session::submit(const PreparedRequest& prepared, const RunOptions& options, const TokenCallback& on_token) {
  Impl& im = *impl_;
  const Clock::time_point t0 = Clock::now();
  // The request's number in this session (the recorder's requests.id): every range of it carries
  // it as its NVTX payload.
  const int64_t request_id = im.requests_finished + 1;
  std::optional<DeviceRange> request_range(std::in_place, im.tracer.get(),
                                           std::string("request (") + to_string(options.policy) + ")", request_id);
  const PromptLayout& layout = prepared.layout;
  PolicyPool& pool = im.pool(options.policy);
  KvCacheManager& cache = *pool.cache;
  const int block_size = cache.block_size();
  // Positions past the model's context were never trained: refuse the prompt before any work,
  // and stop generating where the context ends.
  const int64_t context = im.model.config.max_position_embeddings;
  if (layout.total_tokens() > context) {
    throw Error("the prompt is " + std::to_string(layout.total_tokens()) +
                " tokens; the model's context (max_position_embeddings) holds " + std::to_string(context));
  }
  const int64_t requested_new = options.max_new_tokens >= 0 ? options.max_new_tokens : prepared.max_new_tokens;
  check_range<int64_t>("max_new_tokens", requested_new, 0, limits::kMaxNewTokens);
  const int max_new = int(std::min<int64_t>(requested_new, context - layout.total_tokens()));
  RequestPlan plan = cache.plan(layout, options.mode, options.policy);

  RunResult result;
  result.mode = to_string(options.mode);
  result.policy = to_string(options.policy);
  result.backend = im.backend->name();
  result.cpu_precision = im.cpu_precision;
  result.prompt_tokens = layout.total_tokens();
  result.prompt_ids = prompt_ids(layout);
  auto cancelled = [&] { return options.cancel && options.cancel->load(); };
  try {
    for (const Placement& p : plan.placements) {
      // Served from the pool (hits) and rotated copies made for this request; encodes follow.
      if (!im.sink || !(p.hit || p.kind == SegmentKind::Copy)) continue;
      SegmentEvent e;
      e.policy = result.policy;
      e.segment = p.segment;
      e.kind = p.kind;
      e.label = p.label;
      e.tokens = p.tokens;
      e.encode_position = p.kind == SegmentKind::Copy ? p.start : p.start - p.shift;
      e.shift = p.shift;
      e.source_segment = p.source_segment;
      e.blocks = p.blocks;
      e.from_cache = p.hit;
      im.sink->on_segment(e);
    }
    for (const SegmentTask& task : plan.encodes) {
      const Clock::time_point te = Clock::now();
      const DeviceStep step(task, pool.first_block, block_size, false);
      {
        DeviceRange range(im.tracer.get(), "encode segment " + std::to_string(task.segment), request_id);
        im.backend->forward(step.step, nullptr);
        im.backend->synchronize();
      }
      if (im.sink) {
        SegmentEvent e;
        e.policy = result.policy;
        e.segment = task.segment;
        e.tokens = int(task.tokens.size());
        e.encode_position = task.positions.empty() ? 0 : task.positions.front();
        for (const Placement& p : plan.placements) {
          if (p.segment == task.segment) {
            e.kind = p.kind;
            e.label = p.label;
          }
        }
        for (const BlockRef& r : task.table) e.blocks.push_back(r.block);
        e.encode_ms = ms_since(te);
        im.sink->on_segment(e);
      }
    }
    if (!plan.copies.empty()) {
      DeviceRange range(im.tracer.get(), "copy " + std::to_string(plan.copies.size()) + " blocks", request_id);
      std::vector<BlockCopy> copies = plan.copies;
      for (BlockCopy& c : copies) {
        c.src += pool.first_block;
        c.dst += pool.first_block;
      }
      im.backend->copy_blocks(copies);
    }
    // Keeping logits reads every step's logits back; otherwise the backend picks the greedy
    // token itself (on a GPU only the token comes back).
    std::vector<float> logits;
    int32_t greedy = -1;
    auto run_step = [&](const SegmentTask& task) {
      const DeviceStep ds(task, pool.first_block, block_size, true);
      if (options.keep_logits) {
        im.backend->forward(ds.step, &logits);
        greedy = argmax(logits);
      } else {
        greedy = im.backend->forward_greedy(ds.step);
      }
    };
    {
      DeviceRange range(im.tracer.get(),
                        "prefill " + std::to_string(plan.prompt.tokens.size()) + " tokens (" + result.policy + ")",
                        request_id);
      run_step(plan.prompt);
    }
    if (options.keep_logits) result.prompt_last_logits = logits;
    const std::vector<int32_t> eos = im.synthetic ? std::vector<int32_t>{} : im.model.tokenizer.eos_ids();
    std::string emitted_text;
    Clock::time_point first_token_at = Clock::now();
    for (int step_index = 0; step_index < max_new && !cancelled(); ++step_index) {
      if (options.keep_logits) result.step_logits.push_back(logits);
      const int32_t token = greedy;
      result.generated_ids.push_back(token);
      const double now_ms = ms_since(t0);
      if (step_index == 0) {
        result.ttft_ms = now_ms;
        first_token_at = Clock::now();
      }
      const bool is_eos = std::find(eos.begin(), eos.end(), token) != eos.end();
      std::vector<int32_t> visible = result.generated_ids;
      if (is_eos) visible.pop_back();
      std::string text = im.decode(visible);
      TokenEvent te{result.policy, step_index, token,
                    text.size() >= emitted_text.size() ? text.substr(emitted_text.size()) : text, now_ms};
      emitted_text = text;
      if (im.sink) im.sink->on_token(te);
      if (on_token) on_token(te);
      if (is_eos || step_index + 1 == max_new) break;
      SegmentTask next = cache.next_decode_step(plan, token);
      if (im.tracer->decode_step(step_index + 1)) im.backend->next_decode_without_graph();
      DeviceRange range(im.tracer.get(), "decode step " + std::to_string(step_index + 1), request_id);
      run_step(next);
    }
    if (result.generated_ids.size() > 1) {
      result.decode_ms_per_token = std::chrono::duration<double, std::milli>(Clock::now() - first_token_at).count() /
                                   double(result.generated_ids.size() - 1);
    }
    if (max_new == 0 && options.keep_logits) result.step_logits.push_back(result.prompt_last_logits);
    result.cancelled = cancelled();
    std::vector<int32_t> visible = result.generated_ids;
    if (!visible.empty() && std::find(eos.begin(), eos.end(), visible.back()) != eos.end()) visible.pop_back();
    result.generated_text = im.decode(visible);
  } catch (...) {
    cache.finish(plan, false);
    throw;
  }
  cache.finish(plan, true);
  result.stats = plan.stats;
  RequestFinishedEvent done;
  {
    std::lock_guard lock(im.stats_mutex);
    im.cumulative[options.policy] += plan.stats;
    done.cumulative = im.cumulative[options.policy];
  }
  done.policy = result.policy;
  done.mode = result.mode;
  done.prompt_tokens = result.prompt_tokens;
  done.generated_tokens = int(result.generated_ids.size());
  done.ttft_ms = result.ttft_ms;
  done.decode_ms_per_token = result.decode_ms_per_token;
  done.stats = plan.stats;
  done.cancelled = result.cancelled;
  request_range.reset();
  ++im.requests_finished;
  const DeviceActivity activity = im.tracer->drain();
  if (im.sink) im.sink->on_device_activity(activity);
  if (im.sink) im.sink->on_request_finished(done);
  return result;
}

}  // namespace lazyscope

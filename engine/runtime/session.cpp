#include "engine/runtime/session.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <map>
#include <mutex>

#include "engine/kv/cache_manager.h"
#include "engine/model/model_loader.h"
#include "engine/runtime/prompt_builder.h"
#include "kernels/synthetic_shapes.h"
#include "kernels/cpu/ops.h"
#include "base/error.h"

namespace lazyscope {
namespace {

using Clock = std::chrono::steady_clock;

double ms_since(Clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

}  // namespace

struct Session::Impl {
  LoadedModel model;
  std::unique_ptr<Backend> backend;
  std::unique_ptr<KvCacheManager> cache;
  EventSink* sink = nullptr;
  bool synthetic = false;  // no tokenizer: requests must carry ids
  std::string note;        // why the backend differs from the one asked for
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
  mutable std::mutex stats_mutex;
  std::map<Policy, CacheStats> cumulative;
  std::unique_ptr<DeviceTracer> tracer;  // after `backend`: flushed before the backend goes
  std::string trace_note;                // why there is no device trace, when one was asked for
};

Session::Session(const SessionOptions& options, EventSink* sink, const ProgressFn& progress)
    : impl_(std::make_unique<Impl>()) {
  impl_->sink = sink;
  if (!options.synthetic.empty()) {
    impl_->synthetic = true;
    impl_->model.config.shape = synthetic_shape(options.synthetic);
    impl_->model.config.name = "synthetic " + options.synthetic;
    impl_->model.identity = "synthetic:" + options.synthetic + ":" + std::to_string(options.synthetic_seed);
    impl_->backend = make_backend_for(options.backend, impl_->model.config.shape, options.cpu_threads, &impl_->note,
                                               options.cpu_precision);
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
                                               options.cpu_precision);
    if (progress) progress(0.95, "uploading weights to " + impl_->backend->name());
    impl_->backend->load(impl_->model.config.shape, impl_->model.weights.view());
  }
  if (options.block_size < 1 || options.block_size > 1024) {
    throw Error("block size must be between 1 and 1024 tokens");
  }
  const std::size_t per_block =
      impl_->model.config.shape.kv_bytes_per_block(options.block_size, impl_->backend->kv_element_bytes());
  const std::size_t blocks = options.kv_budget_bytes / per_block;
  if (blocks == 0) {
    throw Error("KV budget of " + std::to_string(options.kv_budget_bytes) + " bytes holds no block (one block of " +
                std::to_string(options.block_size) + " tokens takes " + std::to_string(per_block) + " bytes)");
  }
  if (blocks > 8'000'000) throw Error("KV budget too large for this model: more than 8 million blocks");
  impl_->backend->allocate_pool(int(blocks), options.block_size);
  impl_->cache = std::make_unique<KvCacheManager>(int(blocks), options.block_size, per_block,
                                                   impl_->model.identity, sink);
  if (options.trace_device) {
    if (impl_->backend->name() != "cuda") {
      impl_->trace_note = "device traces need the CUDA backend (this session runs on " + impl_->backend->name() + ")";
    } else {
      impl_->tracer = make_device_tracer(&impl_->trace_note);
    }
  }
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

CacheStats Session::cumulative(Policy policy) const {
  std::lock_guard lock(impl_->stats_mutex);
  auto it = impl_->cumulative.find(policy);
  return it == impl_->cumulative.end() ? CacheStats{} : it->second;
}

void Session::clear_cache() { impl_->cache->clear(); }

PoolSnapshot Session::snapshot() const {
  PoolSnapshot snap;
  snap.block_size = impl_->cache->block_size();
  snap.bytes_per_block = impl_->cache->bytes_per_block();
  for (const BlockState& b : impl_->cache->blocks()) {
    snap.blocks.push_back(BlockInfo{b.segment, b.refcount, b.shift, b.valid, b.last_use});
  }
  for (const CachedSegment& s : impl_->cache->segments()) {
    snap.segments.push_back(SegmentInfo{s.id, s.kind, s.label, int(s.tokens.size()), s.shift, s.refcount, s.blocks});
  }
  return snap;
}

RunResult Session::submit(const Request& request, const RunOptions& options, const TokenCallback& on_token) {
  Impl& im = *impl_;
  const ModelShape& shape = im.model.config.shape;
  const Clock::time_point t0 = Clock::now();
  PromptLayout layout =
      build_prompt_layout(request, im.synthetic ? nullptr : &im.model.tokenizer, shape.vocab_size);
  RequestPlan plan = im.cache->plan(layout, options.mode, options.policy);

  RunResult result;
  result.mode = to_string(options.mode);
  result.policy = to_string(options.policy);
  result.backend = im.backend->name();
  result.prompt_tokens = layout.total_tokens();
  const int max_new = options.max_new_tokens >= 0 ? options.max_new_tokens : request.max_new_tokens;
  auto cancelled = [&] { return options.cancel && options.cancel->load(); };
  try {
    for (const Placement& p : plan.placements) {
      if (!p.hit || !im.sink) continue;
      SegmentEvent e;
      e.segment = p.segment;
      e.kind = p.kind;
      e.label = p.label;
      e.tokens = p.tokens;
      e.encode_position = p.start - p.shift;
      e.shift = p.shift;
      e.from_cache = true;
      im.sink->on_segment(e);
    }
    for (const SegmentTask& task : plan.encodes) {
      const Clock::time_point te = Clock::now();
      ForwardStep step{task.tokens, task.positions, task.slots, task.table, task.lazy, false};
      {
        DeviceRange range(im.tracer.get(), "encode segment " + std::to_string(task.segment));
        im.backend->forward(step, nullptr);
        im.backend->synchronize();
      }
      if (im.sink) {
        SegmentEvent e;
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
      DeviceRange range(im.tracer.get(), "copy " + std::to_string(plan.copies.size()) + " blocks");
      im.backend->copy_blocks(plan.copies);
    }
    std::vector<float> logits;
    const SegmentTask& pt = plan.prompt;
    ForwardStep prompt_step{pt.tokens, pt.positions, pt.slots, pt.table, pt.lazy, true};
    {
      DeviceRange range(im.tracer.get(), "prefill " + std::to_string(pt.tokens.size()) + " tokens (" + result.policy + ")");
      im.backend->forward(prompt_step, &logits);
    }
    result.prompt_last_logits = logits;
    const std::vector<int32_t> eos = im.synthetic ? std::vector<int32_t>{} : im.model.tokenizer.eos_ids();
    std::string emitted_text;
    Clock::time_point first_token_at = Clock::now();
    for (int step_index = 0; step_index < max_new && !cancelled(); ++step_index) {
      if (options.keep_logits) result.step_logits.push_back(logits);
      const int32_t token = cpu::argmax(logits.data(), int(logits.size()));
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
      SegmentTask next = im.cache->next_decode_step(plan, token);
      ForwardStep ds{next.tokens, next.positions, next.slots, next.table, next.lazy, true};
      DeviceRange range(im.tracer.get(), "decode step " + std::to_string(step_index + 1));
      im.backend->forward(ds, &logits);
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
    if (!options.keep_logits) result.prompt_last_logits.clear();
  } catch (...) {
    im.cache->finish(plan, false);
    throw;
  }
  im.cache->finish(plan, true);
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
  if (im.tracer) {
    const std::vector<DeviceSpan> spans = im.tracer->drain();
    if (im.sink) im.sink->on_device_spans(spans);
  }
  if (im.sink) im.sink->on_request_finished(done);
  return result;
}

}  // namespace lazyscope

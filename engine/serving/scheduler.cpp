#include "engine/serving/scheduler.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <deque>
#include <exception>
#include <functional>
#include <memory>
#include <unordered_set>

#include "base/error.h"

namespace lazyscope {
namespace {

int blocks_for(int tokens, int block_size) { return (tokens + block_size - 1) / block_size; }

int64_t table_tokens(const std::vector<BlockRef>& table) {
  int64_t n = 0;
  for (const BlockRef& r : table) n += r.valid;
  return n;
}

// The first `tokens` entries of the flattened table (a chunk attends to what precedes its end).
std::vector<BlockRef> truncate_table(const std::vector<BlockRef>& table, int64_t tokens) {
  std::vector<BlockRef> out;
  for (const BlockRef& r : table) {
    if (tokens <= 0) break;
    BlockRef c = r;
    c.valid = int32_t(std::min<int64_t>(r.valid, tokens));
    tokens -= c.valid;
    out.push_back(c);
  }
  return out;
}

struct Item {
  const SegmentTask* task = nullptr;  // nullptr: the plan's copies
  bool greedy = false;
};

struct Live {
  int request = 0;
  RequestPlan plan;
  std::vector<Item> items;
  std::size_t item = 0;
  int offset = 0;
  bool decoding = false;
  int32_t last = 0;
  int generated = 0;
  bool stopped = false;  // generated a stop token
  int reserved = 0;  // decode blocks it may still allocate
  // plan.awaits: segments another running request still encodes. The prefix among them gates
  // this request's own encodes (they attend to it); all of them gate its copies and prompt.
  int64_t awaited_prefix = -1;
  bool awaits_complete = false;
};

// Whether `l` may run its next item now (every segment that item reads is complete).
bool item_ready(Live& l, const KvCacheManager& cache) {
  if (l.awaits_complete) return true;
  const Item& it = l.items[l.item];
  if (it.task && !it.greedy) return l.awaited_prefix < 0 || cache.complete(l.awaited_prefix);
  for (int64_t id : l.plan.awaits) {
    if (!cache.complete(id)) return false;
  }
  l.awaits_complete = true;
  return true;
}

// The blocks a request's generated tokens may add after the plan (the upper bound before it).
int growth_bound(int output_tokens, int block_size) {
  return output_tokens <= 1 ? 0 : blocks_for(output_tokens - 1, block_size) + 1;
}

int growth_exact(const RequestPlan& plan, int output_tokens, int block_size) {
  const int appended = output_tokens - 1;  // the last token is never fed back
  if (appended <= 0) return 0;
  int free_slots = 0;
  if (!plan.prompt.slots.empty() && !plan.table.empty() && plan.prompt.slots.back() / block_size == plan.table.back().block) {
    free_slots = block_size - plan.table.back().valid;
  }
  return appended <= free_slots ? 0 : blocks_for(appended - free_slots, block_size);
}

void fill_record(RequestRecord& rec, const RequestPlan& plan) {
  rec.prompt_tokens = int(plan.stats.prompt_tokens);
  rec.prefix_tokens = 0;
  rec.prefix_hit = false;
  rec.document_tokens = rec.cached_document_tokens = rec.documents = rec.document_hits = rec.repeats = 0;
  rec.in_flight_hits = 0;
  std::unordered_set<std::string> seen;
  for (const Placement& p : plan.placements) {
    if (p.kind == SegmentKind::Prefix) {
      rec.prefix_tokens = p.tokens;
      rec.prefix_hit = p.hit && p.tokens > 0;
    } else if (p.kind == SegmentKind::Document || p.kind == SegmentKind::Copy) {
      rec.documents += 1;
      rec.document_tokens += p.tokens;
      const bool repeat = !seen.insert(p.label).second || p.repeat;
      if (repeat) {
        rec.repeats += 1;
      } else if (p.hit) {
        rec.document_hits += 1;
        rec.in_flight_hits += p.in_flight ? 1 : 0;
        if (plan.mode == Mode::Block) rec.cached_document_tokens += p.tokens;
      }
    }
  }
  if (plan.mode == Mode::Full) {
    // Chained full blocks: the cached run may end inside a document.
    const int64_t past_prefix = plan.stats.cached_tokens - std::min<int64_t>(rec.prefix_tokens, plan.stats.cached_tokens);
    rec.cached_document_tokens = int(std::min<int64_t>(past_prefix, rec.document_tokens));
  }
  rec.bytes_copied = plan.stats.bytes_copied;
}

std::string mib(double bytes) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.1f MiB", bytes / 1048576.0);
  return buf;
}

}  // namespace

ServingResult run_scheduler(const Workload& workload, KvCacheManager& cache, StepExecutor& executor,
                            const SchedulerOptions& options, ServingObserver* observer,
                            const std::atomic<bool>* cancel) {
  check_mode_policy(options.mode, options.policy);
  if (options.step_tokens < 1 || options.step_tokens > 1 << 20) {
    throw Error("--step-tokens must be between 1 and 1048576 (got " + std::to_string(options.step_tokens) + ")");
  }
  if (options.max_running < 1 || options.max_running > 65536) {
    throw Error("--max-running must be between 1 and 65536 (got " + std::to_string(options.max_running) + ")");
  }
  if (observer) observer->on_start(cache);
  const auto wall0 = std::chrono::steady_clock::now();
  const WorkloadOptions& wo = workload.options;
  const int B = cache.block_size();
  const int total = int(workload.requests.size());

  ServingResult result;
  result.policy = to_string(options.policy);
  result.mode = to_string(options.mode);
  result.backend = executor.mode();
  result.num_blocks = cache.num_blocks();
  result.block_size = B;
  result.records.resize(total);
  for (int r = 0; r < total; ++r) {
    result.records[r].index = r;
    result.records[r].arrival_s = workload.requests[r].arrival_s;
  }

  std::deque<int> waiting;
  std::vector<std::unique_ptr<Live>> live;  // admission order: the newest is last
  int next_arrival = 0;                     // open loop: by time; closed loop: as clients free up
  int finished = 0;
  int64_t reserved_total = 0;
  // A refused head is tried again only after blocks came back (a finish or a preemption).
  int64_t returns = 0, refused_at = -1;
  double host_s = 0.0;
  using HostClock = std::chrono::steady_clock;
  auto host_since = [](HostClock::time_point t) { return std::chrono::duration<double>(HostClock::now() - t).count(); };

  const int64_t evicted_before = cache.blocks_evicted();  // a plan that fails may have evicted too
  executor.start();
  auto arrive = [&](double now) {
    if (wo.open_loop()) {
      while (next_arrival < total && workload.requests[next_arrival].arrival_s <= now) waiting.push_back(next_arrival++);
    }
  };
  auto client_sends = [&](double now) {
    if (!wo.open_loop() && next_arrival < total) {
      result.records[next_arrival].arrival_s = now;
      waiting.push_back(next_arrival++);
    }
  };
  for (int c = 0; c < wo.concurrency; ++c) client_sends(0.0);

  auto release = [&](Live& l, bool success) {
    cache.finish(l.plan, success);
    reserved_total -= l.reserved;
    l.reserved = 0;
  };
  // A run that throws (the machine failed, an observer threw, a request cannot fit) still returns
  // every block its requests hold: the cache may outlive the run (a Session's pool).
  struct ReleaseOnThrow {
    std::function<void()> release_all;
    int exceptions = std::uncaught_exceptions();
    ~ReleaseOnThrow() {
      if (std::uncaught_exceptions() > exceptions) release_all();
    }
  } release_on_throw{[&] {
    while (!live.empty()) {
      release(*live.back(), false);
      live.pop_back();
    }
  }};
  auto preempt_newest = [&] {
    Live& victim = *live.back();
    release(victim, false);
    result.records[victim.request].preemptions += 1;
    result.records[victim.request].tokens.clear();  // recomputed from scratch
    result.preemptions += 1;
    ++returns;
    waiting.push_front(victim.request);
    live.pop_back();
  };
  auto finish_request = [&](Live& l, double now) {
    RequestRecord& rec = result.records[l.request];
    rec.finish_s = now;
    rec.output_tokens = l.generated;
    result.bytes_copied += l.plan.stats.bytes_copied;
    release(l, true);
    ++finished;
    ++returns;
    if (observer) observer->on_request_finished(rec);
    client_sends(now);
  };

  while (finished < total) {
    if (cancel && cancel->load()) {
      result.cancelled = true;
      while (!live.empty()) {
        release(*live.back(), false);
        live.pop_back();
      }
      break;
    }
    HostClock::time_point host_t0 = HostClock::now();
    double now = executor.now_s();
    arrive(now);

    // Admission, first come first served: the head waits until it fits (no overtaking, no starvation).
    while (!waiting.empty() && int(live.size()) < options.max_running && !(refused_at == returns && !live.empty())) {
      const int r = waiting.front();
      const WorkloadRequest& req = workload.requests[r];
      const PromptLayout layout = workload.layout(req);
      const AdmissionEstimate est = cache.estimate_admission(layout, options.mode, options.policy);
      const int bound = growth_bound(req.output_tokens, B);
      if (!live.empty() && est.blocks_needed + bound + reserved_total > est.blocks_available) {
        refused_at = returns;
        break;
      }
      RequestPlan plan;
      try {
        plan = cache.plan(layout, options.mode, options.policy);
      } catch (const Error& e) {
        if (!live.empty()) {  // an estimate was short: wait for blocks to return
          refused_at = returns;
          break;
        }
        throw Error("KV budget of " + mib(double(cache.num_blocks()) * double(cache.bytes_per_block())) + " (" +
                    std::to_string(cache.num_blocks()) + " blocks of " + std::to_string(B) +
                    " tokens) cannot hold request " + std::to_string(r) + " under policy " + result.policy +
                    " even with nothing else running: it needs " + std::to_string(est.blocks_needed + bound) +
                    " blocks for " + std::to_string(layout.total_tokens()) + " prompt tokens and " +
                    std::to_string(req.output_tokens) + " output tokens; raise --kv-budget (" + e.what() + ")");
      }
      const int growth = growth_exact(plan, req.output_tokens, B);
      if (live.empty()) {
        const PoolUsage after = cache.usage();
        if (growth > after.free + after.cached) {
          cache.finish(plan, false);
          throw Error("KV budget of " + mib(double(cache.num_blocks()) * double(cache.bytes_per_block())) + " (" +
                      std::to_string(cache.num_blocks()) + " blocks) cannot hold request " + std::to_string(r) +
                      " under policy " + result.policy + ": its prompt fits but its " +
                      std::to_string(req.output_tokens) + " output tokens need " + std::to_string(growth) +
                      " more blocks; raise --kv-budget");
        }
      }
      waiting.pop_front();
      auto l = std::make_unique<Live>();
      l->request = r;
      l->plan = std::move(plan);
      for (const SegmentTask& t : l->plan.encodes) l->items.push_back({&t, false});
      if (!l->plan.copies.empty()) l->items.push_back({nullptr, false});
      l->items.push_back({&l->plan.prompt, true});
      l->reserved = growth;
      reserved_total += growth;
      if (!l->plan.placements.empty() && l->plan.placements.front().kind == SegmentKind::Prefix &&
          l->plan.placements.front().in_flight) {
        l->awaited_prefix = l->plan.placements.front().segment;
      }
      l->awaits_complete = l->plan.awaits.empty();
      RequestRecord& rec = result.records[r];
      rec.admitted_s = now;
      fill_record(rec, l->plan);
      live.push_back(std::move(l));
    }

    if (live.empty()) {
      if (wo.open_loop() && next_arrival < total) {
        host_s += host_since(host_t0);
        executor.wait_until(workload.requests[next_arrival].arrival_s);
        continue;
      }
      throw Error("serving scheduler: nothing runs and nothing can be admitted (internal error)");
    }

    // A request sharing a segment whose encoder ended without it starts again (cannot happen
    // while requests end newest first: a sharer is always newer than the encoder).
    for (std::size_t i = 0; i < live.size();) {
      Live& l = *live[i];
      bool lost = false;
      for (int64_t id : l.plan.awaits) lost = lost || (!cache.complete(id) && cache.abandoned(id));
      if (!lost) {
        ++i;
        continue;
      }
      release(l, false);
      result.records[l.request].preemptions += 1;
      result.preemptions += 1;
      ++returns;
      waiting.push_front(l.request);
      live.erase(live.begin() + std::ptrdiff_t(i));
    }
    if (live.empty()) continue;

    // One step: a batched decode of every decoding sequence, then prefill chunks to the budget.
    StepWork work;
    std::vector<Live*> decoders;
    for (std::size_t i = 0; i < live.size(); ++i) {
      Live& l = *live[i];
      if (!l.decoding) continue;
      SegmentTask next;
      bool preempted_self = false;
      for (;;) {
        try {
          const std::size_t before = l.plan.table.size();
          next = cache.next_decode_step(l.plan, l.last);
          if (l.plan.table.size() > before && l.reserved > 0) {
            --l.reserved;
            --reserved_total;
          }
          break;
        } catch (const Error&) {
          if (live.size() == 1) throw;
          preempted_self = live.back().get() == &l;
          preempt_newest();  // the newest is later in `live`: not in this step yet
          if (preempted_self) break;
        }
      }
      if (preempted_self) break;  // it was the last one
      work.decode_tokens.push_back(std::move(next.tokens));
      work.decode_positions.push_back(std::move(next.positions));
      work.decode_slots.push_back(std::move(next.slots));
      work.decode_tables.push_back(std::move(next.table));
      work.decode_lazy.push_back(next.lazy ? 1 : 0);
      decoders.push_back(&l);
    }
    int budget = options.step_tokens - work.decode_batch();
    std::vector<std::pair<Live*, std::size_t>> prompts_done;  // live, piece index
    std::vector<std::pair<Live*, int64_t>> encoded;            // segment complete after this step; -1: all pending
    for (auto& lp : live) {
      Live& l = *lp;
      while (!l.decoding && budget > 0 && l.item < l.items.size() && item_ready(l, cache)) {
        const Item& it = l.items[l.item];
        PrefillPiece piece;
        if (!it.task) {
          piece.kind = PrefillPiece::Kind::Copy;
          piece.copies = l.plan.copies;
          for (const BlockCopy& c : l.plan.copies) piece.copy_bytes += int64_t(cache.bytes_per_block()) * c.valid / B;
          work.prefill.push_back(std::move(piece));
          encoded.push_back({&l, -1});  // every encode came before the copies
          ++l.item;
          continue;
        }
        const SegmentTask& t = *it.task;
        const int n = int(t.tokens.size());
        const int take = std::min(budget, n - l.offset);
        const int64_t context = table_tokens(t.table) - n;
        piece.tokens.assign(t.tokens.begin() + l.offset, t.tokens.begin() + l.offset + take);
        piece.positions.assign(t.positions.begin() + l.offset, t.positions.begin() + l.offset + take);
        piece.slots.assign(t.slots.begin() + l.offset, t.slots.begin() + l.offset + take);
        piece.table = truncate_table(t.table, context + l.offset + take);
        piece.lazy = t.lazy;
        l.offset += take;
        budget -= take;
        const bool done = l.offset == n;
        piece.greedy = it.greedy && done;
        if (piece.greedy) prompts_done.push_back({&l, work.prefill.size()});
        work.prefill.push_back(std::move(piece));
        if (done) {
          encoded.push_back({&l, it.greedy ? -1 : t.segment});
          ++l.item;
          l.offset = 0;
        }
      }
    }

    host_s += host_since(host_t0);
    const double step_start = executor.now_s();
    executor.run(work);
    now = executor.now_s();
    host_t0 = HostClock::now();
    ++result.steps;

    // Complete KV is shared at once: later requests hit it while this one still runs.
    for (auto [l, segment] : encoded) {
      if (segment >= 0) {
        cache.publish_encoded(l->plan, segment);
      } else {
        cache.publish_encoded(l->plan);
      }
    }
    auto emit = [&](Live& l, int32_t token) {
      l.last = token;
      l.generated += 1;
      if (options.keep_tokens) result.records[l.request].tokens.push_back(token);
      l.stopped = std::find(options.stop_tokens.begin(), options.stop_tokens.end(), token) != options.stop_tokens.end();
    };
    for (auto [l, piece] : prompts_done) {
      l->decoding = true;
      emit(*l, work.prefill[piece].token);
      result.records[l->request].first_token_s = now;
      if (options.keep_tokens) result.records[l->request].tokens = {l->last};
    }
    for (std::size_t i = 0; i < decoders.size(); ++i) emit(*decoders[i], work.decode_out[i]);
    const PoolUsage usage = cache.usage();
    result.peak_blocks = std::max(result.peak_blocks, usage.in_use);
    for (std::size_t i = 0; i < live.size();) {
      Live& l = *live[i];
      if (l.decoding && (l.stopped || l.generated >= workload.requests[l.request].output_tokens)) {
        finish_request(l, now);
        live.erase(live.begin() + std::ptrdiff_t(i));
      } else {
        ++i;
      }
    }
    if (options.keep_samples || observer) {
      StepSample s;
      s.step = result.steps;
      s.t_s = now;
      s.running = int(live.size());
      s.waiting = int(waiting.size());
      s.decode_batch = work.decode_batch();
      s.prefill_tokens = work.prefill_tokens();
      const PoolUsage after = cache.usage();
      s.blocks_in_use = after.in_use;
      s.blocks_cached = after.cached;
      s.blocks_free = after.free;
      s.duration_s = now - step_start;
      if (options.keep_samples) result.samples.push_back(s);
      if (observer) observer->on_step(s);
    }
    host_s += host_since(host_t0);
  }

  if (observer) observer->on_end(cache);
  // Summary over the finished requests.
  std::vector<double> ttft, tpot, e2e;
  int64_t doc_tokens = 0, cached_doc_tokens = 0, docs = 0, doc_hits = 0, prefix_hits = 0, with_prefix = 0;
  int64_t in_flight_hits = 0;
  int64_t all_tokens = 0, out_tokens = 0;
  double first_arrival = 1e300, last_finish = 0.0;
  int done = 0;
  for (const RequestRecord& rec : result.records) {
    if (rec.output_tokens == 0) continue;  // not finished (cancelled)
    ++done;
    ttft.push_back(rec.ttft_ms());
    e2e.push_back(rec.e2e_ms());
    if (rec.output_tokens > 1) tpot.push_back(rec.tpot_ms());
    doc_tokens += rec.document_tokens + int64_t(rec.prompt_tokens - rec.prefix_tokens - rec.document_tokens);
    cached_doc_tokens += rec.cached_document_tokens;
    docs += rec.documents - rec.repeats;
    doc_hits += rec.document_hits;
    in_flight_hits += rec.in_flight_hits;
    if (rec.prefix_tokens > 0) {
      ++with_prefix;
      prefix_hits += rec.prefix_hit ? 1 : 0;
    }
    all_tokens += rec.prompt_tokens + rec.output_tokens;
    out_tokens += rec.output_tokens;
    first_arrival = std::min(first_arrival, rec.arrival_s);
    last_finish = std::max(last_finish, rec.finish_s);
  }
  result.requests = done;
  result.hit_ratio_tokens = doc_tokens ? double(cached_doc_tokens) / double(doc_tokens) : 0.0;
  result.hit_ratio_documents = docs ? double(doc_hits) / double(docs) : 0.0;
  result.prefix_hit_ratio = with_prefix ? double(prefix_hits) / double(with_prefix) : 0.0;
  result.in_flight_hit_ratio_documents = docs ? double(in_flight_hits) / double(docs) : 0.0;
  result.ttft_ms = percentiles(ttft);
  result.tpot_ms = percentiles(tpot);
  result.e2e_ms = percentiles(e2e);
  result.makespan_s = done ? last_finish - first_arrival : 0.0;
  if (result.makespan_s > 0) {
    result.throughput_tok_s = double(all_tokens) / result.makespan_s;
    result.output_tok_s = double(out_tokens) / result.makespan_s;
  }
  result.bytes_stored = cache.bytes_stored();
  result.evictions = cache.blocks_evicted() - evicted_before;
  result.wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - wall0).count();
  if (executor.busy_s() > 0) result.host_fraction = host_s / executor.busy_s();
  return result;
}

}  // namespace lazyscope

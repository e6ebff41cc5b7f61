// The continuous-batching scheduler: invariants under random workloads, hit ratios counted once
// per use (hand-worked), cancellation, and a clear error when the budget cannot hold a request.
#include <gtest/gtest.h>

#include <atomic>
#include <map>
#include <random>

#include "base/error.h"
#include "engine/serving/scheduler.h"
#include "engine/serving/serving_engine.h"
#include "engine/serving/step_time_model.h"
#include "kernels/synthetic_shapes.h"

namespace lazyscope {
namespace {

constexpr int kBlock = 16;

// Checks the pool after every step.
class InvariantObserver final : public ServingObserver {
 public:
  InvariantObserver(const KvCacheManager& cache, int step_tokens) : cache_(cache), step_tokens_(step_tokens) {}
  void on_step(const StepSample& s) override {
    ++steps;
    EXPECT_LE(s.decode_batch + s.prefill_tokens, step_tokens_) << "step " << s.step;
    EXPECT_GT(s.decode_batch + s.prefill_tokens, 0) << "an empty step " << s.step;
    EXPECT_EQ(s.blocks_in_use + s.blocks_cached + s.blocks_free, cache_.num_blocks());
    cache_.check_invariants();
    if (cancel_after > 0 && steps == cancel_after) cancel.store(true);
  }
  void on_request_finished(const RequestRecord& r) override {
    ++finished;
    EXPECT_GE(r.first_token_s, r.arrival_s);
    EXPECT_GE(r.finish_s, r.first_token_s);
  }
  int steps = 0, finished = 0, cancel_after = 0;
  std::atomic<bool> cancel{false};

 private:
  const KvCacheManager& cache_;
  int step_tokens_;
};

struct Fixture {
  ModelShape shape = synthetic_shape("tiny");
  StepTimeModel model{shape, 2, StepTimeConstants::h200()};
  std::size_t bytes_per_block = shape.kv_bytes_per_block(kBlock, 2);
};

TEST(Scheduler, InvariantsHoldUnderRandomWorkloads) {
  Fixture f;
  std::mt19937 rng(5);
  for (int trial = 0; trial < 12; ++trial) {
    WorkloadOptions o;
    o.documents = 3 + int(rng() % 12);
    o.doc_tokens = 5 + int(rng() % 60);
    o.docs_per_request = 1 + int(rng() % std::min(4, o.documents));
    o.zipf = 0.5 + (rng() % 20) / 10.0;
    o.requests = 20 + int(rng() % 40);
    o.query_tokens = 1 + int(rng() % 20);
    o.output_tokens = 1 + int(rng() % 40);
    o.prefix_tokens = int(rng() % 24);
    o.vocab_size = f.shape.vocab_size;
    o.layout = trial % 3 == 0 ? DocumentLayout::Window : DocumentLayout::Zipf;
    if (trial % 2) {
      o.rate = 200.0 + rng() % 2000;
    } else {
      o.concurrency = 1 + int(rng() % 8);
    }
    o.seed = trial;
    const Workload w = make_workload(o);
    const int one_request = (o.prefix_tokens + o.docs_per_request * (o.doc_tokens + kBlock) * 2 + o.query_tokens +
                             o.output_tokens) / kBlock + 8;
    for (Policy p : all_policies()) {
      const int blocks = one_request + int(rng() % (3 * one_request));
      KvCacheManager cache(blocks, kBlock, f.bytes_per_block, "tiny");
      SchedulerOptions so;
      so.mode = mode_for(p);
      so.policy = p;
      so.step_tokens = 8 + int(rng() % 100);
      so.max_running = 1 + int(rng() % 6);
      auto exec = make_accounting_executor(f.model);
      InvariantObserver obs(cache, so.step_tokens);
      const ServingResult r = run_scheduler(w, cache, *exec, so, &obs);
      SCOPED_TRACE(std::string(to_string(p)) + " trial " + std::to_string(trial));
      EXPECT_EQ(r.requests, o.requests) << "a request starved";
      EXPECT_EQ(obs.finished, o.requests);
      for (const RequestRecord& rec : r.records) EXPECT_EQ(rec.output_tokens, o.output_tokens);
      const PoolUsage u = cache.usage();
      EXPECT_EQ(u.in_use, 0) << "blocks still referenced after the run";
      EXPECT_EQ(u.free + u.cached, blocks);
      cache.check_invariants();
      EXPECT_LE(r.peak_blocks, blocks);
      EXPECT_GE(r.hit_ratio_tokens, 0.0);
      EXPECT_LE(r.hit_ratio_tokens, 1.0);
      if (p == Policy::None) {
        EXPECT_EQ(r.hit_ratio_documents, 0.0);
      }
    }
  }
}

TEST(Scheduler, CancellationFreesEverything) {
  Fixture f;
  WorkloadOptions o;
  o.documents = 8;
  o.doc_tokens = 40;
  o.docs_per_request = 3;
  o.requests = 50;
  o.concurrency = 6;
  o.vocab_size = f.shape.vocab_size;
  const Workload w = make_workload(o);
  for (Policy p : {Policy::Materialized, Policy::Lazy, Policy::Prefix}) {
    KvCacheManager cache(200, kBlock, f.bytes_per_block, "tiny");
    SchedulerOptions so;
    so.mode = mode_for(p);
    so.policy = p;
    so.step_tokens = 32;
    auto exec = make_accounting_executor(f.model);
    InvariantObserver obs(cache, so.step_tokens);
    obs.cancel_after = 9;
    const ServingResult r = run_scheduler(w, cache, *exec, so, &obs, &obs.cancel);
    EXPECT_TRUE(r.cancelled);
    EXPECT_LT(r.requests, o.requests);
    const PoolUsage u = cache.usage();
    EXPECT_EQ(u.in_use, 0);
    EXPECT_EQ(u.free + u.cached, 200);
    cache.check_invariants();
  }
}

TEST(Scheduler, BudgetTooSmallForOneRequestNamesBudgetAndRequest) {
  Fixture f;
  WorkloadOptions o;
  o.documents = 4;
  o.doc_tokens = 64;
  o.docs_per_request = 3;
  o.requests = 3;
  o.vocab_size = f.shape.vocab_size;
  const Workload w = make_workload(o);
  KvCacheManager cache(12, kBlock, f.bytes_per_block, "tiny");  // 3 x 4 document blocks + query do not fit
  SchedulerOptions so;
  so.policy = Policy::Lazy;
  auto exec = make_accounting_executor(f.model);
  try {
    run_scheduler(w, cache, *exec, so);
    FAIL() << "no error";
  } catch (const Error& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("KV budget of"), std::string::npos) << m;
    EXPECT_NE(m.find("12 blocks"), std::string::npos) << m;
    EXPECT_NE(m.find("request 0"), std::string::npos) << m;
    EXPECT_NE(m.find("lazy"), std::string::npos) << m;
    EXPECT_NE(m.find("raise --kv-budget"), std::string::npos) << m;
  }
  EXPECT_EQ(cache.usage().in_use, 0);
}

// Three documents of 32 tokens, served one request at a time: r0 [A,B], r1 [B,A], r2 [A,C],
// r3 [C,C] (a repeat inside one request is not a hit).
Workload hand_workload(int prefix_tokens) {
  Workload w;
  w.options.documents = 3;
  w.options.doc_tokens = 32;
  w.options.docs_per_request = 2;
  w.options.requests = 4;
  w.options.concurrency = 1;
  w.options.query_tokens = 4;
  w.options.output_tokens = 2;
  w.options.prefix_tokens = prefix_tokens;
  w.options.vocab_size = 512;
  for (int i = 0; i < prefix_tokens; ++i) w.prefix.push_back(1 + i);
  for (int d = 0; d < 3; ++d) {
    std::vector<int32_t> doc(32);
    for (int t = 0; t < 32; ++t) doc[t] = 10 + d * 100 + t;
    w.documents.push_back(doc);
  }
  const std::vector<std::vector<int>> orders = {{0, 1}, {1, 0}, {0, 2}, {2, 2}};
  for (int r = 0; r < 4; ++r) {
    WorkloadRequest q;
    q.index = r;
    q.documents = orders[r];
    q.query = {400 + r, 401, 402, 403};
    q.output_tokens = 2;
    w.requests.push_back(q);
  }
  return w;
}

TEST(Scheduler, HitRatioIsCountedOncePerUse) {
  Fixture f;
  struct Expect {
    Policy policy;
    int prefix_tokens;
    std::vector<int> hits;  // per request
    int prefix_hits;
  };
  // lazy/materialized: r1 hits B and A, r2 hits A, r3 hits C once and repeats it: 4 of 7 uses.
  // positional: only A at the first slot recurs (r2). prefix (chained blocks, no prefix): r2
  // starts with A's two blocks like r0. none: never. r3's second C is a repeat everywhere.
  const std::vector<Expect> cases = {
      {Policy::Lazy, 5, {0, 2, 1, 1}, 3},       {Policy::Materialized, 5, {0, 2, 1, 1}, 3},
      {Policy::Positional, 5, {0, 0, 1, 0}, 3}, {Policy::None, 5, {0, 0, 0, 0}, 0},
      {Policy::Prefix, 0, {0, 0, 1, 0}, 0},
  };
  for (const Expect& c : cases) {
    SCOPED_TRACE(to_string(c.policy));
    const Workload w = hand_workload(c.prefix_tokens);
    KvCacheManager cache(400, kBlock, f.bytes_per_block, "tiny");
    SchedulerOptions so;
    so.mode = mode_for(c.policy);
    so.policy = c.policy;
    auto exec = make_accounting_executor(f.model);
    const ServingResult r = run_scheduler(w, cache, *exec, so);
    int hits = 0, cached = 0, denominator = 0;
    for (int i = 0; i < 4; ++i) {
      EXPECT_EQ(r.records[i].document_hits, c.hits[i]) << "request " << i;
      EXPECT_EQ(r.records[i].repeats, i == 3 ? 1 : 0) << "request " << i;
      hits += r.records[i].document_hits;
      cached += r.records[i].cached_document_tokens;
      denominator += 2 * 32 + 4;
    }
    EXPECT_EQ(cached, hits * 32);
    EXPECT_DOUBLE_EQ(r.hit_ratio_tokens, double(cached) / denominator);
    EXPECT_DOUBLE_EQ(r.hit_ratio_documents, double(hits) / 7);
    EXPECT_DOUBLE_EQ(r.prefix_hit_ratio, c.prefix_tokens ? c.prefix_hits / 4.0 : 0.0);
  }
}

TEST(Scheduler, LazyHoldsMoreDocumentsThanMaterializedUnderOneBudget) {
  // Same seeded workload, each policy on its own pool: lazy's hit ratio is the highest.
  Fixture f;
  WorkloadOptions o;
  o.documents = 40;
  o.doc_tokens = 64;
  o.docs_per_request = 4;
  o.zipf = 1.1;
  o.requests = 300;
  o.concurrency = 4;
  o.vocab_size = f.shape.vocab_size;
  const Workload w = make_workload(o);
  std::map<Policy, double> hit;
  for (Policy p : all_policies()) {
    KvCacheManager cache(120, kBlock, f.bytes_per_block, "tiny");
    SchedulerOptions so;
    so.mode = mode_for(p);
    so.policy = p;
    auto exec = make_accounting_executor(f.model);
    hit[p] = run_scheduler(w, cache, *exec, so).hit_ratio_tokens;
  }
  for (Policy p : {Policy::None, Policy::Prefix, Policy::Positional, Policy::Materialized}) {
    EXPECT_GT(hit[Policy::Lazy], hit[p]) << to_string(p);
  }
}

}  // namespace
}  // namespace lazyscope

// Lazy vs materialized on the fast CPU kernels, judged by the engine's rule with the fast CPU's
// bound (engine/runtime/equivalence.h): the greedy tokens are identical or part at a near-tie,
// never "different". On the tiny generated checkpoint (fp32 weights: the fast kernels do not
// quantize activations) the two also stay within the exact CPU's 1e-4; on synthetic Q4_1
// weights (int8 activations, as on the default model) only within the fast bound.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>

#include "engine/model/config.h"
#include "engine/runtime/equivalence.h"
#include "engine/runtime/session.h"
#include "support/tiny_model.h"

namespace lazyscope {
namespace {

std::vector<int32_t> random_ids(std::mt19937& rng, int count, int vocab) {
  std::vector<int32_t> ids(static_cast<std::size_t>(count));
  for (auto& id : ids) id = 3 + int32_t(rng() % uint32_t(vocab - 3));
  return ids;
}

// Four documents in several orders (every document at several shifts), 12 new tokens each.
std::vector<Request> shifted_requests(int vocab, uint64_t seed) {
  std::mt19937 rng{static_cast<uint32_t>(seed)};
  const std::vector<std::vector<int32_t>> docs = {random_ids(rng, 9, vocab), random_ids(rng, 23, vocab),
                                                  random_ids(rng, 40, vocab), random_ids(rng, 16, vocab)};
  std::vector<Request> out;
  for (const std::vector<int>& order : {std::vector<int>{0, 1, 2, 3}, {3, 2, 1, 0}, {2, 0, 3, 1}}) {
    Request r;
    r.prefix_ids = {1, 40, 41, 42};
    r.document_ids = docs;
    r.order = order;
    r.query_ids = random_ids(rng, 6, vocab);
    r.max_new_tokens = 12;
    out.push_back(r);
  }
  return out;
}

struct PairOutcome {
  EquivalenceResult fast_rule, exact_rule;
};

std::vector<PairOutcome> lazy_vs_materialized(Session& session, const std::vector<Request>& requests) {
  std::vector<PairOutcome> out;
  for (const Request& r : requests) {
    RunOptions lazy, materialized;
    lazy.policy = Policy::Lazy;
    materialized.policy = Policy::Materialized;
    const RunResult a = session.submit(r, lazy);
    const RunResult b = session.submit(r, materialized);
    EXPECT_EQ(a.cpu_precision, CpuPrecision::Fast);
    EXPECT_GT(b.stats.bytes_copied, 0) << "materialized made no re-rotated copy: the documents were never shifted";
    PairOutcome o;
    o.fast_rule = compare_greedy_runs(a.step_logits, a.generated_ids, b.step_logits, b.generated_ids,
                                      logit_tolerance_for(a.backend, a.cpu_precision));
    o.exact_rule = compare_greedy_runs(a.step_logits, a.generated_ids, b.step_logits, b.generated_ids,
                                       logit_tolerance_for(a.backend, CpuPrecision::Exact));
    out.push_back(o);
  }
  return out;
}

TEST(FastEquivalence, TinyCheckpointAgreesWithinTheExactBoundToo) {
  SessionOptions options;
  options.model = testing::tiny_model_dir();
  options.backend = BackendKind::Cpu;
  options.cpu_precision = CpuPrecision::Fast;
  options.cpu_threads = 2;
  options.kv_budget_bytes = 64ull << 20;
  options.policies = {Policy::Lazy, Policy::Materialized};
  Session session(options);
  ASSERT_EQ(session.device().rfind("CPU fast", 0), 0u) << session.device();
  for (const PairOutcome& o : lazy_vs_materialized(session, shifted_requests(session.config().shape.vocab_size, 5))) {
    EXPECT_EQ(o.fast_rule.verdict, EquivalenceVerdict::Identical) << o.fast_rule.explanation;
    EXPECT_EQ(o.exact_rule.verdict, EquivalenceVerdict::Identical) << o.exact_rule.explanation;
    EXPECT_LE(o.exact_rule.max_abs_diff, 1e-4);
  }
}

TEST(FastEquivalence, QuantizedActivationsStayWithinTheFastBound) {
  SessionOptions options;
  options.synthetic = "small";  // Q4_1 layers, Q8_0 embedding on the fast backend: int8 activations
  options.synthetic_seed = 3;
  options.backend = BackendKind::Cpu;
  options.cpu_precision = CpuPrecision::Fast;
  options.cpu_threads = 2;
  options.kv_budget_bytes = 64ull << 20;
  options.policies = {Policy::Lazy, Policy::Materialized};
  Session session(options);
  int near_ties = 0, compared_steps = 0;
  double worst = 0.0;
  for (uint64_t seed : {5u, 6u}) {
    for (const PairOutcome& o : lazy_vs_materialized(session, shifted_requests(session.config().shape.vocab_size, seed))) {
      EXPECT_NE(o.fast_rule.verdict, EquivalenceVerdict::Different) << o.fast_rule.explanation;
      near_ties += o.fast_rule.verdict == EquivalenceVerdict::NearTie ? 1 : 0;
      compared_steps += int(o.fast_rule.steps.size());
      worst = std::max(worst, o.fast_rule.max_abs_diff);
      for (const StepComparison& s : o.fast_rule.steps) EXPECT_LE(s.max_abs_diff, s.tolerance) << "step " << s.step;
    }
  }
  EXPECT_GT(compared_steps, 0);
  std::printf("fast lazy vs materialized on synthetic Q4_1: %d steps compared, %d near-tie(s), max |dlogit| %.3g\n",
              compared_steps, near_ties, worst);
}

// A row of a matrix product is computed by one kernel whatever share of the rows a thread took:
// the same logits on 1, 2 and 3 threads (a prompt long enough for the sixteen-row tiles).
TEST(FastEquivalence, LogitsDoNotDependOnTheThreadCount) {
  std::vector<std::vector<std::vector<float>>> logits;
  for (int threads : {1, 2, 3}) {
    SessionOptions options;
    options.synthetic = "small";
    options.synthetic_seed = 3;
    options.backend = BackendKind::Cpu;
    options.cpu_precision = CpuPrecision::Fast;
    options.cpu_threads = threads;
    options.kv_budget_bytes = 64ull << 20;
    options.policies = {Policy::Lazy};
    Session session(options);
    const Request r = shifted_requests(session.config().shape.vocab_size, 5)[1];
    RunOptions run;
    run.policy = Policy::Lazy;
    logits.push_back(session.submit(r, run).step_logits);
  }
  ASSERT_FALSE(logits[0].empty());
  EXPECT_EQ(logits[1], logits[0]) << "2 threads";
  EXPECT_EQ(logits[2], logits[0]) << "3 threads";
}

}  // namespace
}  // namespace lazyscope

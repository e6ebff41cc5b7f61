// The one equivalence rule, fed with hand-made logits: a flip beyond rounding is "different",
// a flip within both runs' margins is a "near-tie", and nothing after a flip is compared.
#include "engine/runtime/equivalence.h"

#include <gtest/gtest.h>

#include <cmath>
#include <string>

namespace lazyscope {
namespace {

using Steps = std::vector<std::vector<float>>;

const LogitTolerance kCpu = logit_tolerance_for("cpu", CpuPrecision::Exact);
const LogitTolerance kFastCpu = logit_tolerance_for("cpu", CpuPrecision::Fast);

TEST(EquivalenceRule, SameLogitsAreIdentical) {
  const Steps a = {{0.0f, 2.0f, 1.0f}, {3.0f, 0.0f, 1.0f}};
  const EquivalenceResult r = compare_greedy_runs(a, {1, 0}, a, {1, 0}, kCpu);
  EXPECT_EQ(r.verdict, EquivalenceVerdict::Identical);
  EXPECT_EQ(r.first_divergent_step, -1);
  EXPECT_EQ(r.steps.size(), 2u);
  EXPECT_EQ(r.max_abs_diff, 0.0);
  EXPECT_NE(r.explanation.find("agree over 2 steps"), std::string::npos) << r.explanation;
}

TEST(EquivalenceRule, AFlipBeyondRoundingIsDifferent) {
  // Each run clearly prefers its own token: the old "margins within the step's |dlogit|" rule
  // called this a near-tie (margins 4 and 4, |dlogit| 4).
  const Steps a = {{0.0f, 2.0f, 1.0f}, {5.0f, 1.0f, 0.0f}};
  const Steps b = {{0.0f, 2.0f, 1.0f}, {1.0f, 5.0f, 0.0f}};
  const EquivalenceResult r = compare_greedy_runs(a, {1, 0}, b, {1, 1}, kCpu);
  EXPECT_EQ(r.verdict, EquivalenceVerdict::Different);
  EXPECT_EQ(r.first_divergent_step, 1);
  EXPECT_DOUBLE_EQ(r.steps.back().margin_a, 4.0);
  EXPECT_DOUBLE_EQ(r.steps.back().margin_b, 4.0);
  EXPECT_NE(r.explanation.find("beyond the rounding bound"), std::string::npos) << r.explanation;
}

TEST(EquivalenceRule, AFlipWithinBothMarginsIsANearTieAndLaterStepsAreNotCompared) {
  const Steps a = {{1.0f, 0.0f}, {1.00003f, 1.0f, 0.0f}, {9.0f, 0.0f, 0.0f}, {9.0f, 0.0f, 0.0f}};
  const Steps b = {{1.0f, 0.0f}, {1.0f, 1.00004f, 0.0f}, {0.0f, 0.0f, 9.0f}, {0.0f, 9.0f, 0.0f}};
  const EquivalenceResult r = compare_greedy_runs(a, {0, 0, 0, 0}, b, {0, 1, 2, 1}, kCpu);
  EXPECT_EQ(r.verdict, EquivalenceVerdict::NearTie);
  EXPECT_EQ(r.first_divergent_step, 1);
  EXPECT_EQ(r.steps.size(), 2u);
  EXPECT_EQ(r.uncompared_steps, 2);
  EXPECT_LT(r.max_abs_diff, 1e-4);  // the wild logits after the flip are not counted
  EXPECT_NE(r.explanation.find("near-tie"), std::string::npos) << r.explanation;
  EXPECT_NE(r.explanation.find("2 later steps"), std::string::npos) << r.explanation;
}

TEST(EquivalenceRule, SameTokensWithLogitsBeyondRoundingAreDifferent) {
  const Steps a = {{3.0f, 0.0f}, {3.0f, 0.0f}};
  const Steps b = {{3.0f, 0.0f}, {3.01f, 0.0f}};
  const EquivalenceResult r = compare_greedy_runs(a, {0, 0}, b, {0, 0}, kCpu);
  EXPECT_EQ(r.verdict, EquivalenceVerdict::Different);
  EXPECT_EQ(r.first_divergent_step, -1);
  EXPECT_NE(r.explanation.find("at step 1"), std::string::npos) << r.explanation;
}

TEST(EquivalenceRule, ATieWithLogitsAlreadyApartIsDifferent) {
  const Steps a = {{3.0f, 0.0f}, {1.00003f, 1.0f}};
  const Steps b = {{3.5f, 0.0f}, {1.0f, 1.00004f}};
  const EquivalenceResult r = compare_greedy_runs(a, {0, 0}, b, {0, 1}, kCpu);
  EXPECT_EQ(r.verdict, EquivalenceVerdict::Different);
  EXPECT_NE(r.explanation.find("already differ"), std::string::npos) << r.explanation;
}

TEST(EquivalenceRule, TheGpuBoundScalesWithTheLogits) {
  const LogitTolerance gpu = logit_tolerance_for("cuda", CpuPrecision::Exact);
  // bf16-sized noise on logits around 20: a flip between tokens 0.03 apart is a near-tie.
  const Steps a = {{20.00f, 19.97f, 3.0f}};
  const Steps b = {{19.98f, 20.00f, 3.0f}};
  EXPECT_EQ(compare_greedy_runs(a, {}, b, {}, gpu).verdict, EquivalenceVerdict::NearTie);
  // ... but not on the CPU, whose fp32 contract is 1e-4.
  EXPECT_EQ(compare_greedy_runs(a, {}, b, {}, kCpu).verdict, EquivalenceVerdict::Different);
  // Two whole logits apart is a difference on any backend.
  const Steps c = {{20.0f, 18.0f, 3.0f}};
  const Steps d = {{18.0f, 20.0f, 3.0f}};
  EXPECT_EQ(compare_greedy_runs(c, {}, d, {}, gpu).verdict, EquivalenceVerdict::Different);
}

TEST(EquivalenceRule, EachBackendAndPrecisionHasItsOwnNamedBound) {
  // The exact CPU keeps the fp32 contract: 1e-4 whatever the logits' size.
  EXPECT_EQ(kCpu.absolute, 1e-4);
  EXPECT_EQ(kCpu.relative, 0.0);
  EXPECT_EQ(kCpu.at(30.0), 1e-4);
  EXPECT_NE(kCpu.rule.find("exact CPU"), std::string::npos) << kCpu.rule;
  // The fast CPU: twice its measured rounding (two fast runs, each within it of the exact one).
  EXPECT_EQ(kFastCpu.absolute, 1e-4);
  EXPECT_EQ(kFastCpu.relative, 2.0 * kFastCpuRounding);
  EXPECT_GT(kFastCpuRounding, 0.0);
  EXPECT_LT(kFastCpuRounding, 0.25);  // a bound, not "anything goes"
  EXPECT_NE(kFastCpu.rule.find("fast CPU"), std::string::npos) << kFastCpu.rule;
  EXPECT_NE(kFastCpu.rule.find("peak/" + std::to_string(int(std::lround(0.5 / kFastCpuRounding)))), std::string::npos)
      << kFastCpu.rule;
  // The GPU's bf16 bound does not depend on the CPU precision.
  for (CpuPrecision p : {CpuPrecision::Exact, CpuPrecision::Fast}) {
    const LogitTolerance gpu = logit_tolerance_for("cuda", p);
    EXPECT_EQ(gpu.absolute, 1e-3);
    EXPECT_EQ(gpu.relative, 1.0 / 64.0);
    EXPECT_NE(gpu.rule.find("GPU"), std::string::npos) << gpu.rule;
  }
  // The verdict names the bound that applied.
  const Steps a = {{1.0f, 0.0f}};
  EXPECT_EQ(compare_greedy_runs(a, {}, a, {}, kFastCpu).rule, kFastCpu.rule);
}

TEST(EquivalenceRule, TheFastCpuBoundAcceptsInt8SizedNoiseOnly) {
  // Logits around 30 (the default model's size), int8-sized noise of 1.0, a flip between tokens
  // 0.4 apart: within the fast bound (1e-4 + 30 * 2 * kFastCpuRounding), a near-tie there ...
  const double bound = kFastCpu.at(30.0);
  ASSERT_GT(bound, 1.0);
  const Steps a = {{30.0f, 10.0f, 0.0f}, {29.6f, 29.2f, 0.0f}, {0, 0, 30}};
  const Steps b = {{29.0f, 10.0f, 0.0f}, {29.0f, 29.4f, 0.0f}, {30, 0, 0}};
  const EquivalenceResult fast = compare_greedy_runs(a, {0, 0, 2}, b, {0, 1, 0}, kFastCpu);
  EXPECT_EQ(fast.verdict, EquivalenceVerdict::NearTie) << fast.explanation;
  EXPECT_EQ(fast.first_divergent_step, 1);
  // ... and a difference for the exact CPU.
  EXPECT_EQ(compare_greedy_runs(a, {0, 0, 2}, b, {0, 1, 0}, kCpu).verdict, EquivalenceVerdict::Different);
  // The same tokens with logits further apart than the fast bound are different, even in fast mode.
  const Steps c = {{30.0f, 10.0f, 0.0f}, {30.0f, 10.0f, 0.0f}};
  const Steps d = {{30.0f, 10.0f, 0.0f}, {30.0f, 10.0f + float(bound) + 0.5f, 0.0f}};
  const EquivalenceResult apart = compare_greedy_runs(c, {0, 0}, d, {0, 0}, kFastCpu);
  EXPECT_EQ(apart.verdict, EquivalenceVerdict::Different) << apart.explanation;
  EXPECT_NE(apart.explanation.find("beyond the rounding bound"), std::string::npos) << apart.explanation;
  // A flip that one run makes by more than the bound is different, even in fast mode.
  const Steps e = {{30.0f, 10.0f, 0.0f}, {30.0f, 29.5f, 0.0f}};
  const Steps f = {{30.0f, 10.0f, 0.0f}, {29.5f, 30.0f + 2.0f * float(bound), 0.0f}};
  EXPECT_EQ(compare_greedy_runs(e, {0, 0}, f, {0, 1}, kFastCpu).verdict, EquivalenceVerdict::Different);
}

TEST(EquivalenceRule, TokensDefaultToTheArgmaxAndRunsOfDifferentLengthCompareTheirSharedSteps) {
  const Steps a = {{0.0f, 1.0f}, {1.0f, 0.0f}, {1.0f, 0.0f}};
  const Steps b = {{0.0f, 1.0f}, {1.0f, 0.0f}};
  const EquivalenceResult r = compare_greedy_runs(a, {}, b, {}, kCpu);
  EXPECT_EQ(r.verdict, EquivalenceVerdict::Identical);
  EXPECT_EQ(r.steps.size(), 2u);
  EXPECT_EQ(r.steps[0].token_a, 1);
}

}  // namespace
}  // namespace lazyscope

// The one equivalence rule, fed with hand-made logits: a flip beyond rounding is "different",
// a flip within both runs' margins is a "near-tie", and nothing after a flip is compared.
#include "engine/runtime/equivalence.h"

#include <gtest/gtest.h>

namespace lazyscope {
namespace {

using Steps = std::vector<std::vector<float>>;

const LogitTolerance kCpu = logit_tolerance_for("cpu");

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
  const LogitTolerance gpu = logit_tolerance_for("cuda");
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

#pragma once
// The one rule for "do two runs compute the same thing" (lazy vs materialized, or a kernel
// variant against the default): compare each generated step's logits while the greedy tokens
// agree; at the first step where they differ, decide whether the flip is a near-tie (both runs
// had the two tokens within rounding of each other) or a real difference, and stop comparing
// logits there, because the two runs continue from different tokens.
#include <cstdint>
#include <string>
#include <vector>

#include "kernels/backend.h"

namespace lazyscope {

// How far two runs' logits may differ and still be "the same up to rounding": at a step whose
// largest |logit| (over both runs) is `peak`, the bound is absolute + relative * peak. `rule`
// names the bound and where it comes from, for whoever shows a verdict.
struct LogitTolerance {
  double absolute = 1e-4;
  double relative = 0.0;
  std::string rule = "exact CPU (fp32): 1e-4";
  double at(double peak) const { return absolute + relative * peak; }
};

// The fast CPU mode's own rounding, measured by bench_cpu_numerics over the sample questions
// (docs/cpu_backend.md): a fast run's logits stay within this fraction of the step's largest
// |logit| of the exact run's (its int8 activations). Largest measured 0.0825 (40 questions, both
// policies, 24 tokens each), rounded up to 0.1.
inline constexpr double kFastCpuRounding = 0.1;

// The bound for two runs of one backend and precision:
// - the exact CPU (fp32): 1e-4 absolute, the CPU backend's contract (docs/design: equivalence);
// - the fast CPU: 1e-4 + 2 * kFastCpuRounding * peak, since each of the two fast runs is within
//   kFastCpuRounding * peak of its exact counterpart, and the two exact runs within 1e-4;
// - bf16 on a GPU: 1e-3 + peak / 64 (bf16 keeps 8 significant bits; a few roundings on the way).
// `precision` matters only on the CPU.
LogitTolerance logit_tolerance_for(const std::string& backend, CpuPrecision precision);

enum class EquivalenceVerdict { Identical, NearTie, Different };
const char* to_string(EquivalenceVerdict verdict);

struct StepComparison {
  int step = 0;
  double max_abs_diff = 0.0;  // over the vocabulary
  double tolerance = 0.0;     // the rounding bound at this step
  int32_t token_a = -1, token_b = -1;  // each run's greedy token
  // Only where the tokens differ: how much each run prefers its own token over the other's.
  double margin_a = 0.0, margin_b = 0.0;
  bool tokens_differ() const { return token_a != token_b; }
};

struct EquivalenceResult {
  EquivalenceVerdict verdict = EquivalenceVerdict::Identical;
  std::vector<StepComparison> steps;  // up to and including the first divergent step
  double max_abs_diff = 0.0;          // over the compared steps
  int first_divergent_step = -1;      // -1: the greedy tokens agree over every compared step
  int uncompared_steps = 0;           // steps after the divergence (not compared)
  std::string explanation;            // one sentence: the verdict and why
  std::string rule;                   // the bound that applied (LogitTolerance::rule)
};

// `logits_x[i]` are run x's logits before generated token i; `tokens_x[i]` its greedy token
// (argmax of logits_x[i] when tokens_x is shorter). Compares over the steps both runs have.
EquivalenceResult compare_greedy_runs(const std::vector<std::vector<float>>& logits_a,
                                      const std::vector<int32_t>& tokens_a,
                                      const std::vector<std::vector<float>>& logits_b,
                                      const std::vector<int32_t>& tokens_b, const LogitTolerance& tolerance);

}  // namespace lazyscope

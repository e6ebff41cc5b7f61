#include "engine/runtime/equivalence.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace lazyscope {
namespace {

int32_t argmax(const std::vector<float>& logits) {
  int32_t best = 0;
  for (std::size_t i = 1; i < logits.size(); ++i) {
    if (logits[i] > logits[std::size_t(best)]) best = int32_t(i);
  }
  return best;
}

std::string format(const char* pattern, double a, double b = 0.0, double c = 0.0, double d = 0.0) {
  char buffer[256];
  std::snprintf(buffer, sizeof buffer, pattern, a, b, c, d);
  return buffer;
}

}  // namespace

LogitTolerance logit_tolerance_for(const std::string& backend, CpuPrecision precision) {
  if (backend == "cpu" && precision == CpuPrecision::Exact) return LogitTolerance{1e-4, 0.0, "exact CPU (fp32): 1e-4"};
  if (backend == "cpu") {
    return LogitTolerance{1e-4, 2.0 * kFastCpuRounding,
                          format("fast CPU (int8 activations): 1e-4 + peak/%.0f", 1.0 / (2.0 * kFastCpuRounding))};
  }
  return LogitTolerance{1e-3, 1.0 / 64.0, "GPU (bf16): 1e-3 + peak/64"};
}

const char* to_string(EquivalenceVerdict verdict) {
  switch (verdict) {
    case EquivalenceVerdict::Identical:
      return "identical";
    case EquivalenceVerdict::NearTie:
      return "near-tie";
    case EquivalenceVerdict::Different:
      return "different";
  }
  return "?";
}

EquivalenceResult compare_greedy_runs(const std::vector<std::vector<float>>& logits_a,
                                      const std::vector<int32_t>& tokens_a,
                                      const std::vector<std::vector<float>>& logits_b,
                                      const std::vector<int32_t>& tokens_b, const LogitTolerance& tolerance) {
  EquivalenceResult result;
  result.rule = tolerance.rule;
  const std::size_t steps = std::min(logits_a.size(), logits_b.size());
  int beyond_rounding_step = -1;  // first step whose logits differ by more than the bound
  for (std::size_t i = 0; i < steps; ++i) {
    const std::vector<float>& x = logits_a[i];
    const std::vector<float>& y = logits_b[i];
    StepComparison s;
    s.step = int(i);
    double peak = 0.0;
    for (std::size_t v = 0; v < std::min(x.size(), y.size()); ++v) {
      s.max_abs_diff = std::max(s.max_abs_diff, std::fabs(double(x[v]) - double(y[v])));
      peak = std::max({peak, std::fabs(double(x[v])), std::fabs(double(y[v]))});
    }
    if (x.size() != y.size()) s.max_abs_diff = INFINITY;  // different vocabularies never agree
    s.tolerance = tolerance.at(peak);
    s.token_a = i < tokens_a.size() ? tokens_a[i] : argmax(x);
    s.token_b = i < tokens_b.size() ? tokens_b[i] : argmax(y);
    result.max_abs_diff = std::max(result.max_abs_diff, s.max_abs_diff);
    if (beyond_rounding_step < 0 && !(s.max_abs_diff <= s.tolerance)) beyond_rounding_step = int(i);
    if (s.tokens_differ()) {
      const bool in_range = s.token_a >= 0 && s.token_b >= 0 && std::size_t(s.token_a) < x.size() &&
                            std::size_t(s.token_b) < x.size() && std::size_t(s.token_a) < y.size() &&
                            std::size_t(s.token_b) < y.size();
      s.margin_a = in_range ? double(x[std::size_t(s.token_a)]) - double(x[std::size_t(s.token_b)]) : INFINITY;
      s.margin_b = in_range ? double(y[std::size_t(s.token_b)]) - double(y[std::size_t(s.token_a)]) : INFINITY;
      result.first_divergent_step = int(i);
      result.uncompared_steps = int(steps - i - 1);
      result.steps.push_back(s);
      break;
    }
    result.steps.push_back(s);
  }

  const int compared = int(result.steps.size());
  if (result.first_divergent_step >= 0) {
    const StepComparison& flip = result.steps.back();
    const bool tied = flip.margin_a <= flip.tolerance && flip.margin_b <= flip.tolerance;
    const bool close = beyond_rounding_step < 0;
    result.verdict = tied && close ? EquivalenceVerdict::NearTie : EquivalenceVerdict::Different;
    std::string why = "greedy tokens agree until step " + std::to_string(flip.step) + ", where one run picks " +
                      std::to_string(flip.token_a) + " and the other " + std::to_string(flip.token_b) +
                      format(": each prefers its own token by %.3g / %.3g", flip.margin_a, flip.margin_b);
    if (result.verdict == EquivalenceVerdict::NearTie) {
      why += format(", both within the rounding bound %.3g (a near-tie); max |dlogit| %.3g before it", flip.tolerance,
                    result.max_abs_diff);
    } else if (!tied) {
      why += format(", beyond the rounding bound %.3g", flip.tolerance);
    } else {
      const StepComparison& worst = result.steps[std::size_t(beyond_rounding_step)];
      why += format(", within rounding, but at step %.0f the logits already differ by %.3g, beyond the bound %.3g",
                    double(worst.step), worst.max_abs_diff, worst.tolerance);
    }
    why += "; the " + std::to_string(result.uncompared_steps) +
           " later steps continue from different tokens and are not compared";
    result.explanation = why;
  } else if (beyond_rounding_step >= 0) {
    const StepComparison& worst = result.steps[std::size_t(beyond_rounding_step)];
    result.verdict = EquivalenceVerdict::Different;
    result.explanation = "greedy tokens agree over " + std::to_string(compared) + " steps, but at step " +
                         std::to_string(worst.step) +
                         format(" the logits differ by %.3g, beyond the rounding bound %.3g", worst.max_abs_diff,
                                worst.tolerance);
  } else {
    result.verdict = EquivalenceVerdict::Identical;
    result.explanation = "greedy tokens agree over " + std::to_string(compared) + " steps" +
                         format(", max |dlogit| %.3g within the rounding bound", result.max_abs_diff);
  }
  return result;
}

}  // namespace lazyscope

#include "app/workbench/workbench_types.h"

#include <algorithm>
#include <cmath>

#include "base/error.h"

namespace lazyscope::workbench {

const std::vector<PolicyChoice>& policy_choices() {
  // prefix caching only makes sense under full (causal) semantics; the rest are block mode.
  static const std::vector<PolicyChoice> choices = {
      {"lazy", Mode::Block, Policy::Lazy},    {"materialized", Mode::Block, Policy::Materialized},
      {"full", Mode::Full, Policy::None},     {"none", Mode::Block, Policy::None},
      {"prefix", Mode::Full, Policy::Prefix}, {"positional", Mode::Block, Policy::Positional},
  };
  return choices;
}

PolicyChoice policy_choice(const QString& key) {
  for (const auto& choice : policy_choices())
    if (choice.key == key) return choice;
  throw Error("unknown policy column '" + key.toStdString() +
              "' (expected lazy, materialized, full, none, prefix or positional)");
}

float EquivalenceReport::max_abs_diff() const {
  float worst = 0.0f;
  for (const auto& step : steps) worst = std::max(worst, step.max_abs_diff);
  return worst;
}

int EquivalenceReport::mismatches() const {
  return int(std::count_if(steps.begin(), steps.end(), [](const auto& s) { return s.mismatch(); }));
}

int EquivalenceReport::first_mismatch() const {
  for (const auto& step : steps)
    if (step.mismatch()) return step.step;
  return -1;
}

QString EquivalenceReport::summary() const {
  if (steps.empty())
    return QStringLiteral("no steps to compare yet: run %1 and %2").arg(key_a, key_b);
  const QString worst = QString::number(double(max_abs_diff()), 'g', 2);
  QString text;
  switch (verdict) {
    case EquivalenceVerdict::Identical:
      text = QStringLiteral("%1 vs %2: identical over %3 tokens, max |Δ| %4 within the bound")
                 .arg(key_a, key_b)
                 .arg(int(steps.size()))
                 .arg(worst);
      break;
    case EquivalenceVerdict::NearTie:
      text = QStringLiteral("%1 vs %2: identical for %3 token%7, then a near-tie at step %4 "
                            "(both runs had the two tokens within the bound), max |Δ| %5; "
                            "%6 later steps not compared")
                 .arg(key_a, key_b)
                 .arg(first_mismatch())
                 .arg(first_mismatch())
                 .arg(worst)
                 .arg(uncompared_steps)
                 .arg(first_mismatch() == 1 ? QString() : QStringLiteral("s"));
      break;
    case EquivalenceVerdict::Different:
      text = QStringLiteral("%1 vs %2: DIFFERENT: %3").arg(key_a, key_b, explanation);
      break;
  }
  if (tokens_a != tokens_b)
    text += QStringLiteral(" (%1 generated %2 tokens, %3 generated %4)")
                .arg(key_a)
                .arg(tokens_a)
                .arg(key_b)
                .arg(tokens_b);
  if (!rule.isEmpty()) {
    text += QStringLiteral(". Rule: %1").arg(rule);
    if (bound_scales) text += QStringLiteral(" (peak = the step's largest |logit|)");
    if (fast_cpu) text += QStringLiteral("; --cpu-precision exact checks the strict 1e-4");
  }
  return text;
}

}  // namespace lazyscope::workbench

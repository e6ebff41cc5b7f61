#include "app/workbench/models/equivalence_model.h"

#include <algorithm>
#include <cmath>
#include <numeric>

namespace lazyscope::workbench {
namespace {

std::vector<TokenCandidate> top_candidates(const std::vector<float>& logits,
                                           const TokenTextFn& token_text, int top_k) {
  std::vector<int> ids(logits.size());
  std::iota(ids.begin(), ids.end(), 0);
  const int k = std::min<int>(top_k, int(ids.size()));
  std::partial_sort(ids.begin(), ids.begin() + k, ids.end(),
                    [&](int x, int y) { return logits[size_t(x)] > logits[size_t(y)]; });
  std::vector<TokenCandidate> out;
  for (int i = 0; i < k; ++i)
    out.push_back({token_text ? token_text(ids[size_t(i)]) : QString::number(ids[size_t(i)]),
                   ids[size_t(i)], logits[size_t(ids[size_t(i)])]});
  return out;
}

QString escape_token(const QString& text) {
  QString shown = text.toHtmlEscaped();
  shown.replace('\n', QStringLiteral("⏎"));
  shown.replace(' ', QStringLiteral("·"));
  return shown;
}

}  // namespace

EquivalenceReport compare_runs(const RunResult& a, const RunResult& b,
                               const TokenTextFn& token_text, int top_k) {
  EquivalenceReport report;
  report.key_a = QString::fromStdString(a.policy);
  report.key_b = QString::fromStdString(b.policy);
  report.tokens_a = int(a.generated_ids.size());
  report.tokens_b = int(b.generated_ids.size());
  const size_t shared_tokens = std::min(a.generated_ids.size(), b.generated_ids.size());
  report.same_tokens =
      std::equal(a.generated_ids.begin(), a.generated_ids.begin() + long(shared_tokens),
                 b.generated_ids.begin());
  const LogitTolerance tolerance = logit_tolerance_for(a.backend, a.cpu_precision);
  const EquivalenceResult rule = compare_greedy_runs(a.step_logits, a.generated_ids, b.step_logits,
                                                     b.generated_ids, tolerance);
  report.verdict = rule.verdict;
  report.explanation = QString::fromStdString(rule.explanation);
  report.rule = QString::fromStdString(rule.rule);
  report.bound_scales = tolerance.relative > 0.0;
  report.fast_cpu = a.backend == "cpu" && a.cpu_precision == CpuPrecision::Fast;
  report.uncompared_steps = rule.uncompared_steps;
  for (const StepComparison& compared : rule.steps) {
    const size_t s = size_t(compared.step);
    EquivalenceStep step;
    step.step = compared.step;
    step.max_abs_diff = float(compared.max_abs_diff);
    step.tolerance = float(compared.tolerance);
    step.top_a = top_candidates(a.step_logits[s], token_text, top_k);
    step.top_b = top_candidates(b.step_logits[s], token_text, top_k);
    step.argmax_a = compared.token_a;
    step.argmax_b = compared.token_b;
    report.steps.push_back(std::move(step));
  }
  return report;
}

EquivalenceModel::EquivalenceModel(QObject* parent) : QAbstractListModel(parent) {
  report_.key_a = QStringLiteral("lazy");
  report_.key_b = QStringLiteral("materialized");
}

void EquivalenceModel::setReport(const EquivalenceReport& report) {
  beginResetModel();
  report_ = report;
  endResetModel();
  Q_EMIT reportChanged();
}

void EquivalenceModel::clear() {
  EquivalenceReport empty;
  empty.key_a = report_.key_a;
  empty.key_b = report_.key_b;
  setReport(empty);
}

int EquivalenceModel::rowCount(const QModelIndex& parent) const {
  return parent.isValid() ? 0 : int(report_.steps.size());
}

QVariant EquivalenceModel::data(const QModelIndex& index, int role) const {
  if (!index.isValid() || index.row() >= rowCount()) return {};
  const EquivalenceStep& step = report_.steps[size_t(index.row())];
  switch (role) {
    case Qt::DisplayRole:
      return QStringLiteral("step %1: max |Δ| %2")
          .arg(step.step)
          .arg(double(step.max_abs_diff), 0, 'e', 2);
    case Qt::ToolTipRole:
      return tooltip(index.row());
    case MaxAbsDiffRole:
      return double(step.max_abs_diff);
    case MismatchRole:
      return step.mismatch();
    default:
      return {};
  }
}

QString EquivalenceModel::tooltip(int row) const {
  if (row < 0 || row >= rowCount()) return {};
  const EquivalenceStep& step = report_.steps[size_t(row)];
  QString html =
      QStringLiteral("<b>step %1</b> &nbsp; max |Δlogit| = %2 (bound %3)%4<br><table cellspacing=4>")
          .arg(step.step)
          .arg(double(step.max_abs_diff), 0, 'e', 2)
          .arg(double(step.tolerance), 0, 'g', 3)
          .arg(step.mismatch() ? QStringLiteral(" &nbsp;<b style='color:#c00'>argmax differs</b>")
                               : QString());
  html += QStringLiteral(
              "<tr><th align=left>%1</th><th align=right>logit</th><th width=12></th>"
              "<th align=left>%2</th><th align=right>logit</th></tr>")
              .arg(report_.key_a.toHtmlEscaped(), report_.key_b.toHtmlEscaped());
  const size_t rows = std::max(step.top_a.size(), step.top_b.size());
  for (size_t i = 0; i < rows; ++i) {
    auto cell = [&](const std::vector<TokenCandidate>& top) {
      if (i >= top.size()) return QStringLiteral("<td></td><td></td>");
      return QStringLiteral("<td><tt>%1</tt></td><td align=right>%2</td>")
          .arg(escape_token(top[i].text))
          .arg(double(top[i].logit), 0, 'f', 6);
    };
    html += QStringLiteral("<tr>%1<td></td>%2</tr>").arg(cell(step.top_a), cell(step.top_b));
  }
  html += QStringLiteral("</table>");
  return html;
}

}  // namespace lazyscope::workbench

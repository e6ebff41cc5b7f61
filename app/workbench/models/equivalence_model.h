#pragma once
// Step-by-step comparison of two runs' logits (lazy vs materialized) and a list model over it.
#include <QAbstractListModel>
#include <functional>

#include "app/workbench/workbench_types.h"
#include "engine/runtime/session.h"

namespace lazyscope::workbench {

using TokenTextFn = std::function<QString(int32_t)>;

// Compares step_logits of `a` and `b` by the engine's rule (max |Δ| per step while the greedy
// tokens agree, a near-tie or a difference at the first flip, nothing after it), with the top-5
// of each run at every compared step. The rounding bound follows a's backend and CPU precision.
EquivalenceReport compare_runs(const RunResult& a, const RunResult& b,
                               const TokenTextFn& token_text, int top_k = 5);

class EquivalenceModel : public QAbstractListModel {
  Q_OBJECT
 public:
  enum Role { MaxAbsDiffRole = Qt::UserRole + 1, MismatchRole };
  explicit EquivalenceModel(QObject* parent = nullptr);

  void setReport(const EquivalenceReport& report);
  void clear();
  const EquivalenceReport& report() const { return report_; }
  QString summary() const { return report_.summary(); }
  // Rich-text tooltip: both runs' top-5 tokens and logits at `step`.
  QString tooltip(int step) const;

  int rowCount(const QModelIndex& parent = {}) const override;
  QVariant data(const QModelIndex& index, int role) const override;

 Q_SIGNALS:
  void reportChanged();

 private:
  EquivalenceReport report_;
};

}  // namespace lazyscope::workbench

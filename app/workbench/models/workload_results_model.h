#pragma once
// The Workload Lab's comparison table: one row per (budget, policy) run, the figures of
// ServingResult as `lazyscope-cli workload` prints them, plus lazy / this ratios at the same budget.
#include <QAbstractTableModel>
#include <vector>

#include "engine/serving/serving_result.h"

namespace lazyscope::workbench {

class WorkloadResultsModel : public QAbstractTableModel {
  Q_OBJECT
 public:
  enum Column {
    Budget, Policy, TokenHit, DocumentHit, PrefixHit, TtftP50, TtftP99, TpotP50, OutputTokS, AllTokS,
    CopiedMiB, Evictions, Preemptions, PeakBlocks, LazyHitRatio, LazyTtftRatio, ColumnCount
  };
  explicit WorkloadResultsModel(QObject* parent = nullptr) : QAbstractTableModel(parent) {}

  void clear();
  void add(const ServingResult& result);
  // A row for a (budget, policy) that could not run, with the reason.
  void addFailure(const QString& policy, qint64 budget, const QString& message);
  const std::vector<ServingResult>& results() const { return results_; }
  // The result a row shows; nullptr for a failure row.
  const ServingResult* resultAt(int row) const;
  // Lazy's result at the budget of `r` (nullptr when lazy did not run there).
  const ServingResult* lazyAt(qint64 budget) const;

  int rowCount(const QModelIndex& parent = {}) const override;
  int columnCount(const QModelIndex& parent = {}) const override;
  QVariant data(const QModelIndex& index, int role = Qt::DisplayRole) const override;
  QVariant headerData(int section, Qt::Orientation orientation, int role = Qt::DisplayRole) const override;

 private:
  struct Row {
    int result = -1;  // index into results_, -1: failure
    QString policy, error;
    qint64 budget = 0;
  };
  std::vector<ServingResult> results_;
  std::vector<Row> rows_;
};

// "1GiB", "512MiB", "unlimited" (as the CLI prints budgets).
QString budget_label(qint64 bytes);

}  // namespace lazyscope::workbench

#pragma once
// Two sets of kernels side by side (two reports, or the lazy and the materialized requests of one
// report): each side's Kernel Statistics, and a table of the per-kernel time difference B − A with
// the ratio B ÷ A, largest difference first. CUDA graph launches recorded as a whole are counted on
// both sides; in the difference table every graph's launches share one row (graph ids differ
// between sessions and pools).
#include <QWidget>

#include "app/workbench/models/kernel_stats_model.h"

class QLabel;
class QTableView;

namespace lazyscope::workbench {

class KernelStatsView;

class ReportCompareWindow : public QWidget {
  Q_OBJECT
 public:
  ReportCompareWindow(const std::vector<KernelRecord>& a, const QString& name_a, const std::vector<KernelRecord>& b,
                      const QString& name_b, QWidget* parent = nullptr)
      : ReportCompareWindow(a, {}, name_a, b, {}, name_b, parent) {}
  ReportCompareWindow(const std::vector<KernelRecord>& a, const std::vector<GraphRecord>& graphs_a,
                      const QString& name_a, const std::vector<KernelRecord>& b,
                      const std::vector<GraphRecord>& graphs_b, const QString& name_b, QWidget* parent = nullptr);
  KernelDiffModel* diffModel() { return diff_; }
  QString summary() const;

 private:
  KernelDiffModel* diff_ = nullptr;
  QLabel* summary_ = nullptr;
};

}  // namespace lazyscope::workbench

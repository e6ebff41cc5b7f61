#pragma once
// The Kernel Statistics panel: per kernel name count, total, share of GPU time, mean, median, p95,
// min, max, grid/block and registers, sortable by any column (click a header); it follows the GPU
// timeline's selected range (Shift+drag there), all kernels when nothing is selected.
#include <QWidget>

#include "app/workbench/models/kernel_stats_model.h"

class QLabel;
class QSortFilterProxyModel;
class QTableView;

namespace lazyscope::workbench {

class KernelStatsView : public QWidget {
  Q_OBJECT
 public:
  explicit KernelStatsView(QWidget* parent = nullptr);
  // origin_ns: the time the range text counts from (the timeline's first record).
  void setKernels(const std::vector<KernelRecord>& kernels, qint64 origin_ns);
  KernelStatsModel* model() { return model_; }
  QSortFilterProxyModel* proxy() { return proxy_; }
  QTableView* table() { return table_; }
  QString summary() const;

 public Q_SLOTS:
  void setRange(qint64 from_ns, qint64 to_ns);

 private:
  void updateSummary();
  KernelStatsModel* model_ = nullptr;
  QSortFilterProxyModel* proxy_ = nullptr;
  QTableView* table_ = nullptr;
  QLabel* summary_ = nullptr;
  qint64 origin_ns_ = 0;
  bool any_kernels_ = false;
};

}  // namespace lazyscope::workbench

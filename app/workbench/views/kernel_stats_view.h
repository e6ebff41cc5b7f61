#pragma once
// The Kernel Statistics panel: per kernel name count, total, share of GPU time, mean, median, p95,
// min, max, grid/block and registers, sortable by any column (click a header); a row per CUDA graph
// for the launches recorded as a whole, with a note saying which decode steps have kernel rows; it
// follows the GPU timeline's selected range (Shift+drag there), everything when nothing is selected.
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
  // A session's kernels, graph launches and device_trace rows (the kernel-detail note).
  void setRecording(const SessionRecording& recording, qint64 origin_ns);
  void setRecords(const std::vector<KernelRecord>& kernels, const std::vector<GraphRecord>& graphs,
                  const std::vector<RecordedTraceSummary>& traces, qint64 origin_ns);
  KernelStatsModel* model() { return model_; }
  QSortFilterProxyModel* proxy() { return proxy_; }
  QTableView* table() { return table_; }
  QString summary() const;
  // Which decode steps have kernel rows, when some ran as graph launches; empty otherwise.
  QString detailNote() const;

 public Q_SLOTS:
  void setRange(qint64 from_ns, qint64 to_ns);

 private:
  void updateSummary();
  KernelStatsModel* model_ = nullptr;
  QSortFilterProxyModel* proxy_ = nullptr;
  QTableView* table_ = nullptr;
  QLabel* summary_ = nullptr;
  QLabel* note_ = nullptr;
  qint64 origin_ns_ = 0;
  bool any_kernels_ = false;
};

}  // namespace lazyscope::workbench

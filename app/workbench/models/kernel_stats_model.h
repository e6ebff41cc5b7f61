#pragma once
// Qt table models over profiler/kernel_stats.h: the per-kernel statistics of one session (or of
// the timeline's selected range), with a row per CUDA graph for the launches recorded as a whole,
// and the per-kernel difference of two reports. Every cell has its
// text for display and its number under kSortRole, so a QSortFilterProxyModel sorts numerically.
#include <QAbstractTableModel>
#include <vector>

#include "profiler/kernel_stats.h"

namespace lazyscope::workbench {

class KernelStatsModel : public QAbstractTableModel {
  Q_OBJECT
 public:
  static constexpr int kSortRole = Qt::UserRole + 1;
  enum Column { kName, kCount, kTotal, kShare, kMean, kMedian, kP95, kMin, kMax, kLaunch, kRegisters, kColumnCount };

  explicit KernelStatsModel(QObject* parent = nullptr);
  // The kernels (and graph launches) of a session; the statistics cover [from_ns, to_ns)
  // (to <= from: all of them). Setting them clears the range.
  void setKernels(const std::vector<KernelRecord>& kernels) { setRecords(kernels, {}); }
  void setRecords(const std::vector<KernelRecord>& kernels, const std::vector<GraphRecord>& graphs);
  void setRange(qint64 from_ns, qint64 to_ns);
  const KernelStats& stats() const { return stats_; }
  qint64 rangeFrom() const { return from_; }
  qint64 rangeTo() const { return to_; }

  int rowCount(const QModelIndex& parent = {}) const override;
  int columnCount(const QModelIndex& parent = {}) const override;
  QVariant data(const QModelIndex& index, int role) const override;
  QVariant headerData(int section, Qt::Orientation orientation, int role) const override;

 private:
  void recompute();
  std::vector<KernelRecord> kernels_;
  std::vector<GraphRecord> graphs_;
  KernelStats stats_;
  qint64 from_ = 0, to_ = 0;
};

class KernelDiffModel : public QAbstractTableModel {
  Q_OBJECT
 public:
  static constexpr int kSortRole = KernelStatsModel::kSortRole;
  enum Column { kName, kCountA, kCountB, kTotalA, kTotalB, kDiff, kRatio, kColumnCount };

  explicit KernelDiffModel(QObject* parent = nullptr);
  void setReports(const KernelStats& a, const KernelStats& b, const QString& name_a, const QString& name_b);
  const std::vector<KernelDiffRow>& rows() const { return rows_; }

  int rowCount(const QModelIndex& parent = {}) const override;
  int columnCount(const QModelIndex& parent = {}) const override;
  QVariant data(const QModelIndex& index, int role) const override;
  QVariant headerData(int section, Qt::Orientation orientation, int role) const override;

 private:
  std::vector<KernelDiffRow> rows_;
  QString name_a_ = QStringLiteral("A"), name_b_ = QStringLiteral("B");
};

// "12.3 µs" for a duration in ns (the tables' time cells).
QString duration_text(double ns);

}  // namespace lazyscope::workbench

#include "app/workbench/models/kernel_stats_model.h"

#include <QBrush>
#include <QColor>
#include <QFont>

#include "app/workbench/models/gpu_timeline_data.h"

namespace lazyscope::workbench {

QString duration_text(double ns) { return QString::fromStdString(format_duration_ns(ns)); }

KernelStatsModel::KernelStatsModel(QObject* parent) : QAbstractTableModel(parent) {}

void KernelStatsModel::setRecords(const std::vector<KernelRecord>& kernels, const std::vector<GraphRecord>& graphs) {
  kernels_ = kernels;
  graphs_ = graphs;
  from_ = to_ = 0;
  recompute();
}

void KernelStatsModel::setRange(qint64 from_ns, qint64 to_ns) {
  from_ = from_ns;
  to_ = to_ns;
  recompute();
}

void KernelStatsModel::recompute() {
  beginResetModel();
  stats_ = kernel_stats(kernels_, graphs_, from_, to_);
  endResetModel();
}

int KernelStatsModel::rowCount(const QModelIndex& parent) const { return parent.isValid() ? 0 : int(stats_.rows.size()); }
int KernelStatsModel::columnCount(const QModelIndex& parent) const { return parent.isValid() ? 0 : kColumnCount; }

QVariant KernelStatsModel::data(const QModelIndex& index, int role) const {
  if (!index.isValid() || index.row() >= int(stats_.rows.size())) return {};
  const KernelStatsRow& r = stats_.rows[size_t(index.row())];
  const QString registers = r.graph                              ? QStringLiteral("—")
                            : r.registers_min == r.registers_max ? QString::number(r.registers_min)
                                                                 : QStringLiteral("%1–%2").arg(r.registers_min).arg(r.registers_max);
  if (role == Qt::DisplayRole) {
    switch (index.column()) {
      case kName: return QString::fromStdString(r.name);
      case kCount: return QString::number(r.count);
      case kTotal: return duration_text(double(r.total_ns));
      case kShare: return QStringLiteral("%1 %").arg(100.0 * r.share, 0, 'f', 1);
      case kMean: return duration_text(r.mean_ns);
      case kMedian: return duration_text(r.median_ns);
      case kP95: return duration_text(double(r.p95_ns));
      case kMin: return duration_text(double(r.min_ns));
      case kMax: return duration_text(double(r.max_ns));
      case kLaunch: return QString::fromStdString(r.launch);
      case kRegisters: return registers;
      default: return {};
    }
  }
  if (role == kSortRole) {
    switch (index.column()) {
      case kName: return QString::fromStdString(r.name);
      case kCount: return qlonglong(r.count);
      case kTotal: return qlonglong(r.total_ns);
      case kShare: return r.share;
      case kMean: return r.mean_ns;
      case kMedian: return r.median_ns;
      case kP95: return qlonglong(r.p95_ns);
      case kMin: return qlonglong(r.min_ns);
      case kMax: return qlonglong(r.max_ns);
      case kLaunch: return QString::fromStdString(r.launch);
      case kRegisters: return r.registers_max;
      default: return {};
    }
  }
  if (role == Qt::TextAlignmentRole && index.column() != kName && index.column() != kLaunch)
    return QVariant(Qt::AlignRight | Qt::AlignVCenter);
  if (role == Qt::ToolTipRole && index.column() == kName) {
    if (r.graph)
      return tr("%1: %2 launches recorded as a whole (CUPTI graph trace), each one's GPU time from the start "
                "of its first node to the end of its last; the kernels inside are not itemised")
          .arg(QString::fromStdString(r.name))
          .arg(r.count);
    return QString::fromStdString(r.name);
  }
  // Graph rows stand out: italic on a tinted background (the timeline's hatched pink bars).
  if (role == Qt::FontRole && r.graph) {
    QFont f;
    f.setItalic(true);
    return f;
  }
  if (role == Qt::BackgroundRole && r.graph) return QBrush(QColor(250, 222, 240));
  if (role == Qt::ForegroundRole && r.graph) return QBrush(QColor(60, 20, 50));
  return {};
}

QVariant KernelStatsModel::headerData(int section, Qt::Orientation orientation, int role) const {
  if (orientation != Qt::Horizontal) return {};
  if (role == Qt::DisplayRole) {
    static const char* names[kColumnCount] = {"Kernel", "Count", "Total", "GPU time", "Mean", "Median",
                                              "p95", "Min", "Max", "Grid / block", "Registers"};
    return tr(names[section]);
  }
  if (role == Qt::ToolTipRole) {
    switch (section) {
      case kShare:
        return tr("This row's share of the GPU busy time in the range: every kernel plus every graph launch "
                  "recorded as a whole");
      case kP95: return tr("95th percentile of the durations (nearest rank)");
      case kLaunch: return tr("The launch configuration, or how many different ones were used");
      case kRegisters: return tr("Registers per thread (a range when the launches differ)");
      default: return {};
    }
  }
  return {};
}

KernelDiffModel::KernelDiffModel(QObject* parent) : QAbstractTableModel(parent) {}

void KernelDiffModel::setReports(const KernelStats& a, const KernelStats& b, const QString& name_a,
                                 const QString& name_b) {
  beginResetModel();
  rows_ = compare_kernel_stats(a, b);
  name_a_ = name_a;
  name_b_ = name_b;
  endResetModel();
  headerDataChanged(Qt::Horizontal, 0, kColumnCount - 1);
}

int KernelDiffModel::rowCount(const QModelIndex& parent) const { return parent.isValid() ? 0 : int(rows_.size()); }
int KernelDiffModel::columnCount(const QModelIndex& parent) const { return parent.isValid() ? 0 : kColumnCount; }

QVariant KernelDiffModel::data(const QModelIndex& index, int role) const {
  if (!index.isValid() || index.row() >= int(rows_.size())) return {};
  const KernelDiffRow& r = rows_[size_t(index.row())];
  if (role == Qt::DisplayRole) {
    switch (index.column()) {
      case kName: return QString::fromStdString(r.name);
      case kCountA: return QString::number(r.count_a);
      case kCountB: return QString::number(r.count_b);
      case kTotalA: return duration_text(double(r.total_a_ns));
      case kTotalB: return duration_text(double(r.total_b_ns));
      case kDiff: return (r.diff_ns() > 0 ? QStringLiteral("+") : QString()) + duration_text(double(r.diff_ns()));
      case kRatio:
        if (r.total_a_ns == 0) return tr("only in %1").arg(name_b_);
        if (r.total_b_ns == 0) return tr("only in %1").arg(name_a_);
        return QStringLiteral("%1×").arg(r.ratio(), 0, 'f', 2);
      default: return {};
    }
  }
  if (role == kSortRole) {
    switch (index.column()) {
      case kName: return QString::fromStdString(r.name);
      case kCountA: return qlonglong(r.count_a);
      case kCountB: return qlonglong(r.count_b);
      case kTotalA: return qlonglong(r.total_a_ns);
      case kTotalB: return qlonglong(r.total_b_ns);
      case kDiff: return qlonglong(r.diff_ns());
      case kRatio: return r.total_a_ns > 0 ? r.ratio() : 1e300;
      default: return {};
    }
  }
  if (role == Qt::ForegroundRole && index.column() == kDiff && r.diff_ns() != 0)
    return QBrush(r.diff_ns() > 0 ? QColor(190, 40, 40) : QColor(30, 140, 60));
  if (role == Qt::TextAlignmentRole && index.column() != kName) return QVariant(Qt::AlignRight | Qt::AlignVCenter);
  return {};
}

QVariant KernelDiffModel::headerData(int section, Qt::Orientation orientation, int role) const {
  if (orientation != Qt::Horizontal || role != Qt::DisplayRole) return {};
  switch (section) {
    case kName: return tr("Kernel");
    case kCountA: return tr("Count %1").arg(name_a_);
    case kCountB: return tr("Count %1").arg(name_b_);
    case kTotalA: return tr("Total %1").arg(name_a_);
    case kTotalB: return tr("Total %1").arg(name_b_);
    case kDiff: return tr("%1 − %2").arg(name_b_, name_a_);
    case kRatio: return tr("%1 ÷ %2").arg(name_b_, name_a_);
    default: return {};
  }
}

}  // namespace lazyscope::workbench

#include "app/workbench/models/cache_stats_model.h"

namespace lazyscope::workbench {

QString format_bytes(qint64 bytes) {
  const double b = double(bytes);
  if (bytes < 1024) return QStringLiteral("%1 B").arg(bytes);
  if (bytes < (1 << 20)) return QStringLiteral("%1 KiB").arg(b / 1024.0, 0, 'f', 1);
  if (bytes < (qint64(1) << 30))
    return QStringLiteral("%1 MiB").arg(b / double(1 << 20), 0, 'f', 1);
  return QStringLiteral("%1 GiB").arg(b / double(qint64(1) << 30), 0, 'f', 2);
}

CacheStatsModel::CacheStatsModel(QObject* parent) : QAbstractTableModel(parent) {}

void CacheStatsModel::add(int run_index, const RequestFinishedEvent& event) {
  StatsRow row;
  row.run_index = run_index;
  row.policy = QString::fromStdString(event.policy);
  if (event.mode == "full" && event.policy == "none") row.policy = QStringLiteral("full");
  row.stats = event.stats;
  row.cumulative = event.cumulative;
  row.ttft_ms = event.ttft_ms;
  row.tokens_per_second = event.decode_ms_per_token > 0 ? 1000.0 / event.decode_ms_per_token : 0.0;
  const int at = rowCount();
  beginInsertRows({}, at, at);
  rows_.push_back(row);
  endInsertRows();
}

void CacheStatsModel::clear() {
  beginResetModel();
  rows_.clear();
  endResetModel();
}

QStringList CacheStatsModel::policies() const {
  QStringList out;
  for (const auto& row : rows_)
    if (!out.contains(row.policy)) out << row.policy;
  return out;
}

int CacheStatsModel::rowCount(const QModelIndex& parent) const {
  return parent.isValid() ? 0 : int(rows_.size());
}
int CacheStatsModel::columnCount(const QModelIndex& parent) const {
  return parent.isValid() ? 0 : ColumnCount;
}

QVariant CacheStatsModel::data(const QModelIndex& index, int role) const {
  if (!index.isValid() || role != Qt::DisplayRole) return {};
  const StatsRow& row = rows_.at(size_t(index.row()));
  switch (index.column()) {
    case RunColumn:
      return row.run_index;
    case PolicyColumn:
      return row.policy;
    case TokenHitColumn:
      return QStringLiteral("%1 %").arg(100.0 * row.stats.token_hit_ratio(), 0, 'f', 1);
    case DocHitColumn:
      return QStringLiteral("%1 %").arg(100.0 * row.stats.document_hit_ratio(), 0, 'f', 1);
    case StoredColumn:
      return format_bytes(row.stats.bytes_stored);
    case CopiedColumn:
      return format_bytes(row.stats.bytes_copied);
  }
  return {};
}

QVariant CacheStatsModel::headerData(int section, Qt::Orientation orientation, int role) const {
  if (orientation != Qt::Horizontal || role != Qt::DisplayRole) return {};
  static const char* names[] = {"Run", "Policy", "Token hits", "Doc hits", "Stored", "Copied"};
  return section >= 0 && section < ColumnCount ? QString::fromLatin1(names[section]) : QVariant();
}

}  // namespace lazyscope::workbench

#pragma once
// History of finished requests, one row per (run, policy): what the cache-stats plots draw.
#include <QAbstractTableModel>
#include <QString>
#include <vector>

#include "engine/events/events.h"

namespace lazyscope::workbench {

struct StatsRow {
  int run_index = 0;
  QString policy;
  CacheStats stats;       // this request
  CacheStats cumulative;  // session so far, this policy
  double ttft_ms = 0.0;
  double tokens_per_second = 0.0;
};

class CacheStatsModel : public QAbstractTableModel {
  Q_OBJECT
 public:
  enum Column {
    RunColumn,
    PolicyColumn,
    TokenHitColumn,
    DocHitColumn,
    StoredColumn,
    CopiedColumn,
    ColumnCount
  };
  explicit CacheStatsModel(QObject* parent = nullptr);

  void add(int run_index, const RequestFinishedEvent& event);
  void clear();
  const std::vector<StatsRow>& rows() const { return rows_; }
  QStringList policies() const;  // in order of first appearance

  int rowCount(const QModelIndex& parent = {}) const override;
  int columnCount(const QModelIndex& parent = {}) const override;
  QVariant data(const QModelIndex& index, int role) const override;
  QVariant headerData(int section, Qt::Orientation orientation, int role) const override;

 private:
  std::vector<StatsRow> rows_;
};

QString format_bytes(qint64 bytes);

}  // namespace lazyscope::workbench

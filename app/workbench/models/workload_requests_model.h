#pragma once
// The Workload Lab's request table: the requests of one (budget, policy) run, one row each, and
// what a click on one shows: its documents, their placements and shifts, and what the policy
// shared, encoded or copied for it.
#include <QAbstractTableModel>
#include <QString>
#include <vector>

#include "engine/serving/serving_result.h"
#include "profiler/workload_tables.h"

namespace lazyscope::workbench {

class WorkloadRequestsModel : public QAbstractTableModel {
  Q_OBJECT
 public:
  enum Column { Request, Arrival, Ttft, Documents, Hits, CachedTokens, CopiedKiB, Preemptions, ColumnCount };
  explicit WorkloadRequestsModel(QObject* parent = nullptr) : QAbstractTableModel(parent) {}

  // The run's requests in request order (a copy; the run may be replaced later).
  void setRun(const ServingResult* run);
  const RequestRecord* recordAt(int row) const;

  int rowCount(const QModelIndex& parent = {}) const override;
  int columnCount(const QModelIndex& parent = {}) const override;
  QVariant data(const QModelIndex& index, int role = Qt::DisplayRole) const override;
  QVariant headerData(int section, Qt::Orientation orientation, int role = Qt::DisplayRole) const override;

 private:
  std::vector<RequestRecord> records_;
};

// Rich text for the details pane. `prompts` gives the request's placements (empty: only the
// record's counts are shown); `bytes_per_block` turns copied bytes into blocks (0: not shown).
QString request_details_html(const ServingResult& run, const RequestRecord& record, const WorkloadPrompts& prompts,
                             qint64 bytes_per_block);

}  // namespace lazyscope::workbench

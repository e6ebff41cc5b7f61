#pragma once
// The Workload Lab's KV pools, one strip per policy run: every block of the pool as a cell, coloured
// by what holds it (a cached document shared by whoever hits it, a copy held by a running request,
// a query or generated tokens, the prefix), dark while a running request references it, red for a
// moment when it was evicted. Paints only the strips inside the exposed rectangle.
#include <QHash>
#include <QString>
#include <QVector>
#include <QWidget>

#include "app/workbench/workload_worker.h"

namespace lazyscope::workbench {

class PoolStripsView : public QWidget {
  Q_OBJECT
 public:
  explicit PoolStripsView(QWidget* parent = nullptr);
  void clear();
  void addRun(int run, const QString& label, int num_blocks);
  void setSnapshot(int run, const PoolMapSnapshot& snapshot);
  // Cells of each kind in the latest snapshot of `run` (tests).
  int count(int run, PoolCell cell) const;
  qint64 evictions(int run) const { return strips_.value(run).snapshot.evictions; }
  QSize sizeHint() const override;
  QSize minimumSizeHint() const override { return {300, 60}; }
  int paintedStrips() const { return painted_strips_; }

 protected:
  void paintEvent(QPaintEvent* event) override;

 private:
  struct Strip {
    QString label;
    int num_blocks = 0;
    PoolMapSnapshot snapshot;
  };
  int stripHeight() const;
  QVector<int> order_;
  QHash<int, Strip> strips_;
  int painted_strips_ = 0;
};

}  // namespace lazyscope::workbench

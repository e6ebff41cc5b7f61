#pragma once
// Cache stats over the run history: token- and document-level hit ratio per policy, and the
// KV bytes stored and copied, plotted with QCustomPlot.
#include <QWidget>

#include "app/workbench/models/cache_stats_model.h"

class QCustomPlot;
class QLabel;

namespace lazyscope::workbench {

class CacheStatsView : public QWidget {
  Q_OBJECT
 public:
  explicit CacheStatsView(QWidget* parent = nullptr);
  CacheStatsModel* model() { return &model_; }
  QCustomPlot* hitPlot() { return hits_; }
  QCustomPlot* bytesPlot() { return bytes_; }
  // Number of graphs per plot (tests).
  int hitGraphCount() const;

 private:
  void replot();
  CacheStatsModel model_;
  QCustomPlot* hits_ = nullptr;
  QCustomPlot* bytes_ = nullptr;
  QLabel* totals_ = nullptr;
};

QColor policy_color(const QString& key);

}  // namespace lazyscope::workbench

#pragma once
// The Workload Lab's plots (QCustomPlot): live per policy run, the running batch and the queue,
// the TTFT distribution (CDF) and throughput; at the end, bar charts of the comparison with
// lazy / other ratios, and the budget sweep (hit ratio versus KV budget per policy).
#include <QHash>
#include <QWidget>
#include <vector>

#include "engine/serving/serving_result.h"

class QCustomPlot;
class QCPGraph;

namespace lazyscope::workbench {

class WorkloadLiveCharts : public QWidget {
  Q_OBJECT
 public:
  explicit WorkloadLiveCharts(QWidget* parent = nullptr);
  void clear();
  void addRun(int run, const QString& label, const QColor& color);
  void addSteps(int run, const QVector<StepSample>& steps);
  void addRequests(int run, const QVector<RequestRecord>& records);
  // Redraws the plots that are on screen; returns how many it redrew.
  int replotVisible();
  void markDirty() { dirty_ = true; }
  QCustomPlot* batchPlot() { return batch_; }
  QCustomPlot* ttftPlot() { return ttft_; }
  QCustomPlot* throughputPlot() { return throughput_; }

 private:
  struct Run {
    QCPGraph *running = nullptr, *waiting = nullptr, *ttft = nullptr, *throughput = nullptr;
    std::vector<double> ttft_ms;
    double first_arrival = -1;
    qint64 output_tokens = 0;
    bool ttft_dirty = false;
  };
  QCustomPlot* batch_ = nullptr;
  QCustomPlot* ttft_ = nullptr;
  QCustomPlot* throughput_ = nullptr;
  QHash<int, Run> runs_;
  bool dirty_ = false;
};

class WorkloadComparisonCharts : public QWidget {
  Q_OBJECT
 public:
  explicit WorkloadComparisonCharts(QWidget* parent = nullptr);
  // Bars at the first budget of `results`; the sweep when they hold more than one budget.
  void setResults(const std::vector<ServingResult>& results);
  QCustomPlot* barsPlot() { return bars_; }
  QCustomPlot* sweepPlot() { return sweep_; }

 private:
  QCustomPlot* bars_ = nullptr;
  QCustomPlot* sweep_ = nullptr;
};

}  // namespace lazyscope::workbench

#pragma once
// The lazy-overhead probe's results (Run ▸ Measure Lazy Overhead, or a report's overhead_probe
// table): plain and lazy attention per call at each shape and context, the median lazy overhead
// with its interquartile range and min..max, as a table and a plot (one bar per row, whiskers at
// the quartiles). On the CPU backend the rows say so: they measure the CPU kernels.
#include <QWidget>
#include <vector>

#include "profiler/overhead_probe.h"

class QLabel;
class QProgressBar;
class QPushButton;
class QTableWidget;

namespace lazyscope::workbench {

class OverheadPlot : public QWidget {
  Q_OBJECT
 public:
  explicit OverheadPlot(QWidget* parent = nullptr);
  void setRows(const std::vector<OverheadProbeRow>& rows);
  QSize sizeHint() const override { return {420, 220}; }

 protected:
  void paintEvent(QPaintEvent* event) override;

 private:
  std::vector<OverheadProbeRow> rows_;
};

class OverheadPanel : public QWidget {
  Q_OBJECT
 public:
  explicit OverheadPanel(QWidget* parent = nullptr);
  void setRows(const std::vector<OverheadProbeRow>& rows);
  void addRow(const OverheadProbeRow& row);
  const std::vector<OverheadProbeRow>& rows() const { return rows_; }
  // A measurement in flight: `expected` rows to come; 0 hides the progress bar.
  void setRunning(int expected, const QString& what);
  void setMeasureEnabled(bool on, const QString& why = {});
  QTableWidget* table() { return table_; }
  QString status() const;

 Q_SIGNALS:
  void measureRequested();

 private:
  void rebuild();
  std::vector<OverheadProbeRow> rows_;
  int expected_ = 0;
  QLabel* status_ = nullptr;
  QProgressBar* progress_ = nullptr;
  QPushButton* measure_ = nullptr;
  QTableWidget* table_ = nullptr;
  OverheadPlot* plot_ = nullptr;
};

}  // namespace lazyscope::workbench

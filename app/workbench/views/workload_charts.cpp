// qcustomplot.h uses Qt's lower-case keywords; this file includes no engine backend header.
#undef QT_NO_KEYWORDS
#include "app/workbench/views/workload_charts.h"

#include <qcustomplot.h>

#include <QGridLayout>
#include <QVBoxLayout>
#include <algorithm>
#include <map>
#include <set>

#include "app/workbench/models/workload_results_model.h"
#include "app/workbench/views/cache_stats_view.h"

namespace lazyscope::workbench {
namespace {

QCustomPlot* make_plot(QWidget* parent, const QString& title, const QString& x, const QString& y) {
  auto* plot = new QCustomPlot(parent);
  plot->plotLayout()->insertRow(0);
  plot->plotLayout()->addElement(0, 0, new QCPTextElement(plot, title, QFont(plot->font().family(), 9, QFont::Bold)));
  plot->xAxis->setLabel(x);
  plot->yAxis->setLabel(y);
  plot->legend->setVisible(true);
  QFont f = plot->font();
  f.setPointSizeF(f.pointSizeF() * 0.85);
  plot->legend->setFont(f);
  plot->legend->setBrush(QColor(255, 255, 255, 210));
  plot->setMinimumHeight(150);
  return plot;
}

}  // namespace

WorkloadLiveCharts::WorkloadLiveCharts(QWidget* parent) : QWidget(parent) {
  auto* grid = new QGridLayout(this);
  grid->setContentsMargins(0, 0, 0, 0);
  batch_ = make_plot(this, tr("Running batch (solid) and queue (dashed)"), tr("run time s"), tr("requests"));
  ttft_ = make_plot(this, tr("TTFT distribution (CDF of finished requests)"), tr("TTFT ms"), tr("fraction ≤"));
  ttft_->yAxis->setRange(0, 1.02);
  ttft_->axisRect()->insetLayout()->setInsetAlignment(0, Qt::AlignBottom | Qt::AlignRight);
  throughput_ = make_plot(this, tr("Output throughput so far (generated tokens / elapsed run time)"), tr("run time s"),
                          tr("tok/s"));
  grid->addWidget(batch_, 0, 0);
  grid->addWidget(ttft_, 0, 1);
  grid->addWidget(throughput_, 1, 0, 1, 2);
}

void WorkloadLiveCharts::clear() {
  for (QCustomPlot* p : {batch_, ttft_, throughput_}) p->clearGraphs();
  runs_.clear();
  dirty_ = true;
}

void WorkloadLiveCharts::addRun(int run, const QString& label, const QColor& color) {
  Run r;
  r.running = batch_->addGraph();
  r.running->setName(label + tr(" running"));
  r.running->setPen(QPen(color, 1.6));
  r.waiting = batch_->addGraph();
  r.waiting->setName(label + tr(" waiting"));
  r.waiting->setPen(QPen(color, 1.2, Qt::DashLine));
  r.ttft = ttft_->addGraph();
  r.ttft->setName(label);
  r.ttft->setPen(QPen(color, 2.0));
  r.ttft->setLineStyle(QCPGraph::lsStepLeft);
  r.throughput = throughput_->addGraph();
  r.throughput->setName(label);
  r.throughput->setPen(QPen(color, 2.0));
  runs_.insert(run, r);
  dirty_ = true;
}

void WorkloadLiveCharts::addSteps(int run, const QVector<StepSample>& steps) {
  auto it = runs_.find(run);
  if (it == runs_.end()) return;
  QVector<double> t, running, waiting;
  for (const StepSample& s : steps) {
    t.push_back(s.t_s);
    running.push_back(s.running);
    waiting.push_back(s.waiting);
  }
  it->running->addData(t, running, true);
  it->waiting->addData(t, waiting, true);
  dirty_ = true;
}

void WorkloadLiveCharts::addRequests(int run, const QVector<RequestRecord>& records) {
  auto it = runs_.find(run);
  if (it == runs_.end()) return;
  Run& r = it.value();
  QVector<double> t, tput;
  for (const RequestRecord& rec : records) {
    r.ttft_ms.push_back(rec.ttft_ms());
    if (r.first_arrival < 0 || rec.arrival_s < r.first_arrival) r.first_arrival = rec.arrival_s;
    r.output_tokens += rec.output_tokens;
    const double elapsed = rec.finish_s - r.first_arrival;
    if (elapsed > 0) {
      t.push_back(rec.finish_s);
      tput.push_back(double(r.output_tokens) / elapsed);
    }
  }
  r.throughput->addData(t, tput, true);
  r.ttft_dirty = true;
  dirty_ = true;
}

int WorkloadLiveCharts::replotVisible() {
  if (!dirty_ || !isVisible()) return 0;
  dirty_ = false;
  for (Run& r : runs_) {
    if (!r.ttft_dirty) continue;
    r.ttft_dirty = false;
    std::vector<double> v = r.ttft_ms;
    std::sort(v.begin(), v.end());
    QVector<double> xs, ys;
    // At most ~500 points per curve: the CDF's shape, not every request.
    const std::size_t stride = std::max<std::size_t>(1, v.size() / 500);
    for (std::size_t i = 0; i < v.size(); i += stride) {
      xs.push_back(v[i]);
      ys.push_back(double(i + 1) / double(v.size()));
    }
    if (!v.empty()) {
      xs.push_back(v.back());
      ys.push_back(1.0);
    }
    r.ttft->setData(xs, ys, true);
  }
  int drawn = 0;
  for (QCustomPlot* p : {batch_, ttft_, throughput_}) {
    if (!p->isVisible()) continue;
    p->xAxis->rescale();
    if (p != ttft_) p->yAxis->rescale();
    if (p != ttft_) p->yAxis->setRangeLower(0);
    p->replot(QCustomPlot::rpQueuedReplot);
    ++drawn;
  }
  return drawn;
}

WorkloadComparisonCharts::WorkloadComparisonCharts(QWidget* parent) : QWidget(parent) {
  auto* layout = new QVBoxLayout(this);
  layout->setContentsMargins(0, 0, 0, 0);
  bars_ = new QCustomPlot(this);
  bars_->setMinimumHeight(220);
  sweep_ = make_plot(this, tr("Budget sweep: token hit ratio versus KV budget per policy"), tr("KV budget per policy, MiB"),
                     tr("hit ratio %"));
  sweep_->axisRect()->insetLayout()->setInsetAlignment(0, Qt::AlignBottom | Qt::AlignRight);
  layout->addWidget(bars_, 3);
  layout->addWidget(sweep_, 2);
}

void WorkloadComparisonCharts::setResults(const std::vector<ServingResult>& results) {
  bars_->clearPlottables();
  bars_->clearItems();
  bars_->plotLayout()->clear();
  sweep_->clearGraphs();
  if (results.empty()) {
    bars_->replot();
    sweep_->replot();
    return;
  }
  const int64_t budget = results.front().kv_budget_bytes;
  std::vector<const ServingResult*> at;
  const ServingResult* lazy = nullptr;
  for (const ServingResult& r : results) {
    if (r.kv_budget_bytes != budget) continue;
    at.push_back(&r);
    if (r.policy == "lazy") lazy = &r;
  }
  struct Metric {
    QString title;
    double (*value)(const ServingResult&);
    bool lower_is_better;
  };
  const Metric metrics[] = {
      {tr("Token hit ratio %"), [](const ServingResult& r) { return 100 * r.hit_ratio_tokens; }, false},
      {tr("TTFT p50 ms"), [](const ServingResult& r) { return r.ttft_ms.p50; }, true},
      {tr("TTFT p99 ms"), [](const ServingResult& r) { return r.ttft_ms.p99; }, true},
      {tr("Output tok/s"), [](const ServingResult& r) { return r.output_tok_s; }, false},
  };
  bars_->plotLayout()->addElement(
      0, 0,
      new QCPTextElement(bars_, tr("Comparison at %1 per policy (labels: lazy / this, or this / lazy for times)")
                                    .arg(budget_label(budget)),
                         QFont(bars_->font().family(), 9, QFont::Bold)));
  auto* row = new QCPLayoutGrid;
  bars_->plotLayout()->addElement(1, 0, row);
  QFont small = bars_->font();
  small.setPointSizeF(small.pointSizeF() * 0.8);
  for (int m = 0; m < int(std::size(metrics)); ++m) {
    auto* rect = new QCPAxisRect(bars_);
    row->addElement(0, m, rect);
    rect->axis(QCPAxis::atTop)->setLabel(metrics[m].title);
    rect->axis(QCPAxis::atTop)->setVisible(true);
    rect->axis(QCPAxis::atTop)->setTicks(false);
    rect->axis(QCPAxis::atTop)->setTickLabels(false);
    QSharedPointer<QCPAxisTickerText> ticker(new QCPAxisTickerText);
    double top = 0;
    for (int i = 0; i < int(at.size()); ++i) {
      const ServingResult& r = *at[std::size_t(i)];
      ticker->addTick(i + 1, QString::fromStdString(r.policy));
      auto* bar = new QCPBars(rect->axis(QCPAxis::atBottom), rect->axis(QCPAxis::atLeft));
      const QColor color = policy_color(QString::fromStdString(r.policy));
      bar->setBrush(color);
      bar->setPen(QPen(color.darker(130)));
      bar->setWidth(0.7);
      const double v = metrics[m].value(r);
      bar->addData(i + 1, v);
      top = std::max(top, v);
      if (lazy && &r != lazy) {
        const double lv = metrics[m].value(*lazy);
        const double ratio = metrics[m].lower_is_better ? (lv > 0 ? v / lv : 0) : (v > 0 ? lv / v : 0);
        auto* label = new QCPItemText(bars_);
        label->setClipToAxisRect(false);
        label->position->setAxes(rect->axis(QCPAxis::atBottom), rect->axis(QCPAxis::atLeft));
        label->position->setCoords(i + 1, v);
        label->setPositionAlignment(Qt::AlignBottom | Qt::AlignHCenter);
        label->setFont(small);
        label->setText(ratio > 0 ? QStringLiteral("%1×").arg(ratio, 0, 'f', 2) : QStringLiteral("∞"));
      }
    }
    rect->axis(QCPAxis::atBottom)->setTicker(ticker);
    rect->axis(QCPAxis::atBottom)->setTickLabelRotation(40);
    rect->axis(QCPAxis::atBottom)->setTickLabelFont(small);
    rect->axis(QCPAxis::atBottom)->setRange(0.3, double(at.size()) + 0.7);
    rect->axis(QCPAxis::atLeft)->setRange(0, top > 0 ? top * 1.18 : 1);
    rect->axis(QCPAxis::atLeft)->setTickLabelFont(small);
  }
  bars_->plotLayout()->setRowStretchFactor(0, 0.01);
  bars_->replot();

  // Sweep: one line per policy over the budgets (unlimited left out of the axis).
  std::map<std::string, std::vector<std::pair<double, double>>> lines;
  std::set<int64_t> budgets;
  for (const ServingResult& r : results) {
    budgets.insert(r.kv_budget_bytes);
    if (r.kv_budget_bytes > 0) lines[r.policy].push_back({double(r.kv_budget_bytes) / 1048576.0, 100 * r.hit_ratio_tokens});
  }
  sweep_->setVisible(budgets.size() > 1);
  for (auto& [policy, points] : lines) {
    std::sort(points.begin(), points.end());
    QCPGraph* g = sweep_->addGraph();
    g->setName(QString::fromStdString(policy));
    const QColor color = policy_color(QString::fromStdString(policy));
    g->setPen(QPen(color, 2.0));
    g->setScatterStyle(QCPScatterStyle(QCPScatterStyle::ssDisc, color, 6));
    for (const auto& [x, y] : points) g->addData(x, y);
  }
  sweep_->rescaleAxes();
  sweep_->yAxis->setRange(0, 100);
  sweep_->xAxis->scaleRange(1.1);
  sweep_->replot();
}

}  // namespace lazyscope::workbench

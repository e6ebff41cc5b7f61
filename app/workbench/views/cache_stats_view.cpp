// qcustomplot.h uses Qt's lower-case keywords; this file includes no engine backend header.
#undef QT_NO_KEYWORDS
#include "app/workbench/views/cache_stats_view.h"

#include <qcustomplot.h>

#include <QLabel>
#include <QVBoxLayout>

namespace lazyscope::workbench {
namespace {

void style_plot(QCustomPlot* plot, const QString& title, const QString& y_label) {
  plot->plotLayout()->insertRow(0);
  auto* heading = new QCPTextElement(plot, title, QFont(plot->font().family(), 9, QFont::Bold));
  plot->plotLayout()->addElement(0, 0, heading);
  plot->xAxis->setLabel(QStringLiteral("run #"));
  plot->yAxis->setLabel(y_label);
  plot->legend->setVisible(true);
  QFont legend_font = plot->font();
  legend_font.setPointSizeF(legend_font.pointSizeF() * 0.85);
  plot->legend->setFont(legend_font);
  plot->legend->setBrush(QColor(255, 255, 255, 210));
  // The legend gets its own row under the axes so it never hides a line.
  auto* legend_row = new QCPLayoutGrid;
  plot->plotLayout()->addElement(2, 0, legend_row);
  legend_row->setMargins(QMargins(4, 0, 4, 4));
  plot->axisRect()->insetLayout()->take(plot->legend);
  legend_row->addElement(0, 0, plot->legend);
  plot->legend->setFillOrder(QCPLegend::foColumnsFirst);
  plot->legend->setWrap(6);
  plot->legend->setBorderPen(Qt::NoPen);
  plot->plotLayout()->setRowStretchFactor(2, 0.001);
  QSharedPointer<QCPAxisTickerFixed> ticker(new QCPAxisTickerFixed);
  ticker->setTickStep(1.0);
  ticker->setScaleStrategy(QCPAxisTickerFixed::ssMultiples);
  plot->xAxis->setTicker(ticker);
  plot->setMinimumHeight(150);
}

// QCustomPlot paints white with black axes whatever the palette: give it the window's colours.
void apply_palette(QCustomPlot* plot, const QPalette& palette) {
  const QColor text = palette.color(QPalette::WindowText);
  const QColor grid = palette.color(QPalette::Mid);
  plot->setBackground(palette.brush(QPalette::Base));
  for (QCPAxis* axis : {plot->xAxis, plot->yAxis}) {
    axis->setBasePen(QPen(text));
    axis->setTickPen(QPen(text));
    axis->setSubTickPen(QPen(text));
    axis->setLabelColor(text);
    axis->setTickLabelColor(text);
    axis->grid()->setPen(QPen(grid, 0, Qt::DotLine));
  }
  QColor legend = palette.color(QPalette::Base);
  legend.setAlpha(210);
  plot->legend->setBrush(legend);
  plot->legend->setTextColor(text);
  for (int i = 0; i < plot->plotLayout()->elementCount(); ++i)
    if (auto* title = qobject_cast<QCPTextElement*>(plot->plotLayout()->elementAt(i)))
      title->setTextColor(text);
  plot->replot();
}

}  // namespace

QColor policy_color(const QString& key) {
  if (key == "lazy") return QColor(31, 119, 180);
  if (key == "materialized") return QColor(214, 39, 40);
  if (key == "full") return QColor(90, 90, 90);
  if (key == "none") return QColor(188, 189, 34);  // olive: brown read as a second red beside materialized
  if (key == "prefix") return QColor(44, 160, 44);
  if (key == "positional") return QColor(148, 103, 189);
  return QColor(23, 190, 207);
}

CacheStatsView::CacheStatsView(QWidget* parent) : QWidget(parent) {
  auto* layout = new QVBoxLayout(this);
  layout->setContentsMargins(4, 4, 4, 4);
  hits_ = new QCustomPlot(this);
  bytes_ = new QCustomPlot(this);
  style_plot(hits_, tr("Hit ratio per run (solid: tokens, dashed: documents)"), tr("hit ratio %"));
  style_plot(bytes_, tr("KV bytes (solid: stored, dashed: copied)"), tr("MiB"));
  apply_palette(hits_, palette());
  apply_palette(bytes_, palette());
  totals_ = new QLabel(this);
  totals_->setWordWrap(true);
  layout->addWidget(hits_, 1);
  layout->addWidget(bytes_, 1);
  layout->addWidget(totals_);
  connect(&model_, &CacheStatsModel::rowsInserted, this, &CacheStatsView::replot);
  connect(&model_, &CacheStatsModel::modelReset, this, &CacheStatsView::replot);
  replot();
}

int CacheStatsView::hitGraphCount() const { return hits_->graphCount(); }

void CacheStatsView::replot() {
  hits_->clearGraphs();
  bytes_->clearGraphs();
  const QStringList policies = model_.policies();
  double max_mib = 0.01;
  int max_run = 1;
  QStringList totals;
  for (const QString& key : policies) {
    QVector<double> x, token_hits, doc_hits, stored, copied;
    CacheStats last_cumulative;
    for (const StatsRow& row : model_.rows()) {
      if (row.policy != key) continue;
      x << row.run_index;
      token_hits << 100.0 * row.stats.token_hit_ratio();
      doc_hits << 100.0 * row.stats.document_hit_ratio();
      stored << double(row.stats.bytes_stored) / double(1 << 20);
      copied << double(row.stats.bytes_copied) / double(1 << 20);
      max_mib = std::max({max_mib, stored.back(), copied.back()});
      max_run = std::max(max_run, row.run_index);
      last_cumulative = row.cumulative;
    }
    const QColor color = policy_color(key);
    // Policies often coincide (same bytes stored): earlier ones are drawn wider so both show.
    const double width = 2.0 + 2.5 * double(policies.size() - 1 - policies.indexOf(key)) /
                                   std::max<qsizetype>(1, policies.size() - 1);
    auto add = [&](QCustomPlot* plot, const QVector<double>& y, const QString& name, bool dashed) {
      QCPGraph* graph = plot->addGraph();
      graph->setData(x, y);
      graph->setName(name);
      QPen pen(color, width);
      if (dashed) pen.setStyle(Qt::DashLine);
      graph->setPen(pen);
      graph->setScatterStyle(
          QCPScatterStyle(dashed ? QCPScatterStyle::ssSquare : QCPScatterStyle::ssDisc, 7));
      if (dashed)
        graph->removeFromLegend();  // the title explains solid vs dashed; one entry per policy
    };
    add(hits_, token_hits, key, false);
    add(hits_, doc_hits, key + tr(" documents"), true);
    add(bytes_, stored, key, false);
    add(bytes_, copied, key + tr(" copied"), true);
    totals << tr("<b>%1</b> session: %2 % token hits, %3 % doc hits, %4 copied")
                  .arg(key)
                  .arg(100.0 * last_cumulative.token_hit_ratio(), 0, 'f', 1)
                  .arg(100.0 * last_cumulative.document_hit_ratio(), 0, 'f', 1)
                  .arg(format_bytes(last_cumulative.bytes_copied));
  }
  hits_->xAxis->setRange(0.5, max_run + 0.5);
  hits_->yAxis->setRange(-3, 105);
  bytes_->xAxis->setRange(0.5, max_run + 0.5);
  bytes_->yAxis->setRange(0, max_mib * 1.15);
  hits_->legend->setVisible(!policies.isEmpty());
  bytes_->legend->setVisible(!policies.isEmpty());
  hits_->replot();
  bytes_->replot();
  totals_->setText(totals.isEmpty() ? tr("No runs yet.")
                                    : totals.join(QStringLiteral(" &nbsp;|&nbsp; ")));
}

}  // namespace lazyscope::workbench

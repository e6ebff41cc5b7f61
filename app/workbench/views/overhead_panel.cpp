#include "app/workbench/views/overhead_panel.h"

#include <QHBoxLayout>
#include <QHeaderView>
#include <QLabel>
#include <QPainter>
#include <QProgressBar>
#include <QPushButton>
#include <QSplitter>
#include <QTableWidget>
#include <QVBoxLayout>
#include <algorithm>
#include <cmath>

namespace lazyscope::workbench {
namespace {

QString pct(double v) { return QStringLiteral("%1%2 %").arg(v >= 0 ? "+" : "").arg(100.0 * v, 0, 'f', 2); }

QString row_label(const OverheadProbeRow& r) {
  return QStringLiteral("%1 b%2 ctx %3").arg(QString::fromStdString(r.shape)).arg(r.batch).arg(r.context);
}

}  // namespace

OverheadPlot::OverheadPlot(QWidget* parent) : QWidget(parent) {
  setMinimumHeight(160);
  setObjectName(QStringLiteral("overhead_plot"));
}

void OverheadPlot::setRows(const std::vector<OverheadProbeRow>& rows) {
  rows_ = rows;
  update();
}

void OverheadPlot::paintEvent(QPaintEvent*) {
  QPainter p(this);
  p.fillRect(rect(), palette().base());
  const QColor text = palette().color(QPalette::Text);
  if (rows_.empty()) {
    p.setPen(palette().color(QPalette::PlaceholderText));
    p.drawText(rect(), Qt::AlignCenter | Qt::TextWordWrap,
               tr("Run ▸ Measure Lazy Overhead times plain and lazy attention at this model's shapes."));
    return;
  }
  // Vertical axis: overhead in %, symmetric around 0 so a speed-up shows below the line.
  double span = 0.005;
  for (const OverheadProbeRow& r : rows_)
    span = std::max({span, std::fabs(r.overhead_p25), std::fabs(r.overhead_p75), std::fabs(r.overhead)});
  span *= 1.15;
  const QRect plot = rect().adjusted(64, 24, -12, -48);
  auto y_of = [&](double v) { return plot.center().y() - v / span * (plot.height() / 2.0); };
  p.setPen(palette().color(QPalette::Mid));
  p.drawRect(plot);
  p.setPen(text);
  p.drawText(QRect(4, 2, width() - 8, 20), Qt::AlignLeft | Qt::AlignVCenter,
             tr("lazy overhead (median of lazy ÷ plain − 1; whiskers: quartiles) — %1 kernels")
                 .arg(QString::fromStdString(rows_.front().backend)));
  for (double v : {-span / 1.15, 0.0, span / 1.15}) {
    const int y = int(std::lround(y_of(v)));
    p.setPen(v == 0.0 ? text : palette().color(QPalette::Mid));
    p.drawLine(plot.left(), y, plot.right(), y);
    p.setPen(text);
    p.drawText(QRect(0, y - 8, plot.left() - 4, 16), Qt::AlignRight | Qt::AlignVCenter, pct(v));
  }
  const double slot = double(plot.width()) / double(rows_.size());
  const double bar_w = std::min(60.0, slot * 0.6);
  for (size_t i = 0; i < rows_.size(); ++i) {
    const OverheadProbeRow& r = rows_[i];
    const double cx = plot.left() + slot * (double(i) + 0.5);
    const double y0 = y_of(0.0), y1 = y_of(r.overhead);
    const QColor color = r.overhead > 0 ? QColor(214, 39, 40) : QColor(44, 160, 44);
    p.fillRect(QRectF(cx - bar_w / 2, std::min(y0, y1), bar_w, std::max(1.0, std::fabs(y1 - y0))), color);
    p.setPen(QPen(text, 1.5));
    const double q1 = y_of(r.overhead_p25), q3 = y_of(r.overhead_p75);
    p.drawLine(QPointF(cx, q1), QPointF(cx, q3));
    p.drawLine(QPointF(cx - 6, q1), QPointF(cx + 6, q1));
    p.drawLine(QPointF(cx - 6, q3), QPointF(cx + 6, q3));
    p.setPen(text);
    p.drawText(QRectF(cx - slot / 2, plot.bottom() + 4, slot, 40), Qt::AlignHCenter | Qt::AlignTop | Qt::TextWordWrap,
               QStringLiteral("%1\n%2").arg(row_label(r), pct(r.overhead)));
  }
}

OverheadPanel::OverheadPanel(QWidget* parent) : QWidget(parent) {
  setObjectName(QStringLiteral("overhead_panel"));
  status_ = new QLabel(this);
  status_->setWordWrap(true);
  progress_ = new QProgressBar(this);
  progress_->hide();
  measure_ = new QPushButton(tr("Measure"), this);
  measure_->setToolTip(tr("Times plain and lazy attention at the current model's shapes and the last request's context"));
  connect(measure_, &QPushButton::clicked, this, &OverheadPanel::measureRequested);
  table_ = new QTableWidget(0, 9, this);
  table_->setHorizontalHeaderLabels({tr("Backend"), tr("Kernel"), tr("Shape (heads/kv/dim)"), tr("Batch"),
                                     tr("Context"), tr("Plain µs"), tr("Lazy µs"), tr("Lazy overhead"),
                                     tr("Quartiles / min..max")});
  table_->verticalHeader()->hide();
  table_->setEditTriggers(QAbstractItemView::NoEditTriggers);
  table_->horizontalHeader()->setSectionResizeMode(QHeaderView::ResizeToContents);
  table_->horizontalHeader()->setStretchLastSection(true);
  plot_ = new OverheadPlot(this);
  auto* top = new QHBoxLayout;
  top->addWidget(status_, 1);
  top->addWidget(progress_);
  top->addWidget(measure_);
  auto* split = new QSplitter(Qt::Vertical, this);
  split->addWidget(table_);
  split->addWidget(plot_);
  auto* layout = new QVBoxLayout(this);
  layout->setContentsMargins(4, 4, 4, 4);
  layout->addLayout(top);
  layout->addWidget(split, 1);
  rebuild();
}

void OverheadPanel::setRows(const std::vector<OverheadProbeRow>& rows) {
  rows_ = rows;
  rebuild();
}

void OverheadPanel::addRow(const OverheadProbeRow& row) {
  rows_.push_back(row);
  rebuild();
}

void OverheadPanel::setRunning(int expected, const QString& what) {
  expected_ = expected;
  progress_->setVisible(expected > 0);
  progress_->setRange(0, std::max(1, expected));
  measure_->setEnabled(expected == 0);
  if (!what.isEmpty()) status_->setText(what);
  rebuild();
}

void OverheadPanel::setMeasureEnabled(bool on, const QString& why) {
  measure_->setEnabled(on && expected_ == 0);
  measure_->setToolTip(why.isEmpty() ? measure_->toolTip() : why);
  measure_->setVisible(on || !why.isEmpty());
}

QString OverheadPanel::status() const { return status_->text(); }

void OverheadPanel::rebuild() {
  table_->setRowCount(int(rows_.size()));
  for (int i = 0; i < int(rows_.size()); ++i) {
    const OverheadProbeRow& r = rows_[size_t(i)];
    const QStringList cells = {
        QStringLiteral("%1 (%2)").arg(QString::fromStdString(r.backend), QString::fromStdString(r.device)),
        QString::fromStdString(r.kernel),
        // A catalogue name gets its numbers beside it; "H/KV/D" is its own description.
        QStringLiteral("%1/%2/%3").arg(r.num_heads).arg(r.num_kv_heads).arg(r.head_dim) == QString::fromStdString(r.shape)
            ? QString::fromStdString(r.shape)
            : QStringLiteral("%1 (%2/%3/%4)").arg(QString::fromStdString(r.shape)).arg(r.num_heads).arg(r.num_kv_heads).arg(r.head_dim),
        QString::number(r.batch),
        QString::number(r.context),
        QString::number(r.plain_us, 'f', 2),
        QString::number(r.lazy_us, 'f', 2),
        pct(r.overhead),
        QStringLiteral("%1 .. %2 / %3 .. %4").arg(pct(r.overhead_p25), pct(r.overhead_p75), pct(r.overhead_min), pct(r.overhead_max))};
    for (int c = 0; c < cells.size(); ++c) table_->setItem(i, c, new QTableWidgetItem(cells[c]));
  }
  progress_->setValue(int(rows_.size()));
  if (expected_ == 0 && !rows_.empty()) {
    const bool cpu = rows_.front().backend == "cpu";
    status_->setText(tr("%n row(s), %1 repeats each, timed in alternation (ABBA).%2", nullptr, int(rows_.size()))
                         .arg(rows_.front().repeats)
                         .arg(cpu ? tr(" CPU backend: these are the CPU kernels, not the GPU's.") : QString()));
  } else if (expected_ == 0) {
    status_->setText(tr("No overhead measured yet."));
  }
  plot_->setRows(rows_);
}

}  // namespace lazyscope::workbench

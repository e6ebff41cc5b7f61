#include "app/workbench/views/job_progress.h"

#include <QFontMetrics>
#include <QHBoxLayout>
#include <QLabel>
#include <QProgressBar>
#include <QToolButton>
#include <algorithm>

namespace lazyscope::workbench {

JobProgressArea::JobProgressArea(QWidget* parent) : QWidget(parent) {
  layout_ = new QHBoxLayout(this);
  layout_->setContentsMargins(0, 0, 0, 0);
  hide();
}

void JobProgressArea::begin(const QString& job, const QString& title,
                            std::function<void()> cancel) {
  end(job);
  Row row;
  row.title = title;
  row.on_cancel = std::move(cancel);
  row.widget = new QWidget(this);
  auto* line = new QHBoxLayout(row.widget);
  line->setContentsMargins(0, 0, 0, 0);
  row.label = new QLabel(row.widget);
  row.bar = new QProgressBar(row.widget);
  row.bar->setRange(0, 1000);
  row.bar->setValue(0);
  row.bar->setTextVisible(false);
  // Sizes in text widths, so the row keeps its proportions at any scale factor.
  const QFontMetrics metrics(font());
  row.label->setMaximumWidth(metrics.horizontalAdvance(QLatin1Char('M')) * 24);
  row.bar->setFixedWidth(metrics.horizontalAdvance(QLatin1Char('M')) * 8);
  row.bar->setMaximumHeight(metrics.height());
  row.cancel = new QToolButton(row.widget);
  row.cancel->setText(tr("Cancel"));
  row.cancel->setToolTip(tr("Stop %1; what was there before stays as it was").arg(title));
  row.cancel->setAutoRaise(true);
  line->addWidget(row.label);
  line->addWidget(row.bar);
  line->addWidget(row.cancel);
  layout_->addWidget(row.widget);
  connect(row.cancel, &QToolButton::clicked, this, [this, job] {
    auto it = rows_.find(job);
    if (it == rows_.end()) return;
    Row& r = it->second;
    r.cancel->setEnabled(false);
    setLabel(r, tr("Cancelling %1…").arg(r.title));
    if (r.on_cancel) r.on_cancel();
    Q_EMIT cancelRequested(job);
  });
  setLabel(row, title);
  rows_[job] = row;
  show();
}

void JobProgressArea::update(const QString& job, double fraction, const QString& what) {
  auto it = rows_.find(job);
  if (it == rows_.end()) return;
  Row& row = it->second;
  if (fraction < 0) {
    row.bar->setRange(0, 0);
  } else {
    row.bar->setRange(0, 1000);
    row.bar->setValue(int(1000 * std::clamp(fraction, 0.0, 1.0)));
  }
  if (row.cancel->isEnabled())
    setLabel(row, what.isEmpty() ? row.title : row.title + QStringLiteral(": ") + what);
}

void JobProgressArea::end(const QString& job) {
  auto it = rows_.find(job);
  if (it == rows_.end()) return;
  it->second.widget->deleteLater();
  it->second.widget->hide();
  rows_.erase(it);
  if (rows_.empty()) hide();
}

QToolButton* JobProgressArea::cancelButton(const QString& job) const {
  auto it = rows_.find(job);
  return it == rows_.end() ? nullptr : it->second.cancel;
}

QProgressBar* JobProgressArea::bar(const QString& job) const {
  auto it = rows_.find(job);
  return it == rows_.end() ? nullptr : it->second.bar;
}

QString JobProgressArea::text(const QString& job) const {
  auto it = rows_.find(job);
  return it == rows_.end() ? QString() : it->second.label->toolTip();
}

void JobProgressArea::setLabel(Row& row, const QString& text) {
  // Elided to the label's room; the whole text is the tooltip.
  row.label->setToolTip(text);
  const QFontMetrics metrics(row.label->font());
  row.label->setText(metrics.elidedText(text, Qt::ElideRight, row.label->maximumWidth()));
}

}  // namespace lazyscope::workbench

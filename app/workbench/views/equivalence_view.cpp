#include "app/workbench/views/equivalence_view.h"

#include <QHBoxLayout>
#include <QFontMetrics>
#include <QHelpEvent>
#include <QResizeEvent>
#include <QLabel>
#include <QLinearGradient>
#include <QPainter>
#include <QToolTip>
#include <QVBoxLayout>
#include <algorithm>
#include <cmath>

namespace lazyscope::workbench {
namespace {

constexpr int kStripHeight = 30;
constexpr int kTop = 4;

QFont scaled_font(const QFont& base, double factor) {
  QFont f = base;
  f.setPointSizeF(f.pointSizeF() * factor);
  return f;
}

}  // namespace

// The colour bar with labels, so the strip's colours read as numbers: absolute |Δlogit| for a
// fixed bound (1e-7 … 1e-1 around the exact CPU's 1e-4), multiples of the bound where the
// bound grows with the logits (the fast CPU, the GPU).

class DifferenceScale : public QWidget {
 public:
  using QWidget::QWidget;
  void setBound(double absolute_bound, bool scales) {
    labels_.clear();
    if (scales) {
      labels_ << QStringLiteral("≤1/1000") << QStringLiteral("1/10") << QStringLiteral("10×")
              << QStringLiteral("≥1000×");
    } else {
      for (int i = 0; i < 4; ++i) {  // 1/1000, 1/10, 10 and 1000 times the bound
        const QString edge = i == 0 ? QStringLiteral("≤") : i == 3 ? QStringLiteral("≥") : QString();
        labels_ << edge + QString::number(absolute_bound * std::pow(10.0, -3.0 + 2.0 * i), 'g', 1);
      }
    }
    bound_ = absolute_bound;
    updateGeometry();
    update();
  }
  // Room for the bar and a line of labels, in the labels' own font (any scale, any font size).
  QSize sizeHint() const override {
    const QFontMetrics m(scaled_font(font(), 0.85));
    return {m.horizontalAdvance(labels_.join(QStringLiteral("  "))) * 3 / 2, 14 + m.height()};
  }
  QSize minimumSizeHint() const override {
    const QFontMetrics m(scaled_font(font(), 0.85));
    return {m.horizontalAdvance(labels_.join(QStringLiteral(" "))) + 8, 14 + m.height()};
  }

 protected:
  void paintEvent(QPaintEvent*) override {
    QPainter p(this);
    const QRect bar(4, 2, width() - 8, 10);
    for (int x = 0; x < bar.width(); ++x) {
      const double decades = -3.0 + 6.0 * x / std::max(1, bar.width() - 1);
      p.setPen(difference_color(bound_ * std::pow(10.0, decades), bound_));
      p.drawLine(bar.left() + x, bar.top(), bar.left() + x, bar.bottom());
    }
    p.setPen(palette().color(QPalette::WindowText));
    p.setFont(scaled_font(font(), 0.85));
    for (int i = 0; i < int(labels_.size()); ++i) {  // at 0, 1/3, 2/3, 1 of the bar
      const int x = bar.left() + i * (bar.width() - 1) / 3;
      const int w = p.fontMetrics().horizontalAdvance(labels_[i]);
      p.drawText(std::clamp(x - w / 2, 0, width() - w), bar.bottom() + p.fontMetrics().ascent() + 2,
                 labels_[i]);
    }
  }

 private:
  double bound_ = 1e-4;
  QStringList labels_ = {QStringLiteral("≤1e-07"), QStringLiteral("1e-05"), QStringLiteral("0.001"),
                         QStringLiteral("≥0.1")};
};

QColor difference_color(double max_abs_diff, double bound) {
  if (!std::isfinite(max_abs_diff)) return QColor(120, 0, 0);
  if (!(bound > 0.0)) bound = 1e-4;
  // The bound sits at -4 on the scale below (the exact CPU's 1e-4).
  const double exponent =
      max_abs_diff <= 0 ? -7.0 : std::clamp(std::log10(max_abs_diff / bound) - 4.0, -7.0, -1.0);
  auto mix = [](const QColor& a, const QColor& b, double s) {
    return QColor(int(a.red() + (b.red() - a.red()) * s),
                  int(a.green() + (b.green() - a.green()) * s),
                  int(a.blue() + (b.blue() - a.blue()) * s));
  };
  // Up to the bound stays green, darker the closer to bit-identical; beyond it yellow, then red.
  const QColor dark_green(30, 130, 55), light_green(120, 200, 90), yellow(240, 200, 40),
      red(215, 40, 40);
  if (exponent <= -4.0) return mix(dark_green, light_green, (exponent + 7.0) / 3.0);
  if (exponent <= -2.5) return mix(light_green, yellow, (exponent + 4.0) / 1.5);
  return mix(yellow, red, (exponent + 2.5) / 1.5);
}

EquivalenceStrip::EquivalenceStrip(EquivalenceModel* model, QWidget* parent)
    : QWidget(parent), model_(model) {
  setMouseTracking(true);
  setSizePolicy(QSizePolicy::Expanding, QSizePolicy::Fixed);
  connect(model_, &EquivalenceModel::reportChanged, this, qOverload<>(&QWidget::update));
}

// The step numbers under the cells need a line of their small font.
QSize EquivalenceStrip::sizeHint() const {
  return {600, kStripHeight + kTop + 4 + QFontMetrics(scaled_font(font(), 0.8)).height()};
}
QSize EquivalenceStrip::minimumSizeHint() const { return {100, sizeHint().height()}; }

int EquivalenceStrip::cellWidth() const {
  const int steps = model_->rowCount() + model_->report().uncompared_steps;
  if (steps == 0) return 0;
  return std::clamp((width() - 8) / steps, 3, 36);
}

QRect EquivalenceStrip::cellRect(int step) const {
  const int w = cellWidth();
  return QRect(4 + step * w, kTop, std::max(1, w - (w > 6 ? 1 : 0)), kStripHeight);
}

int EquivalenceStrip::stepAt(const QPoint& pos) const {
  const int w = cellWidth();
  if (w == 0 || pos.y() < kTop || pos.y() > kTop + kStripHeight) return -1;
  const int step = (pos.x() - 4) / w;
  return step >= 0 && step < model_->rowCount() && pos.x() >= 4 ? step : -1;
}

void EquivalenceStrip::paintEvent(QPaintEvent* event) {
  QPainter p(this);
  p.fillRect(rect(), palette().color(QPalette::Base));
  const auto& steps = model_->report().steps;
  if (steps.empty()) {
    p.setPen(palette().color(QPalette::PlaceholderText));
    p.drawText(rect(), Qt::AlignCenter,
               tr("Run lazy and materialized to compare their logits step by step."));
    return;
  }
  const int w = cellWidth();
  const int cells = int(steps.size()) + model_->report().uncompared_steps;
  const int first = std::max(0, (event->rect().left() - 4) / std::max(1, w));
  const int last = std::min(cells - 1, (event->rect().right() - 4) / std::max(1, w));
  p.setFont(scaled_font(font(), 0.8));
  const int label_y = kTop + kStripHeight + 2 + p.fontMetrics().ascent();
  const int label_every = std::max(1, int(std::ceil(36.0 / w)));
  const bool near_tie = model_->report().verdict == EquivalenceVerdict::NearTie;
  for (int i = first; i <= last; ++i) {
    const QRect cell = cellRect(i);
    if (size_t(i) >= steps.size()) {
      // After the flip the runs continue from different tokens: nothing to compare.
      p.fillRect(cell, QColor(225, 225, 225));
      p.fillRect(cell, QBrush(QColor(170, 170, 170), Qt::BDiagPattern));
      if (i % label_every == 0) {
        p.setPen(palette().color(QPalette::WindowText));
        p.drawText(QPoint(cell.left(), label_y), QString::number(i));
      }
      continue;
    }
    const EquivalenceStep& step = steps[size_t(i)];
    p.fillRect(cell, difference_color(step.max_abs_diff, step.tolerance));
    if (step.mismatch() && near_tie) {
      // A near-tie flip: both runs had the two tokens within rounding. An amber frame, no cross.
      p.setPen(QPen(QColor(230, 140, 0), 3));
      p.drawRect(cell.adjusted(1, 1, -2, -2));
    } else if (step.mismatch()) {
      // A mismatch is drawn as a black frame with a cross: visible even on a red cell.
      p.setPen(QPen(Qt::black, 2));
      p.drawRect(cell.adjusted(1, 1, -1, -1));
      p.drawLine(cell.topLeft() + QPoint(2, 2), cell.bottomRight() - QPoint(2, 2));
      p.drawLine(cell.bottomLeft() + QPoint(2, -2), cell.topRight() + QPoint(-2, 2));
    }
    if (i % label_every == 0) {
      p.setPen(palette().color(QPalette::WindowText));
      p.drawText(QPoint(cell.left(), label_y), QString::number(i));
    }
  }
}

bool EquivalenceStrip::event(QEvent* event) {
  if (event->type() == QEvent::ToolTip) {
    auto* help = static_cast<QHelpEvent*>(event);
    const int step = stepAt(help->pos());
    if (step >= 0)
      QToolTip::showText(help->globalPos(), model_->tooltip(step), this, cellRect(step));
    else
      QToolTip::hideText();
    return true;
  }
  return QWidget::event(event);
}

EquivalenceView::EquivalenceView(QWidget* parent) : QWidget(parent) {
  auto* layout = new QVBoxLayout(this);
  layout->setContentsMargins(6, 4, 6, 4);
  auto* top = new QHBoxLayout;
  summary_ = new QLabel(this);
  summary_->setTextInteractionFlags(Qt::TextSelectableByMouse);
  summary_->setWordWrap(true);
  QFont f = summary_->font();
  f.setPointSizeF(f.pointSizeF() * 1.1);
  summary_->setFont(f);
  top->addWidget(summary_, 1);
  scale_label_ = new QLabel(tr("|Δlogit|:"), this);
  top->addWidget(scale_label_, 0, Qt::AlignTop);
  scale_ = new DifferenceScale(this);
  top->addWidget(scale_, 0, Qt::AlignTop);
  layout->addLayout(top);
  strip_ = new EquivalenceStrip(&model_, this);
  layout->addWidget(strip_);
  layout->addStretch();
  connect(&model_, &EquivalenceModel::reportChanged, this, &EquivalenceView::refresh);
  refresh();
}

QString EquivalenceView::summaryText() const { return model_.summary(); }

void EquivalenceView::refresh() {
  const auto& report = model_.report();
  QString mark, style;
  if (!report.steps.empty()) {
    switch (report.verdict) {
      case EquivalenceVerdict::Identical:
        mark = QStringLiteral("✔ ");
        style = QStringLiteral("color:#1a7f37; font-weight:bold");
        break;
      case EquivalenceVerdict::NearTie:
        mark = QStringLiteral("≈ ");
        style = QStringLiteral("color:#a05a00; font-weight:bold");
        break;
      case EquivalenceVerdict::Different:
        mark = QStringLiteral("✘ ");
        style = QStringLiteral("color:#b00020; font-weight:bold");
        break;
    }
  }
  summary_->setText(mark + model_.summary());
  // The scale follows the rule: multiples of the bound where it grows with the logits.
  double bound = 1e-4;
  if (!report.steps.empty()) bound = double(report.steps.front().tolerance);
  scale_->setBound(bound, report.bound_scales);
  scale_label_->setText(report.bound_scales ? tr("|Δlogit| / bound:") : tr("|Δlogit|:"));
  summary_->setToolTip(report.explanation);
  summary_->setStyleSheet(style);
  updateGeometry();
}

QSize EquivalenceView::minimumSizeHint() const {
  // Dock layouts ignore height-for-width: the minimum is the wrapped verdict's height here.
  QSize size = QWidget::minimumSizeHint();
  if (layout() && layout()->hasHeightForWidth() && width() > 0)
    size.setHeight(std::max(size.height(), layout()->heightForWidth(width())));
  return size;
}

void EquivalenceView::resizeEvent(QResizeEvent* event) {
  QWidget::resizeEvent(event);
  if (event->oldSize().width() != width()) updateGeometry();
}

}  // namespace lazyscope::workbench

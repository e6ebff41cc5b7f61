#include "app/workbench/views/timeline_view.h"

#include <QEvent>
#include <QHelpEvent>
#include <QPaintEvent>
#include <QPainter>
#include <QScrollBar>
#include <QToolTip>
#include <QWheelEvent>
#include <algorithm>
#include <cmath>

#include "app/workbench/views/cache_stats_view.h"

namespace lazyscope::workbench {
namespace {

constexpr int kGutter = 118;   // lane labels, not scrolled
constexpr int kAxisHeight = 22;
constexpr int kLaneHeight = 26;
constexpr int kLaneGap = 6;
constexpr int kMargin = 8;

// The policy key inside "request 3 (lazy)", for the same colours as the cache stats plots.
QString policy_of(const QString& name) {
  const qsizetype open = name.lastIndexOf('(');
  const qsizetype close = name.lastIndexOf(')');
  return open >= 0 && close > open ? name.mid(open + 1, close - open - 1) : QString();
}

QColor span_color(const RecordedSpan& span) {
  const QString name = QString::fromStdString(span.name);
  switch (TimelineView::laneOf(span)) {
    case TimelineView::kRequestLane:
      return policy_color(policy_of(name)).lighter(125);
    case TimelineView::kEncodeLane:
      return QColor(44, 160, 44);
    case TimelineView::kGpuLane:
      // Attention kernels stand out; GEMM/GEMV and the rest are quieter; copies are green; whole
      // graph launches pink (the GPU timeline's colour for them).
      if (span.category == "graph") return QColor(232, 128, 196);
      if (span.category != "kernel") return QColor(80, 180, 120);
      if (name.contains(QStringLiteral("decode_kernel")) || name.contains(QStringLiteral("prefill_kernel")) ||
          name.contains(QStringLiteral("combine")))
        return QColor(214, 39, 40);
      if (name.contains(QStringLiteral("kv_write")) || name.contains(QStringLiteral("materialize")))
        return QColor(148, 103, 189);
      if (name.contains(QStringLiteral("gemv")) || name.contains(QStringLiteral("gemm")) ||
          name.contains(QStringLiteral("xmma")) || name.contains(QStringLiteral("cutlass")))
        return QColor(31, 119, 180);
      return QColor(160, 160, 160);
    default:
      return name.startsWith(QStringLiteral("prefill")) ? QColor(255, 127, 14)
                                                        : QColor(120, 150, 200);
  }
}

// A tick step of 1, 2 or 5 times a power of ten that puts ticks about `target_px` apart.
double nice_step(double pixels_per_ms, double target_px) {
  const double raw = target_px / std::max(pixels_per_ms, 1e-9);
  const double power = std::pow(10.0, std::floor(std::log10(raw)));
  for (double m : {1.0, 2.0, 5.0, 10.0})
    if (m * power >= raw) return m * power;
  return 10.0 * power;
}

QString format_ms(double ms) {
  if (ms == 0.0) return QStringLiteral("0");
  if (ms >= 1000.0) return QStringLiteral("%1 s").arg(ms / 1000.0, 0, 'g', 4);
  if (ms >= 1.0) return QStringLiteral("%1 ms").arg(ms, 0, 'f', ms >= 100.0 ? 0 : 2);
  return QStringLiteral("%1 µs").arg(ms * 1000.0, 0, 'f', 0);
}

}  // namespace

TimelineView::TimelineView(QWidget* parent) : QAbstractScrollArea(parent) {
  // Lanes scroll under the fixed time axis when the dock is shorter than they are.
  setVerticalScrollBarPolicy(Qt::ScrollBarAsNeeded);
  setHorizontalScrollBarPolicy(Qt::ScrollBarAsNeeded);
  viewport()->setMouseTracking(true);
  viewport()->setBackgroundRole(QPalette::Base);
  setToolTip(tr("Host time of each request: requests, segment encodes, prefill and decode "
                "steps; with --trace-gpu on CUDA also every GPU kernel, copy and CUDA graph launch. "
                "Ctrl+wheel zooms, the wheel scrolls the lanes, hover a bar for its duration."));
  viewport()->setToolTip(QString());
}

TimelineView::Lane TimelineView::laneOf(const RecordedSpan& span) {
  if (span.category == "request") return kRequestLane;
  if (span.category == "encode") return kEncodeLane;
  if (span.category == "kernel" || span.category == "graph" || span.category == "memcpy" || span.category == "memset")
    return kGpuLane;
  return kDecodeLane;
}

QSize TimelineView::sizeHint() const { return {360, contentHeight() + 14}; }

int TimelineView::contentHeight() const {
  return kMargin + kAxisHeight + laneCount() * (kLaneHeight + kLaneGap) - kLaneGap + kMargin;
}

void TimelineView::setRecording(const SessionRecording& recording) {
  // The NVTX ranges repeat the host's prefill / decode spans: they stay in the report, not here.
  spans_.clear();
  for (const RecordedSpan& s : recording.spans)
    if (s.category != "range") spans_.push_back(s);
  has_gpu_ = std::any_of(spans_.begin(), spans_.end(), [](const RecordedSpan& s) { return laneOf(s) == kGpuLane; });
  updateGeometry();
  origin_ms_ = spans_.empty() ? 0.0 : spans_.front().start_ms;
  end_ms_ = origin_ms_;
  for (const RecordedSpan& s : spans_) {
    origin_ms_ = std::min(origin_ms_, s.start_ms);
    end_ms_ = std::max(end_ms_, s.start_ms + s.duration_ms);
  }
  updateScrollBar();
  viewport()->update();
}

void TimelineView::setZoom(double pixels_per_ms) {
  pixels_per_ms_ = std::max(0.0, pixels_per_ms);
  updateScrollBar();
  viewport()->update();
}

void TimelineView::scrollToTime(double ms) {
  horizontalScrollBar()->setValue(int(std::lround((ms - origin_ms_) * effectiveScale())));
  viewport()->update();
}

double TimelineView::effectiveScale() const {
  if (pixels_per_ms_ > 0.0) return pixels_per_ms_;
  const int width = std::max(1, viewport()->width() - kGutter - kMargin);
  const double range = end_ms_ - origin_ms_;
  return range > 0.0 ? double(width) / range : 1.0;
}

double TimelineView::timeToX(double ms) const {
  return kGutter + (ms - origin_ms_) * effectiveScale() - horizontalScrollBar()->value();
}

double TimelineView::xToTime(double x) const {
  return origin_ms_ + (x - kGutter + horizontalScrollBar()->value()) / effectiveScale();
}

int TimelineView::laneTop(int lane) const {
  return kMargin + kAxisHeight + lane * (kLaneHeight + kLaneGap) - verticalScrollBar()->value();
}

void TimelineView::updateScrollBar() {
  const int content = int(std::ceil((end_ms_ - origin_ms_) * effectiveScale()));
  const int visible = std::max(1, viewport()->width() - kGutter - kMargin);
  horizontalScrollBar()->setRange(0, std::max(0, content - visible));
  horizontalScrollBar()->setPageStep(visible);
  horizontalScrollBar()->setSingleStep(std::max(1, visible / 20));
  const int visible_height = std::max(1, viewport()->height());
  verticalScrollBar()->setRange(0, std::max(0, contentHeight() - visible_height));
  verticalScrollBar()->setPageStep(visible_height);
  verticalScrollBar()->setSingleStep(kLaneHeight + kLaneGap);
}

void TimelineView::resizeEvent(QResizeEvent* event) {
  QAbstractScrollArea::resizeEvent(event);
  updateScrollBar();
}

void TimelineView::wheelEvent(QWheelEvent* event) {
  if (!(event->modifiers() & Qt::ControlModifier) || end_ms_ <= 0.0) {
    QAbstractScrollArea::wheelEvent(event);
    return;
  }
  // Zoom around the time under the mouse so the bar being looked at stays put.
  const double x = event->position().x();
  const double anchor_ms = xToTime(x);
  const double factor = event->angleDelta().y() > 0 ? 1.25 : 0.8;
  const double fit = effectiveScale();
  setZoom(std::clamp(fit * factor, 1e-4, 1e5));
  horizontalScrollBar()->setValue(int((anchor_ms - origin_ms_) * effectiveScale() - (x - kGutter)));
  event->accept();
}

int TimelineView::spanAt(const QPoint& pos) const {
  int lane = -1;
  if (pos.y() < kMargin + kAxisHeight) return -1;  // the fixed axis covers what scrolled under it
  for (int l = 0; l < laneCount(); ++l)
    if (pos.y() >= laneTop(l) && pos.y() < laneTop(l) + kLaneHeight) lane = l;
  if (lane < 0 || pos.x() < kGutter) return -1;
  const double slack_ms = 2.0 / effectiveScale();  // thin bars are still easy to hover
  const double t = xToTime(pos.x());
  int best = -1;
  for (int i = 0; i < int(spans_.size()); ++i) {
    const RecordedSpan& s = spans_[size_t(i)];
    if (laneOf(s) != lane) continue;
    if (t >= s.start_ms - slack_ms && t <= s.start_ms + s.duration_ms + slack_ms) {
      // Prefer the span that really contains t over a neighbour within the slack.
      if (best < 0 || (t >= s.start_ms && t <= s.start_ms + s.duration_ms)) best = i;
    }
  }
  return best;
}

QString TimelineView::spanToolTip(int index) const {
  if (index < 0 || index >= int(spans_.size())) return {};
  const RecordedSpan& s = spans_[size_t(index)];
  QString where = laneOf(s) == kGpuLane ? tr("on the GPU (%1)").arg(QString::fromStdString(s.category))
                                        : tr("on the host");
  if (s.category == "graph") where += tr("<br>one CUDA graph launch recorded as a whole: its kernels are not itemised");
  return tr("<b>%1</b><br>duration: %2 %5<br>starts at %3 (request %4)")
      .arg(QString::fromStdString(s.name).toHtmlEscaped(), format_ms(s.duration_ms),
           format_ms(s.start_ms))
      .arg(s.request)
      .arg(where);
}

bool TimelineView::viewportEvent(QEvent* event) {
  if (event->type() == QEvent::ToolTip) {
    auto* help = static_cast<QHelpEvent*>(event);
    const int index = spanAt(help->pos());
    if (index >= 0)
      QToolTip::showText(help->globalPos(), spanToolTip(index), viewport());
    else
      QToolTip::hideText();
    return true;
  }
  return QAbstractScrollArea::viewportEvent(event);
}

void TimelineView::paintEvent(QPaintEvent* event) {
  QPainter p(viewport());
  const QRect area = event->rect();
  p.fillRect(area, palette().base());
  const QColor text = palette().color(QPalette::Text);
  const QColor grid = palette().color(QPalette::Mid);
  const int width = viewport()->width();

  if (spans_.empty()) {
    p.setPen(palette().color(QPalette::PlaceholderText));
    p.drawText(viewport()->rect(), Qt::AlignCenter,
               tr("Run a prompt: each request's encodes, prefill and decode steps appear here."));
    last_painted_bars_ = 0;
    return;
  }

  // Time axis: ticks about 90 px apart, fixed at the top; the lanes scroll under it.
  const double scale = effectiveScale();
  const double step = nice_step(scale, 90.0);
  // Tick labels count from the first span, the start of the recorded work.
  const double first = std::floor((xToTime(kGutter) - origin_ms_) / step) * step;
  const int axis_bottom = kMargin + kAxisHeight;
  const int axis_y = axis_bottom - 4;
  const int bottom = std::min(viewport()->height(), laneTop(laneCount() - 1) + kLaneHeight);
  std::vector<std::pair<int, double>> ticks;
  for (double t = std::max(0.0, first); timeToX(origin_ms_ + t) <= width; t += step) {
    const int x = int(std::lround(timeToX(origin_ms_ + t)));
    if (x >= kGutter) ticks.push_back({x, t});
  }
  p.setPen(grid);
  for (const auto& [x, t] : ticks) p.drawLine(x, axis_y, x, bottom);

  // Bars: only those that intersect the repainted part of the viewport are drawn.
  int painted = 0;
  const QFontMetrics metrics(font());
  p.save();
  p.setClipRect(QRect(kGutter, axis_bottom, width - kGutter, viewport()->height() - axis_bottom) & area);
  for (const RecordedSpan& s : spans_) {
    const double x0 = timeToX(s.start_ms);
    const double x1 = timeToX(s.start_ms + s.duration_ms);
    const int top = laneTop(laneOf(s));
    const QRectF bar(x0, top, std::max(1.0, x1 - x0), kLaneHeight);
    if (!bar.intersects(QRectF(area)) || x1 < kGutter || top + kLaneHeight <= axis_bottom) continue;
    const QColor color = span_color(s);
    p.fillRect(bar, color);
    if (s.category == "graph") p.fillRect(bar, QBrush(color.darker(135), Qt::BDiagPattern));
    if (bar.width() >= 4.0) {
      p.setPen(color.darker(140));
      p.drawRect(bar.adjusted(0, 0, -1, -1));
    }
    const QString label = QString::fromStdString(s.name);
    if (bar.width() > 40.0) {
      p.setPen(Qt::black);
      const QRectF inner = bar.adjusted(4, 0, -4, 0) & QRectF(kGutter + 2, 0, width, height());
      p.drawText(inner, Qt::AlignVCenter | Qt::AlignLeft,
                 metrics.elidedText(label, Qt::ElideRight, int(inner.width())));
    }
    ++painted;
  }
  p.restore();
  last_painted_bars_ = painted;

  // The axis over whatever scrolled under it.
  p.fillRect(QRect(kGutter, 0, width - kGutter, axis_bottom), palette().base());
  for (const auto& [x, t] : ticks) {
    p.setPen(grid);
    p.drawLine(x, axis_y, x, axis_bottom);
    p.setPen(text);
    p.drawText(x + 3, kMargin + 12, format_ms(t));
  }

  // Lane labels in the fixed gutter.
  p.fillRect(QRect(0, 0, kGutter, viewport()->height()), palette().window());
  p.setPen(text);
  p.save();
  p.setClipRect(QRect(0, axis_bottom, kGutter, viewport()->height() - axis_bottom));
  const QString names[kLaneCount] = {tr("requests"), tr("segment encodes"),
                                     tr("prefill + decode"), tr("GPU kernels")};
  for (int l = 0; l < laneCount(); ++l)
    p.drawText(QRect(6, laneTop(l), kGutter - 10, kLaneHeight), Qt::AlignVCenter | Qt::AlignLeft,
               names[l]);
  p.restore();
  p.setPen(grid);
  p.drawLine(kGutter - 1, 0, kGutter - 1, viewport()->height());
}

}  // namespace lazyscope::workbench

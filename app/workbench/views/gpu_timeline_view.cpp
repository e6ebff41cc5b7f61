#include "app/workbench/views/gpu_timeline_view.h"

#include <QHelpEvent>
#include <QKeyEvent>
#include <QMouseEvent>
#include <QPaintEvent>
#include <QPainter>
#include <QScrollBar>
#include <QToolTip>
#include <QWheelEvent>
#include <algorithm>
#include <cmath>

namespace lazyscope::workbench {
namespace {

constexpr double kMaxContentPx = 1e9;  // the scroll bars count pixels in an int
constexpr int kMaxLinks = 64;

// A tick step of 1, 2 or 5 times a power of ten about `target_px` apart.
double nice_step_ns(double ns_per_px, double target_px) {
  const double raw = std::max(1.0, target_px * ns_per_px);
  const double power = std::pow(10.0, std::floor(std::log10(raw)));
  for (double m : {1.0, 2.0, 5.0, 10.0})
    if (m * power >= raw) return m * power;
  return 10.0 * power;
}

// A tick label in the unit of its time, with as many decimals as the step needs ("264.2 ms").
QString tick_label(double t_ns, double step_ns) {
  if (t_ns == 0.0) return QStringLiteral("0");
  const struct { double scale; const char* unit; } units[] = {{1e9, "s"}, {1e6, "ms"}, {1e3, "µs"}, {1.0, "ns"}};
  for (const auto& u : units) {
    if (std::fabs(t_ns) >= u.scale || u.scale == 1.0) {
      const int decimals = std::max(0, int(std::ceil(-std::log10(step_ns / u.scale) - 1e-9)));
      return QStringLiteral("%1 %2").arg(t_ns / u.scale, 0, 'f', decimals).arg(QString::fromUtf8(u.unit));
    }
  }
  return {};
}

QColor label_color(const std::string& label, TimelineItemKind kind) {
  const QString name = QString::fromStdString(label);
  switch (kind) {
    case TimelineItemKind::Memcpy: return QColor(80, 180, 120);
    case TimelineItemKind::Memset: return QColor(120, 200, 160);
    // A whole graph launch: a hue no kernel colour uses (kernels: red, blue, purple, 40..180).
    case TimelineItemKind::Graph: return QColor(232, 128, 196);
    case TimelineItemKind::Runtime:
    case TimelineItemKind::Driver:
      return name.contains(QStringLiteral("Launch")) ? QColor(230, 150, 60) : QColor(200, 190, 120);
    case TimelineItemKind::Nvtx: {
      if (name.startsWith(QStringLiteral("request"))) return QColor(150, 170, 220);
      if (name.startsWith(QStringLiteral("decode"))) return QColor(120, 150, 200);
      if (name.startsWith(QStringLiteral("prefill"))) return QColor(255, 160, 70);
      if (name.contains(QStringLiteral("encode"))) return QColor(110, 190, 110);
      if (name.contains(QStringLiteral("materialize"))) return QColor(190, 140, 220);
      return QColor(170, 170, 190);
    }
    case TimelineItemKind::Kernel: break;
  }
  if (name.contains(QStringLiteral("decode_kernel")) || name.contains(QStringLiteral("prefill_kernel")) ||
      name.contains(QStringLiteral("combine")) || name.contains(QStringLiteral("attention")))
    return QColor(214, 39, 40);
  if (name.contains(QStringLiteral("kv_write")) || name.contains(QStringLiteral("materialize")))
    return QColor(148, 103, 189);
  if (name.contains(QStringLiteral("gemv")) || name.contains(QStringLiteral("gemm")) ||
      name.contains(QStringLiteral("xmma")) || name.contains(QStringLiteral("cutlass")) ||
      name.contains(QStringLiteral("sm90")))
    return QColor(31, 119, 180);
  // Any other kernel: a stable colour from its name, kept away from the reds and blues above.
  const uint h = qHash(name);
  return QColor::fromHsv(int(40 + h % 140), 110 + int(h / 140 % 60), 200);
}

}  // namespace

GpuTimelineView::GpuTimelineView(QWidget* parent)
    : QAbstractScrollArea(parent), data_(std::make_unique<GpuTimelineData>()) {
  setObjectName(QStringLiteral("gpu_timeline"));
  setHorizontalScrollBarPolicy(Qt::ScrollBarAlwaysOn);
  setVerticalScrollBarPolicy(Qt::ScrollBarAsNeeded);
  setFocusPolicy(Qt::StrongFocus);
  viewport()->setMouseTracking(true);
  viewport()->setBackgroundRole(QPalette::Base);
  setToolTip(tr("Every NVTX range, CUDA call and GPU kernel of the session: one row per host thread's "
                "NVTX depth and CUDA calls, one per GPU stream (hatched pink bars: CUDA graph launches "
                "recorded as a whole). Ctrl+wheel or +/− zooms, drag or the arrow keys pan, Home fits; "
                "Shift+drag selects a range for the kernel statistics. Hover a kernel or graph launch "
                "to see the call that launched it."));
  viewport()->setToolTip(QString());
}

QSize GpuTimelineView::sizeHint() const { return {800, kAxisHeight + 8 * kRowHeight + 20}; }
QSize GpuTimelineView::minimumSizeHint() const { return {kGutter + 120, kAxisHeight + 2 * kRowHeight + 20}; }

void GpuTimelineView::setRecording(const SessionRecording& recording) {
  data_ = std::make_unique<GpuTimelineData>(recording);
  label_colors_.assign(data_->labels().size(), QColor());
  // A label's colour follows the kind of its first item.
  for (const TimelineRow& row : data_->rows())
    for (const TimelineItem& it : row.items)
      if (!label_colors_[it.label].isValid()) label_colors_[it.label] = label_color(data_->labels()[it.label], it.kind);
  hovered_ = {};
  links_.clear();
  sel_from_ = sel_to_ = 0;
  if (fitted_ || data_->empty()) fitToWidth();
  else clampView();
  updateScrollBars();
  viewport()->update();
  Q_EMIT viewChanged();
}

int GpuTimelineView::plotWidth() const { return std::max(1, viewport()->width() - kGutter); }

double GpuTimelineView::minNsPerPixel() const {
  const double span = double(std::max<int64_t>(1, data_->endNs() - data_->beginNs()));
  return std::max(0.05, span / kMaxContentPx);
}

double GpuTimelineView::maxNsPerPixel() const {
  const double span = double(std::max<int64_t>(1, data_->endNs() - data_->beginNs()));
  return std::max(minNsPerPixel(), span / double(plotWidth()) * 1.05);
}

void GpuTimelineView::fitToWidth() {
  fitted_ = true;
  ns_per_px_ = maxNsPerPixel();
  view_start_ns_ = double(data_->beginNs());
  updateScrollBars();
  viewport()->update();
  Q_EMIT viewChanged();
}

void GpuTimelineView::setNsPerPixel(double ns_per_px) {
  fitted_ = false;
  ns_per_px_ = std::clamp(ns_per_px, minNsPerPixel(), maxNsPerPixel());
  clampView();
  updateScrollBars();
  viewport()->update();
  Q_EMIT viewChanged();
}

void GpuTimelineView::scrollToNs(double t_ns) {
  view_start_ns_ = t_ns;
  clampView();
  updateScrollBars();
  viewport()->update();
  Q_EMIT viewChanged();
}

void GpuTimelineView::scrollToRow(int row) { verticalScrollBar()->setValue(row * kRowHeight); }

void GpuTimelineView::setLevelOfDetail(bool on) {
  lod_ = on;
  viewport()->update();
}

void GpuTimelineView::clampView() {
  const double visible = double(plotWidth()) * ns_per_px_;
  const double latest = std::max(double(data_->beginNs()), double(data_->endNs()) - visible);
  view_start_ns_ = std::clamp(view_start_ns_, double(data_->beginNs()), latest);
}

void GpuTimelineView::updateScrollBars() {
  syncing_scrollbar_ = true;
  const double span = double(data_->endNs() - data_->beginNs());
  const int content = int(std::min(kMaxContentPx, std::ceil(span / ns_per_px_)));
  QScrollBar* h = horizontalScrollBar();
  h->setRange(0, std::max(0, content - plotWidth()));
  h->setPageStep(plotWidth());
  h->setSingleStep(std::max(1, plotWidth() / 20));
  h->setValue(int(std::lround((view_start_ns_ - double(data_->beginNs())) / ns_per_px_)));
  QScrollBar* v = verticalScrollBar();
  const int rows_px = rowCount() * kRowHeight;
  const int visible_rows_px = std::max(1, viewport()->height() - kAxisHeight);
  v->setRange(0, std::max(0, rows_px - visible_rows_px));
  v->setPageStep(visible_rows_px);
  v->setSingleStep(kRowHeight);
  syncing_scrollbar_ = false;
}

void GpuTimelineView::scrollContentsBy(int, int) {
  if (!syncing_scrollbar_) {
    view_start_ns_ = double(data_->beginNs()) + double(horizontalScrollBar()->value()) * ns_per_px_;
    Q_EMIT viewChanged();
  }
  viewport()->update();
}

void GpuTimelineView::resizeEvent(QResizeEvent* event) {
  QAbstractScrollArea::resizeEvent(event);
  if (fitted_) ns_per_px_ = maxNsPerPixel();
  ns_per_px_ = std::clamp(ns_per_px_, minNsPerPixel(), maxNsPerPixel());
  clampView();
  updateScrollBars();
}

int GpuTimelineView::rowTop(int row) const { return kAxisHeight + row * kRowHeight - verticalScrollBar()->value(); }

int GpuTimelineView::rowAt(int y) const {
  if (y < kAxisHeight) return -1;
  const int row = (y - kAxisHeight + verticalScrollBar()->value()) / kRowHeight;
  return row >= 0 && row < rowCount() ? row : -1;
}

double GpuTimelineView::xOfNs(double t) const { return kGutter + (t - view_start_ns_) / ns_per_px_; }
double GpuTimelineView::nsOfX(double x) const { return view_start_ns_ + (x - kGutter) * ns_per_px_; }

TimelineRef GpuTimelineView::itemAt(const QPoint& pos) const {
  if (pos.x() < kGutter) return {};
  return data_->itemAt(rowAt(pos.y()), nsOfX(pos.x()), 2.0 * ns_per_px_);
}

QString GpuTimelineView::itemToolTip(const TimelineRef& ref) const {
  if (!ref.valid()) return {};
  const QStringList lines = QString::fromStdString(data_->describe(ref)).split('\n');
  QString html = QStringLiteral("<b>%1</b>").arg(lines.front().toHtmlEscaped());
  for (int i = 1; i < lines.size(); ++i) html += QStringLiteral("<br>") + lines[i].toHtmlEscaped();
  return html;
}

void GpuTimelineView::setHovered(const TimelineRef& ref) {
  if (ref == hovered_) return;
  hovered_ = ref;
  links_.clear();
  if (ref.valid()) {
    links_ = data_->correlated(ref);
    if (links_.size() > size_t(kMaxLinks)) links_.resize(kMaxLinks);
  }
  viewport()->update();
}

void GpuTimelineView::setSelection(int64_t from_ns, int64_t to_ns) {
  if (to_ns < from_ns) std::swap(from_ns, to_ns);
  if (from_ns == sel_from_ && to_ns == sel_to_) return;
  sel_from_ = from_ns;
  sel_to_ = to_ns;
  viewport()->update();
  Q_EMIT selectionChanged(sel_from_, sel_to_);
}

void GpuTimelineView::zoomAt(double factor, double x) {
  const double anchor = nsOfX(x);
  fitted_ = false;
  ns_per_px_ = std::clamp(ns_per_px_ / factor, minNsPerPixel(), maxNsPerPixel());
  view_start_ns_ = anchor - (x - kGutter) * ns_per_px_;
  clampView();
  updateScrollBars();
  viewport()->update();
  Q_EMIT viewChanged();
}

void GpuTimelineView::wheelEvent(QWheelEvent* event) {
  const int delta = event->angleDelta().y() != 0 ? event->angleDelta().y() : event->angleDelta().x();
  if (event->modifiers() & Qt::ControlModifier) {
    zoomAt(delta > 0 ? 1.25 : 0.8, std::max<double>(kGutter, event->position().x()));
  } else if (event->modifiers() & Qt::ShiftModifier) {
    scrollToNs(view_start_ns_ - double(delta) / 120.0 * 0.1 * plotWidth() * ns_per_px_);
  } else {
    QAbstractScrollArea::wheelEvent(event);
    return;
  }
  event->accept();
}

void GpuTimelineView::mousePressEvent(QMouseEvent* event) {
  if (event->button() != Qt::LeftButton) return QAbstractScrollArea::mousePressEvent(event);
  setFocus(Qt::MouseFocusReason);
  drag_origin_ = event->position().toPoint();
  drag_start_v_ = verticalScrollBar()->value();
  drag_ = (event->modifiers() & Qt::ShiftModifier) ? Drag::Select : Drag::Pan;
  // Pan: the view's start when the drag began; select: the time under the press.
  drag_start_ns_ = drag_ == Drag::Pan ? view_start_ns_ : nsOfX(std::max<double>(kGutter, event->position().x()));
  if (drag_ == Drag::Pan) viewport()->setCursor(Qt::ClosedHandCursor);
  event->accept();
}

void GpuTimelineView::mouseMoveEvent(QMouseEvent* event) {
  const QPoint pos = event->position().toPoint();
  if (drag_ == Drag::Pan) {
    const QPoint d = pos - drag_origin_;
    view_start_ns_ = drag_start_ns_ - double(d.x()) * ns_per_px_;
    clampView();
    verticalScrollBar()->setValue(drag_start_v_ - d.y());
    updateScrollBars();
    viewport()->update();
    Q_EMIT viewChanged();
  } else if (drag_ == Drag::Select) {
    const double t = nsOfX(std::max<double>(kGutter, pos.x()));
    setSelection(int64_t(std::llround(std::min(t, drag_start_ns_))), int64_t(std::llround(std::max(t, drag_start_ns_))));
  } else {
    setHovered(itemAt(pos));
  }
  event->accept();
}

void GpuTimelineView::mouseReleaseEvent(QMouseEvent* event) {
  drag_ = Drag::None;
  viewport()->unsetCursor();
  event->accept();
}

void GpuTimelineView::mouseDoubleClickEvent(QMouseEvent* event) {
  setSelection(0, 0);
  event->accept();
}

void GpuTimelineView::keyPressEvent(QKeyEvent* event) {
  const double center = kGutter + plotWidth() / 2.0;
  switch (event->key()) {
    case Qt::Key_Plus:
    case Qt::Key_Equal: zoomAt(1.5, center); break;
    case Qt::Key_Minus: zoomAt(1.0 / 1.5, center); break;
    case Qt::Key_Left: scrollToNs(view_start_ns_ - 0.1 * plotWidth() * ns_per_px_); break;
    case Qt::Key_Right: scrollToNs(view_start_ns_ + 0.1 * plotWidth() * ns_per_px_); break;
    case Qt::Key_Up: verticalScrollBar()->setValue(verticalScrollBar()->value() - kRowHeight); break;
    case Qt::Key_Down: verticalScrollBar()->setValue(verticalScrollBar()->value() + kRowHeight); break;
    case Qt::Key_PageUp: verticalScrollBar()->triggerAction(QAbstractSlider::SliderPageStepSub); break;
    case Qt::Key_PageDown: verticalScrollBar()->triggerAction(QAbstractSlider::SliderPageStepAdd); break;
    case Qt::Key_Home:
    case Qt::Key_0: fitToWidth(); break;
    default: QAbstractScrollArea::keyPressEvent(event); return;
  }
  event->accept();
}

bool GpuTimelineView::viewportEvent(QEvent* event) {
  if (event->type() == QEvent::ToolTip) {
    auto* help = static_cast<QHelpEvent*>(event);
    const TimelineRef ref = itemAt(help->pos());
    if (ref.valid()) {
      QString tip = itemToolTip(ref);
      // A merged pixel stands for more than the item under the mouse.
      const double t = nsOfX(help->pos().x());
      const size_t n = data_->countStarting(ref.row, t - ns_per_px_, t + ns_per_px_);
      if (n > 1) tip += tr("<br><i>%1 records within this pixel; zoom in to tell them apart</i>").arg(n);
      QToolTip::showText(help->globalPos(), tip, viewport());
    } else {
      QToolTip::hideText();
    }
    return true;
  }
  if (event->type() == QEvent::Leave) setHovered({});
  return QAbstractScrollArea::viewportEvent(event);
}

QColor GpuTimelineView::colorOf(uint32_t label) const {
  return label < label_colors_.size() && label_colors_[label].isValid() ? label_colors_[label] : QColor(160, 160, 160);
}

void GpuTimelineView::paintEvent(QPaintEvent* event) {
  QPainter p(viewport());
  const QRect area = event->rect();
  p.fillRect(area, palette().base());
  const QColor text = palette().color(QPalette::Text);
  const QColor grid = palette().color(QPalette::Mid);
  const int width = viewport()->width();
  const int height = viewport()->height();
  last_bars_ = 0;
  last_rows_ = 0;
  if (data_->empty()) {
    p.setPen(palette().color(QPalette::PlaceholderText));
    p.drawText(viewport()->rect(), Qt::AlignCenter | Qt::TextWordWrap,
               tr("No ranges or kernels yet. Run a prompt: the engine's NVTX ranges appear here; with "
                  "--trace-gpu on the CUDA backend also every CUDA call and kernel, one row per stream."));
    return;
  }
  const QFontMetrics metrics(font());
  const int first_row = std::max(0, verticalScrollBar()->value() / kRowHeight);
  const int last_row = std::min(rowCount() - 1, (verticalScrollBar()->value() + height - kAxisHeight) / kRowHeight);

  // Row backgrounds, alternating, and the items.
  p.save();
  p.setClipRect(QRect(kGutter, kAxisHeight, width - kGutter, height - kAxisHeight) & area);
  const QColor alternate = palette().color(QPalette::AlternateBase);
  const QColor graph_color = label_color(std::string(), TimelineItemKind::Graph);
  for (int r = first_row; r <= last_row; ++r) {
    const int top = rowTop(r);
    if (r % 2 == 1) p.fillRect(QRect(kGutter, top, width - kGutter, kRowHeight), alternate);
    const TimelineRow& row = data_->rows()[size_t(r)];
    const double bar_top = top + 2, bar_h = kRowHeight - 4;
    last_bars_ += data_->visit(r, view_start_ns_, ns_per_px_, plotWidth(), lod_, [&](const TimelineBar& b) {
      const TimelineItem& it = row.items[b.first];
      const double x0 = kGutter + std::max(-2.0, b.x0);
      const double x1 = kGutter + std::min(double(plotWidth()) + 2.0, std::max(b.x0 + 1.0, b.x1));
      const QColor color = colorOf(it.label);
      const QRectF rect(x0, bar_top, x1 - x0, bar_h);
      if (b.count > 1) {
        // A merged column: several records in this pixel; pink when a graph launch is among them.
        const bool graph = data_->graphItemsIn(r, b.first, b.count) > 0;
        p.fillRect(rect, graph ? graph_color.darker(110) : color.darker(115));
        return;
      }
      p.fillRect(rect, color);
      if (it.kind == TimelineItemKind::Graph) {
        // Hatched and framed: one record standing for a whole graph of kernels.
        p.fillRect(rect, QBrush(color.darker(135), Qt::BDiagPattern));
        p.setPen(color.darker(170));
        if (rect.width() >= 2.0) p.drawRect(rect.adjusted(0, 0, -1, -1));
      } else if (rect.width() >= 5.0) {
        p.setPen(color.darker(150));
        p.drawRect(rect.adjusted(0, 0, -1, -1));
      }
      if (rect.width() > 36.0) {
        p.setPen(Qt::black);
        const QRectF inner = rect.adjusted(3, 0, -3, 0) & QRectF(kGutter + 2, 0, width, height);
        p.drawText(inner, Qt::AlignVCenter | Qt::AlignLeft,
                   metrics.elidedText(QString::fromStdString(data_->labels()[it.label]), Qt::ElideRight,
                                      int(inner.width())));
      }
    });
    ++last_rows_;
  }

  // The selected range, shaded, and the hovered item with its launch links.
  if (hasSelection()) {
    const double x0 = xOfNs(double(sel_from_)), x1 = xOfNs(double(sel_to_));
    QColor shade = palette().color(QPalette::Highlight);
    shade.setAlpha(50);
    p.fillRect(QRectF(x0, kAxisHeight, std::max(1.0, x1 - x0), height - kAxisHeight), shade);
  }
  if (hovered_.valid()) {
    const TimelineItem& h = data_->item(hovered_);
    const auto center_y = [this](int row) { return rowTop(row) + kRowHeight / 2.0; };
    p.setPen(QPen(palette().color(QPalette::Highlight), 2));
    p.setBrush(Qt::NoBrush);
    const double hx0 = xOfNs(double(h.start_ns)), hx1 = std::max(hx0 + 2.0, xOfNs(double(h.end_ns)));
    p.drawRect(QRectF(hx0, rowTop(hovered_.row) + 1, hx1 - hx0, kRowHeight - 2));
    p.setRenderHint(QPainter::Antialiasing, true);
    for (const TimelineRef& l : links_) {
      const TimelineItem& o = data_->item(l);
      // From the start of the call to the start of the kernel, whichever is which.
      const QPointF a(hx0, center_y(hovered_.row)), b(xOfNs(double(o.start_ns)), center_y(l.row));
      p.drawLine(a, b);
      p.drawEllipse(b, 3.0, 3.0);
    }
    p.setRenderHint(QPainter::Antialiasing, false);
  }
  p.restore();

  // The time axis, counted from the session's first record.
  p.fillRect(QRect(0, 0, width, kAxisHeight), palette().window());
  const double step = nice_step_ns(ns_per_px_, 100.0);
  const double origin = double(data_->beginNs());
  double t = std::floor((view_start_ns_ - origin) / step) * step;
  for (; xOfNs(origin + t) <= width; t += step) {
    const int x = int(std::lround(xOfNs(origin + t)));
    if (x < kGutter) continue;
    p.setPen(grid);
    p.drawLine(x, kAxisHeight - 6, x, kAxisHeight);
    p.setPen(text);
    p.drawText(x + 3, kAxisHeight - 8, tick_label(t, step));
  }
  p.setPen(grid);
  p.drawLine(0, kAxisHeight - 1, width, kAxisHeight - 1);
  p.setPen(text);
  p.drawText(QRect(6, 0, kGutter - 10, kAxisHeight), Qt::AlignVCenter | Qt::AlignLeft,
             tr("%1 / pixel").arg(QString::fromStdString(format_duration_ns(ns_per_px_))));

  // Row titles in the fixed gutter.
  p.fillRect(QRect(0, kAxisHeight, kGutter, height - kAxisHeight), palette().window());
  p.setClipRect(QRect(0, kAxisHeight, kGutter, height - kAxisHeight));
  for (int r = first_row; r <= last_row; ++r) {
    const TimelineRow& row = data_->rows()[size_t(r)];
    const int indent = row.kind == TimelineRowKind::Nvtx ? 6 + 10 * row.depth : 6;
    QFont f = font();
    f.setBold(row.kind == TimelineRowKind::Stream);
    p.setFont(f);
    p.drawText(QRect(indent, rowTop(r), kGutter - indent - 4, kRowHeight), Qt::AlignVCenter | Qt::AlignLeft,
               metrics.elidedText(QString::fromStdString(row.title), Qt::ElideRight, kGutter - indent - 6));
  }
  p.setFont(font());
  p.setClipping(false);
  p.setPen(grid);
  p.drawLine(kGutter - 1, kAxisHeight, kGutter - 1, height);
}

}  // namespace lazyscope::workbench

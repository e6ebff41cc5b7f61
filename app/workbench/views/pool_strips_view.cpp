#include "app/workbench/views/pool_strips_view.h"

#include <QImage>
#include <QPaintEvent>
#include <QPainter>
#include <algorithm>
#include <cmath>

namespace lazyscope::workbench {
namespace {

constexpr int kLabelWidth = 150;
constexpr int kStripRows = 30;  // pixel rows a strip's cells may use

QRgb cell_color(PoolCell c) {
  switch (c) {
    case PoolCell::Free: return qRgb(236, 236, 236);
    case PoolCell::Prefix: return qRgb(120, 120, 120);
    case PoolCell::DocumentCached: return qRgb(158, 202, 225);
    case PoolCell::DocumentHeld: return qRgb(33, 113, 181);
    case PoolCell::Copy: return qRgb(230, 85, 13);
    case PoolCell::Query: return qRgb(116, 196, 118);
    case PoolCell::Evicted: return qRgb(203, 24, 29);
  }
  return qRgb(0, 0, 0);
}

// When several blocks share a pixel, the one that tells most wins.
int priority(PoolCell c) {
  switch (c) {
    case PoolCell::Evicted: return 6;
    case PoolCell::Copy: return 5;
    case PoolCell::DocumentHeld: return 4;
    case PoolCell::Query: return 3;
    case PoolCell::Prefix: return 2;
    case PoolCell::DocumentCached: return 1;
    case PoolCell::Free: return 0;
  }
  return 0;
}

}  // namespace

PoolStripsView::PoolStripsView(QWidget* parent) : QWidget(parent) {
  setSizePolicy(QSizePolicy::Expanding, QSizePolicy::Preferred);
}

void PoolStripsView::clear() {
  order_.clear();
  strips_.clear();
  updateGeometry();
  update();
}

void PoolStripsView::addRun(int run, const QString& label, int num_blocks) {
  if (!strips_.contains(run)) order_.push_back(run);
  Strip s;
  s.label = label;
  s.num_blocks = num_blocks;
  s.snapshot.cells.fill(quint8(PoolCell::Free), num_blocks);
  strips_.insert(run, s);
  updateGeometry();
  update();
}

void PoolStripsView::setSnapshot(int run, const PoolMapSnapshot& snapshot) {
  auto it = strips_.find(run);
  if (it == strips_.end()) return;
  it->snapshot = snapshot;
  const int i = int(order_.indexOf(run));
  if (isVisible()) update(QRect(0, i * stripHeight(), width(), stripHeight()));
}

int PoolStripsView::count(int run, PoolCell cell) const {
  const auto it = strips_.find(run);
  if (it == strips_.end()) return 0;
  return int(std::count(it->snapshot.cells.begin(), it->snapshot.cells.end(), quint8(cell)));
}

int PoolStripsView::stripHeight() const { return kStripRows + 18; }

QSize PoolStripsView::sizeHint() const { return {900, std::max(1, int(order_.size())) * stripHeight() + 22}; }

void PoolStripsView::paintEvent(QPaintEvent* event) {
  QPainter p(this);
  p.fillRect(event->rect(), palette().base());
  painted_strips_ = 0;
  const int h = stripHeight();
  const int map_width = std::max(40, width() - kLabelWidth - 8);
  for (int i = 0; i < order_.size(); ++i) {
    const QRect row(0, i * h, width(), h);
    if (!row.intersects(event->rect())) continue;
    const Strip& s = strips_[order_[i]];
    ++painted_strips_;
    const PoolMapSnapshot& snap = s.snapshot;
    const int n = std::max(1, int(snap.cells.size()));
    // Cells of `cell` px, as large as fit; several blocks per pixel for very large pools.
    const int cell = std::clamp(int(std::floor(std::sqrt(double(map_width) * kStripRows / n))), 1, 10);
    const int cols = std::max(1, map_width / cell);
    const int per_pixel = std::max(1, int(std::ceil(double(n) / (double(cols) * (kStripRows / cell)))));
    const int pixels = (n + per_pixel - 1) / per_pixel;
    const int rows = (pixels + cols - 1) / cols;
    QImage img(cols, std::max(1, rows), QImage::Format_RGB32);
    img.fill(palette().base().color());
    for (int px = 0; px < pixels; ++px) {
      PoolCell best = PoolCell::Free;
      for (int b = px * per_pixel; b < std::min(n, (px + 1) * per_pixel) && b < snap.cells.size(); ++b) {
        const PoolCell c = PoolCell(snap.cells[b]);
        if (priority(c) > priority(best)) best = c;
      }
      img.setPixel(px % cols, px / cols, cell_color(best));
    }
    p.setPen(palette().text().color());
    QFont f = font();
    f.setBold(true);
    p.setFont(f);
    p.drawText(QRect(4, row.top() + 2, kLabelWidth - 8, 16), Qt::AlignLeft | Qt::AlignVCenter, s.label);
    p.setFont(font());
    p.drawText(QRect(4, row.top() + 18, kLabelWidth - 8, h - 20), Qt::AlignLeft | Qt::AlignTop | Qt::TextWordWrap,
               tr("%1 blocks · %2 evicted").arg(s.num_blocks).arg(snap.evictions));
    p.drawImage(QRect(kLabelWidth, row.top() + 4, cols * cell, rows * cell), img);
    p.setPen(QColor(200, 200, 200));
    p.drawLine(0, row.bottom(), width(), row.bottom());
  }
  // Legend under the strips.
  const int ly = int(order_.size()) * h + 4;
  if (QRect(0, ly, width(), 18).intersects(event->rect())) {
    int x = 4;
    const std::pair<PoolCell, QString> legend[] = {
        {PoolCell::DocumentCached, tr("cached document (or positional copy)")}, {PoolCell::DocumentHeld, tr("document in use (shared)")},
        {PoolCell::Copy, tr("copy held by its request")},  {PoolCell::Query, tr("query / generated")},
        {PoolCell::Prefix, tr("prefix")},                   {PoolCell::Evicted, tr("evicted just now")},
        {PoolCell::Free, tr("free")}};
    for (const auto& [c, text] : legend) {
      p.fillRect(QRect(x, ly + 4, 10, 10), QColor(cell_color(c)));
      if (c == PoolCell::Free) {  // near the window's colour in a light palette: outline it
        p.setPen(palette().color(QPalette::Mid));
        p.drawRect(QRect(x, ly + 4, 9, 9));
      }
      p.setPen(palette().text().color());
      const int tw = fontMetrics().horizontalAdvance(text);
      p.drawText(QRect(x + 14, ly, tw + 4, 18), Qt::AlignLeft | Qt::AlignVCenter, text);
      x += 14 + tw + 16;
    }
  }
}

}  // namespace lazyscope::workbench

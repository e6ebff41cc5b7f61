#include "app/workbench/models/block_map_model.h"

#include <QGuiApplication>
#include <QPalette>
#include <QSet>
#include <algorithm>

namespace lazyscope::workbench {
namespace {

// Distinct, print-friendly hues (documents get them in order of first appearance).
// Distinct hues that avoid the flash colours (green, orange, magenta, red) so rings stay legible.
const QColor kPalette[] = {
    QColor(31, 119, 180), QColor(148, 103, 189), QColor(23, 190, 207),  QColor(140, 86, 75),
    QColor(188, 189, 34), QColor(0, 128, 128),   QColor(57, 59, 121),   QColor(189, 158, 57),
    QColor(132, 60, 57),  QColor(99, 110, 150),  QColor(156, 158, 222), QColor(82, 130, 60),
};

QColor blend(const QColor& a, const QColor& b, double t) {
  return QColor::fromRgbF(float(a.redF() * (1 - t) + b.redF() * t),
                          float(a.greenF() * (1 - t) + b.greenF() * t),
                          float(a.blueF() * (1 - t) + b.blueF() * t));
}

}  // namespace

BlockMapModel::BlockMapModel(QObject* parent) : QObject(parent) { clock_.start(); }

void BlockMapModel::resize(int blocks, int block_size, qint64 bytes_per_block) {
  cells_.assign(size_t(std::max(0, blocks)), BlockCell{});
  block_size_ = block_size;
  bytes_per_block_ = bytes_per_block;
  segments_.clear();
  Q_EMIT changed();
}

QColor BlockMapModel::colorForLabel(const QString& label, SegmentKind kind) {
  if (kind == SegmentKind::Prefix) return QColor(96, 112, 140);
  if (kind == SegmentKind::Query) return QColor(110, 110, 110);
  auto it = label_colors_.find(label);
  if (it != label_colors_.end()) return *it;
  const QColor color = kPalette[size_t(next_color_++) % std::size(kPalette)];
  label_colors_.insert(label, color);
  return color;
}

void BlockMapModel::setPolicy(const QString& policy) {
  if (policy == policy_) return;
  policy_ = policy;
  for (BlockCell& cell : cells_) cell = BlockCell{};
  segments_.clear();
  Q_EMIT changed();
}

bool BlockMapModel::shows(const std::string& policy) const {
  // Events without a policy come from tests and single-pool tools: show them.
  return policy.empty() || QString::fromStdString(policy) == policy_;
}

void BlockMapModel::applySegment(const SegmentEvent& event) {
  if (!shows(event.policy)) return;
  SegmentEntry entry;
  entry.id = event.segment;
  entry.kind = event.kind;
  entry.label = QString::fromStdString(event.label);
  entry.source_segment = event.source_segment;
  entry.tokens = event.tokens;
  entry.shift = event.shift;
  entry.color = colorForLabel(entry.label, entry.kind);
  segments_.insert(entry.id, entry);
  for (int32_t block : event.blocks) {
    if (block < 0 || size_t(block) >= cells_.size()) continue;
    BlockCell& cell = cells_[size_t(block)];
    cell.segment = event.segment;
    cell.shift = event.shift;
  }
  Q_EMIT changed();
}

void BlockMapModel::touch(int block, BlockAction action) {
  BlockCell& cell = cells_[size_t(block)];
  const qint64 now = clock_.elapsed();
  // A release right after a hit or copy would hide the interesting event: keep that one.
  if (action == BlockAction::Released && cell.flash_at_ms >= 0 &&
      now - cell.flash_at_ms <= kFlashMs)
    return;
  cell.flash = action;
  cell.flash_at_ms = now;
}

void BlockMapModel::applyBlock(const BlockEvent& event) {
  countInTally(event.action);
  if (!shows(event.policy) || event.block < 0 || size_t(event.block) >= cells_.size()) return;
  BlockCell& cell = cells_[size_t(event.block)];
  switch (event.action) {
    case BlockAction::Allocated:
    case BlockAction::Copied:
    case BlockAction::Hit:
      cell.segment = event.segment;
      cell.refcount = event.refcount;
      cell.shift = event.shift;
      break;
    case BlockAction::Released:
      cell.refcount = event.refcount;
      break;
    case BlockAction::Evicted: {
      const bool was_copy = isCopy(event.block) || cell.ghost_copy;
      cell = BlockCell{};
      cell.ghost_copy = was_copy;
      break;
    }
  }
  if (event.action == BlockAction::Allocated || event.action == BlockAction::Copied)
    cell.ghost_copy = false;
  if (event.action == BlockAction::Copied)
    cell.ghost_copy = true;  // stays marked after the copy is freed
  touch(event.block, event.action);
  Q_EMIT changed();
}

void BlockMapModel::countInTally(BlockAction action) {
  if (tallies_.empty()) return;
  RunTally& tally = tallies_.back();
  switch (action) {
    case BlockAction::Allocated:
      ++tally.allocated;
      break;
    case BlockAction::Hit:
      ++tally.hit;
      break;
    case BlockAction::Copied:
      ++tally.copied;
      break;
    case BlockAction::Evicted:
      ++tally.evicted;
      break;
    case BlockAction::Released:
      ++tally.released;
      break;
  }
  Q_EMIT changed();
}

void BlockMapModel::applyPool(const PoolEvent& event) {
  if (!shows(event.policy)) return;
  if (event.blocks_total != blockCount() && event.blocks_total > 0) {
    cells_.resize(size_t(event.blocks_total));
    Q_EMIT changed();
  }
}

void BlockMapModel::applySnapshot(const PoolSnapshot& snapshot) {
  if (!shows(to_string(snapshot.policy))) return;
  block_size_ = snapshot.block_size;
  bytes_per_block_ = qint64(snapshot.bytes_per_block);
  // Keep flash state: a snapshot arrives right after the events it summarises.
  cells_.resize(snapshot.blocks.size());
  QHash<qint64, SegmentEntry> segments;
  for (const CachedSegment& info : snapshot.segments) {
    SegmentEntry entry;
    entry.id = info.id;
    entry.kind = info.kind;
    entry.label = QString::fromStdString(info.label);
    entry.source_segment = info.source_segment;
    entry.tokens = int(info.tokens.size());
    entry.shift = info.shift;
    entry.color = colorForLabel(entry.label, entry.kind);
    segments.insert(entry.id, entry);
  }
  segments_ = segments;
  for (size_t i = 0; i < snapshot.blocks.size(); ++i) {
    const BlockState& info = snapshot.blocks[i];
    BlockCell& cell = cells_[i];
    if (info.segment >= 0 &&
        !(segments_.contains(info.segment) && segments_[info.segment].kind == SegmentKind::Copy))
      cell.ghost_copy = false;
    cell.segment = info.segment;
    cell.refcount = info.refcount;
    cell.shift = info.shift;
    cell.valid = info.valid;
    cell.last_use = info.last_use;
  }
  Q_EMIT changed();
}

void BlockMapModel::beginRun(int run_index, const QString& key) {
  if (run_index != tally_run_) {
    tallies_.clear();
    for (BlockCell& cell : cells_) cell.ghost_copy = false;  // copies of the previous plan
  }
  tally_run_ = run_index;
  RunTally tally;
  tally.key = key;
  tallies_.push_back(tally);
  Q_EMIT changed();
}

const SegmentEntry* BlockMapModel::segment(qint64 id) const {
  auto it = segments_.constFind(id);
  return it == segments_.constEnd() ? nullptr : &*it;
}

int BlockMapModel::usedBlocks() const {
  return int(std::count_if(cells_.begin(), cells_.end(),
                           [](const BlockCell& c) { return c.segment >= 0; }));
}

int BlockMapModel::inUseBlocks() const {
  return int(std::count_if(cells_.begin(), cells_.end(),
                           [](const BlockCell& c) { return c.segment >= 0 && c.refcount > 0; }));
}

bool BlockMapModel::isCopy(int block) const {
  const BlockCell& c = cell(block);
  const SegmentEntry* seg = segment(c.segment);
  return seg && seg->kind == SegmentKind::Copy;
}

QColor BlockMapModel::freeColor() {
  const QPalette palette = QGuiApplication::palette();
  const bool dark =
      palette.color(QPalette::Window).lightness() < palette.color(QPalette::WindowText).lightness();
  return dark ? QColor(58, 61, 67) : QColor(236, 238, 242);
}

QColor BlockMapModel::cellColor(int block) const {
  const BlockCell& c = cell(block);
  if (c.segment < 0) return freeColor();
  const SegmentEntry* seg = segment(c.segment);
  const QColor base = seg ? seg->color : QColor(160, 160, 160);
  if (c.refcount <= 0) return blend(base, Qt::white, 0.4);  // cached, nobody holds it
  if (c.refcount == 1) return base;
  return base.darker(100 + 15 * std::min(c.refcount - 1, 4));  // shared by several requests
}

QColor BlockMapModel::flashColorFor(BlockAction action) {
  switch (action) {
    case BlockAction::Hit:
      return QColor(0, 200, 70);
    case BlockAction::Allocated:
      return QColor(255, 160, 0);
    case BlockAction::Copied:
      return QColor(230, 0, 180);
    case BlockAction::Evicted:
      return QColor(220, 0, 0);
    case BlockAction::Released:
      return QColor(120, 120, 120);
  }
  return {};
}

QColor BlockMapModel::flashColor(int block, qint64 now_ms) const {
  const BlockCell& c = cell(block);
  if (c.flash_at_ms < 0 || now_ms - c.flash_at_ms > kFlashMs || c.flash == BlockAction::Released)
    return {};
  QColor color = flashColorFor(c.flash);
  color.setAlphaF(float(1.0 - double(now_ms - c.flash_at_ms) / kFlashMs));
  return color;
}

bool BlockMapModel::anyFlashing(qint64 now_ms) const {
  return std::any_of(cells_.begin(), cells_.end(), [&](const BlockCell& c) {
    return c.flash_at_ms >= 0 && now_ms - c.flash_at_ms <= kFlashMs;
  });
}

QString BlockMapModel::tooltip(int block) const {
  if (block < 0 || block >= blockCount()) return {};
  const BlockCell& c = cell(block);
  if (c.segment < 0) return QStringLiteral("<b>block %1</b><br>free").arg(block);
  const SegmentEntry* seg = segment(c.segment);
  QString html = QStringLiteral("<b>block %1</b><br>segment #%2").arg(block).arg(c.segment);
  if (seg)
    html += QStringLiteral(" · %1 <b>%2</b> (%3 tokens)")
                .arg(QString::fromUtf8(to_string(seg->kind)), seg->label.toHtmlEscaped())
                .arg(seg->tokens);
  html += QStringLiteral("<br>shift δ = %1 · refcount %2%3<br>valid %4 / %5 slots · last use %6")
              .arg(c.shift)
              .arg(c.refcount)
              .arg(c.refcount == 0 ? QStringLiteral(" (cached, unreferenced)") : QString())
              .arg(c.valid)
              .arg(block_size_)
              .arg(c.last_use);
  if (c.flash_at_ms >= 0)
    html += QStringLiteral("<br>last event: %1").arg(QString::fromUtf8(to_string(c.flash)));
  return html;
}

std::vector<std::pair<QString, QColor>> BlockMapModel::legend() const {
  std::vector<std::pair<QString, QColor>> out;
  QSet<QString> seen;
  // Walk blocks in order so the legend follows the map's layout.
  for (const BlockCell& c : cells_) {
    if (c.segment < 0) continue;
    const SegmentEntry* seg = segment(c.segment);
    if (!seg) continue;
    QString label = seg->label;
    if (seg->kind == SegmentKind::Prefix) label = QStringLiteral("prefix (system)");
    if (seg->kind == SegmentKind::Query) label = QStringLiteral("query + generated");
    if (seen.contains(label)) continue;
    seen.insert(label);
    out.emplace_back(label, seg->color);
  }
  return out;
}

}  // namespace lazyscope::workbench

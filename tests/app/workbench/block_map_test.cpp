// The KV block map driven by scripted engine events: colours, shading, flashes, tallies, painting.
#include <gtest/gtest.h>

#include <QApplication>
#include <QHelpEvent>
#include <QImage>
#include <QScrollArea>
#include <QToolTip>

#include "app/workbench/models/block_map_model.h"
#include "app/workbench/views/block_map_view.h"
#include "workbench_test_support.h"

namespace lazyscope::workbench {
namespace {

SegmentEvent segment(int64_t id, SegmentKind kind, const std::string& label,
                     std::vector<int32_t> blocks, int shift = 0) {
  SegmentEvent e;
  e.segment = id;
  e.kind = kind;
  e.label = label;
  e.blocks = std::move(blocks);
  e.tokens = int(e.blocks.size()) * 16;
  e.shift = shift;
  return e;
}

BlockEvent block(BlockAction action, int32_t id, int64_t seg, int refcount, int shift = 0) {
  BlockEvent e;
  e.action = action;
  e.block = id;
  e.segment = seg;
  e.refcount = refcount;
  e.shift = shift;
  return e;
}

// Two documents on blocks 0-1 and 2, a free block 3, then a materialized copy of A on 4-5.
void script(BlockMapModel& m) {
  m.resize(8, 16, 4096);
  m.beginRun(1, "materialized");
  m.applySegment(segment(10, SegmentKind::Document, "Harbor of Velm", {0, 1}));
  m.applyBlock(block(BlockAction::Allocated, 0, 10, 1));
  m.applyBlock(block(BlockAction::Allocated, 1, 10, 1));
  m.applySegment(segment(11, SegmentKind::Document, "Lantern Guild", {2}));
  m.applyBlock(block(BlockAction::Allocated, 2, 11, 1));
  SegmentEvent copy = segment(12, SegmentKind::Copy, "Harbor of Velm", {4, 5}, 16);
  copy.source_segment = 10;  // the engine names what a copy copies: no label parsing
  m.applySegment(copy);
  m.applyBlock(block(BlockAction::Copied, 4, 12, 1, 16));
  m.applyBlock(block(BlockAction::Copied, 5, 12, 1, 16));
}

TEST(BlockMapModel, ColoursBlocksBySegment) {
  BlockMapModel m;
  script(m);
  EXPECT_EQ(m.cellColor(0), m.cellColor(1));
  EXPECT_NE(m.cellColor(0), m.cellColor(2));
  EXPECT_EQ(m.cellColor(3), BlockMapModel::freeColor());
  // A materialized copy keeps its document's colour and is marked as a copy (hatched).
  EXPECT_EQ(m.cellColor(4), m.cellColor(0));
  EXPECT_TRUE(m.isCopy(4));
  EXPECT_FALSE(m.isCopy(0));
  EXPECT_EQ(m.usedBlocks(), 5);
  EXPECT_EQ(m.inUseBlocks(), 5);
}

TEST(BlockMapModel, ShadesByRefcountAndFreesOnEviction) {
  BlockMapModel m;
  script(m);
  const QColor held = m.cellColor(2);
  m.applyBlock(block(BlockAction::Released, 2, 11, 0));
  const QColor cached = m.cellColor(2);
  EXPECT_GT(cached.lightness(), held.lightness());  // unreferenced: paler
  m.applyBlock(block(BlockAction::Hit, 2, 11, 2));
  EXPECT_LT(m.cellColor(2).lightness(), held.lightness());  // shared by two: darker
  m.applyBlock(block(BlockAction::Evicted, 2, 11, 0));
  EXPECT_EQ(m.cellColor(2), BlockMapModel::freeColor());
  EXPECT_EQ(m.cell(2).segment, -1);
}

TEST(BlockMapModel, FlashesWithTheEventColourThenFades) {
  BlockMapModel m;
  script(m);
  m.applyBlock(block(BlockAction::Hit, 0, 10, 2));
  const qint64 now = m.nowMs();
  const QColor flash = m.flashColor(0, now);
  ASSERT_TRUE(flash.isValid());
  EXPECT_EQ(flash.rgb(), BlockMapModel::flashColorFor(BlockAction::Hit).rgb());
  EXPECT_EQ(m.flashColor(4, now).rgb(), BlockMapModel::flashColorFor(BlockAction::Copied).rgb());
  EXPECT_FALSE(m.flashColor(3, now).isValid());  // never touched
  EXPECT_FALSE(m.flashColor(0, now + BlockMapModel::kFlashMs + 1).isValid());
}

TEST(BlockMapModel, TalliesWhatEachRunDid) {
  BlockMapModel m;
  script(m);
  m.beginRun(1, "lazy");
  m.applyBlock(block(BlockAction::Hit, 0, 10, 1));
  m.applyBlock(block(BlockAction::Hit, 1, 10, 1));
  ASSERT_EQ(m.tallies().size(), 2u);
  EXPECT_EQ(m.tallies()[0].allocated, 3);
  EXPECT_EQ(m.tallies()[0].copied, 2);
  EXPECT_EQ(m.tallies()[1].hit, 2);
  EXPECT_EQ(m.tallies()[1].copied, 0);
  m.beginRun(2, "lazy");  // a new plan starts a new tally
  EXPECT_EQ(m.tallies().size(), 1u);
}

TEST(BlockMapModel, ShowsOnePolicysPoolAndTalliesEvery) {
  BlockMapModel m;
  m.resize(8, 16, 4096);
  m.beginRun(1, "lazy");
  SegmentEvent lazy_doc = segment(10, SegmentKind::Document, "Harbor of Velm", {0});
  lazy_doc.policy = "lazy";
  m.applySegment(lazy_doc);
  BlockEvent lazy_block = block(BlockAction::Allocated, 0, 10, 1);
  lazy_block.policy = "lazy";
  m.applyBlock(lazy_block);
  m.beginRun(1, "materialized");
  SegmentEvent mat_doc = segment(1099511627777, SegmentKind::Document, "Lantern Guild", {0});
  mat_doc.policy = "materialized";
  m.applySegment(mat_doc);
  BlockEvent mat_block = block(BlockAction::Allocated, 0, 1099511627777, 1);
  mat_block.policy = "materialized";
  m.applyBlock(mat_block);
  // Block 0 of the lazy pool is not block 0 of the materialized pool.
  EXPECT_EQ(m.policy(), "lazy");
  EXPECT_EQ(m.cell(0).segment, 10);
  ASSERT_EQ(m.tallies().size(), 2u);
  EXPECT_EQ(m.tallies()[1].allocated, 1);
  PoolSnapshot other;
  other.policy = Policy::Materialized;
  other.blocks.resize(8);
  m.applySnapshot(other);  // another pool's snapshot leaves this one alone
  EXPECT_EQ(m.cell(0).segment, 10);
  m.setPolicy("materialized");
  EXPECT_EQ(m.usedBlocks(), 0);  // forgotten until the materialized snapshot arrives
  other.blocks[0].segment = 1099511627777;
  m.applySnapshot(other);
  EXPECT_EQ(m.cell(0).segment, 1099511627777);
}

TEST(BlockMapModel, TooltipNamesSegmentShiftRefcount) {
  BlockMapModel m;
  script(m);
  const QString tip = m.tooltip(4);
  EXPECT_TRUE(tip.contains("block 4"));
  EXPECT_TRUE(tip.contains("Harbor of Velm"));
  EXPECT_TRUE(tip.contains("shift δ = 16"));
  EXPECT_TRUE(tip.contains("refcount 1"));
  EXPECT_TRUE(m.tooltip(3).contains("free"));
}

TEST(BlockMapModel, SnapshotReplacesState) {
  BlockMapModel m;
  script(m);
  PoolSnapshot snap;
  snap.block_size = 16;
  snap.bytes_per_block = 4096;
  snap.blocks.resize(8);
  snap.blocks[7].segment = 20;
  snap.blocks[7].refcount = 0;
  snap.blocks[7].last_use = 42;
  CachedSegment info;
  info.id = 20;
  info.label = "Lantern Guild";
  info.blocks = {7};
  snap.segments.push_back(info);
  m.applySnapshot(snap);
  EXPECT_EQ(m.usedBlocks(), 1);
  EXPECT_EQ(m.cell(0).segment, -1);
  EXPECT_TRUE(m.tooltip(7).contains("last use 42"));
  ASSERT_EQ(m.legend().size(), 1u);
  EXPECT_EQ(m.legend()[0].first, "Lantern Guild");
}

TEST(BlockMapView, PaintsTheModelColoursAndOnlyVisibleRows) {
  BlockMapView view;
  view.resize(400, 300);
  view.show();
  BlockMapModel* m = view.model();
  script(*m);
  m->resize(20000, 16, 4096);  // far more blocks than fit: the grid scrolls
  m->applySegment(segment(10, SegmentKind::Document, "Harbor of Velm", {0, 1}));
  m->applyBlock(block(BlockAction::Allocated, 0, 10, 1));
  QApplication::processEvents();
  BlockGrid* grid = view.grid();
  const QImage image = grid->grab(QRect(0, 0, grid->width(), 60)).toImage();
  // Sample the centre of block 0 and of block 5 (free); the flash ring sits at the edge.
  const QPoint c0 = grid->cellRect(0).center();
  const QPoint c5 = grid->cellRect(5).center();
  EXPECT_EQ(QColor(image.pixel(c0)).rgb(), m->cellColor(0).rgb());
  EXPECT_EQ(QColor(image.pixel(c5)).rgb(), BlockMapModel::freeColor().rgb());
  EXPECT_EQ(grid->blockAt(c0), 0);
  // Only the exposed rows were painted, not all 20000 cells.
  EXPECT_LT(grid->paintedCells(), 20000 / 4);
  EXPECT_GT(grid->paintedCells(), 0);
}

}  // namespace
}  // namespace lazyscope::workbench

namespace lazyscope::workbench {
namespace {

TEST(BlockMapView, HoverShowsTheBlockTooltip) {
  BlockMapView view;
  view.resize(400, 300);
  view.show();
  script(*view.model());
  QApplication::processEvents();
  BlockGrid* grid = view.grid();
  const QPoint at = grid->cellRect(4).center();
  QHelpEvent hover(QEvent::ToolTip, at, grid->mapToGlobal(at));
  QApplication::sendEvent(grid, &hover);
  ASSERT_TRUE(QToolTip::isVisible());
  EXPECT_TRUE(QToolTip::text().contains("block 4"));
  EXPECT_TRUE(QToolTip::text().contains("Harbor of Velm"));
  for (QWidget* w : QApplication::topLevelWidgets())
    if (w->inherits("QTipLabel")) w->grab().save(testing::artifact_path("block_map_tooltip.png"));
  QToolTip::hideText();
}

}  // namespace
}  // namespace lazyscope::workbench

#pragma once
// One policy's KV pool as the GUI sees it (every policy has its own): one cell per block, fed by
// that policy's engine events and corrected by its pool snapshots after every run. Colours are
// decided here so tests can check them. The run tallies count every policy's events.
#include <QColor>
#include <QElapsedTimer>
#include <QHash>
#include <QObject>
#include <QString>
#include <vector>

#include "engine/events/events.h"
#include "engine/runtime/session.h"

namespace lazyscope::workbench {

struct BlockCell {
  qint64 segment = -1;  // -1: free
  int refcount = 0;
  int shift = 0;
  int valid = 0;
  quint64 last_use = 0;
  // The last event that touched the block, and when (ms on the model's clock), for flashing.
  BlockAction flash = BlockAction::Released;
  qint64 flash_at_ms = -1;
  // Held a materialized copy during the current plan (drawn as a hatched outline once freed).
  bool ghost_copy = false;
};

struct SegmentEntry {
  qint64 id = 0;
  SegmentKind kind = SegmentKind::Document;
  QString label;              // the document title, copies included
  qint64 source_segment = -1;  // a copy: the segment it copies
  int tokens = 0;
  int shift = 0;
  QColor color;
};

// What one policy run did to the pool: the numbers behind the teaching moment.
struct RunTally {
  QString key;
  int allocated = 0;
  int hit = 0;
  int copied = 0;
  int evicted = 0;
  int released = 0;
};

class BlockMapModel : public QObject {
  Q_OBJECT
 public:
  static constexpr int kFlashMs = 900;
  explicit BlockMapModel(QObject* parent = nullptr);

  void resize(int blocks, int block_size, qint64 bytes_per_block);
  // The policy whose pool the cells show ("lazy", "materialized", ...): forgets the cells; the
  // caller asks the engine for a snapshot of that pool.
  void setPolicy(const QString& policy);
  const QString& policy() const { return policy_; }
  void applySnapshot(const PoolSnapshot& snapshot);
  void applySegment(const SegmentEvent& event);
  void applyBlock(const BlockEvent& event);
  void applyPool(const PoolEvent& event);
  // Starts a new tally line; the plan's first run also clears the previous plan's lines.
  void beginRun(int run_index, const QString& key);

  int blockCount() const { return int(cells_.size()); }
  int blockSize() const { return block_size_; }
  qint64 bytesPerBlock() const { return bytes_per_block_; }
  const BlockCell& cell(int block) const { return cells_.at(size_t(block)); }
  const SegmentEntry* segment(qint64 id) const;
  int usedBlocks() const;   // owned by some segment
  int inUseBlocks() const;  // refcount > 0
  // Fill colour of a block without the flash: segment colour, paler when unreferenced.
  QColor cellColor(int block) const;
  // The flash overlay colour at `now_ms`, invalid when the block is not flashing.
  QColor flashColor(int block, qint64 now_ms) const;
  bool isCopy(int block) const;
  QString tooltip(int block) const;
  // Documents currently holding blocks, by colour, for the legend (copies folded into their
  // source).
  std::vector<std::pair<QString, QColor>> legend() const;
  const std::vector<RunTally>& tallies() const { return tallies_; }
  qint64 nowMs() const { return clock_.elapsed(); }
  bool anyFlashing(qint64 now_ms) const;

  // A free block: a pale grey on a light palette, a dark one on a dark palette.
  static QColor freeColor();
  static QColor flashColorFor(BlockAction action);
  QColor colorForLabel(const QString& label, SegmentKind kind);

 Q_SIGNALS:
  void changed();

 private:
  void touch(int block, BlockAction action);
  bool shows(const std::string& policy) const;
  void countInTally(BlockAction action);

  QString policy_ = QStringLiteral("lazy");
  int block_size_ = 16;
  qint64 bytes_per_block_ = 0;
  std::vector<BlockCell> cells_;
  QHash<qint64, SegmentEntry> segments_;
  QHash<QString, QColor> label_colors_;  // a document keeps its colour across runs
  int next_color_ = 0;
  std::vector<RunTally> tallies_;
  int tally_run_ = -1;
  QElapsedTimer clock_;
};

}  // namespace lazyscope::workbench

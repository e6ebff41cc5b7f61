#pragma once
// A saved session report opened for reading (File ▸ Open Session Report), beside the live
// session and without a model or a GPU: one tab per panel, replayed from the report's tables —
// runs, equivalence of the generated tokens, the KV block map with a scrubber over the recorded
// block events, cache statistics, the host timeline, the GPU timeline with kernel statistics, and
// the lazy-overhead probe. A report with lazy and materialized requests compares their kernels.
#include <QWidget>

#include "profiler/session_recorder.h"

class QLabel;
class QSlider;
class QTabWidget;
class QTableWidget;

namespace lazyscope::workbench {

class BlockMapView;
class CacheStatsView;
class GpuTimelineView;
class KernelStatsView;
class OverheadPanel;
class TimelineView;

class ReportWindow : public QWidget {
  Q_OBJECT
 public:
  ReportWindow(const SessionRecording& recording, const QString& path, QWidget* parent = nullptr);

  TimelineView* timeline() { return timeline_; }
  GpuTimelineView* gpuTimeline() { return gpu_timeline_; }
  KernelStatsView* kernelStats() { return kernel_stats_; }
  CacheStatsView* stats() { return stats_; }
  BlockMapView* blockMap() { return block_map_; }
  QSlider* scrubber() { return scrubber_; }
  QTableWidget* runsTable() { return runs_; }
  QTableWidget* tokensTable() { return tokens_; }
  OverheadPanel* overhead() { return overhead_; }
  QTabWidget* tabs() { return tabs_; }
  QString summary() const;
  const SessionRecording& recording() const { return recording_; }
  QString equivalenceSummary() const;
  // Replays the block map's policy up to block event `index` (of that policy's events).
  void scrubTo(int index);
  int blockEventCount() const { return int(policy_blocks_.size()); }
  // Opens the lazy vs materialized comparison of this report's kernels (null if it lacks either).
  QWidget* compareLazyMaterialized();

 private:
  void buildRuns();
  void buildEquivalence();
  void buildBlockMap();
  void selectBlockPolicy(const QString& policy);

  SessionRecording recording_;
  QString path_;
  QTabWidget* tabs_ = nullptr;
  QLabel* summary_ = nullptr;
  QTableWidget* runs_ = nullptr;
  QTableWidget* tokens_ = nullptr;
  QLabel* equivalence_summary_ = nullptr;
  BlockMapView* block_map_ = nullptr;
  QSlider* scrubber_ = nullptr;
  QLabel* scrub_label_ = nullptr;
  std::vector<RecordedBlockEvent> policy_blocks_;  // the shown policy's block events, with the policy
  std::vector<RecordedSegment> policy_segments_;
  TimelineView* timeline_ = nullptr;
  GpuTimelineView* gpu_timeline_ = nullptr;
  KernelStatsView* kernel_stats_ = nullptr;
  CacheStatsView* stats_ = nullptr;
  OverheadPanel* overhead_ = nullptr;
};

}  // namespace lazyscope::workbench

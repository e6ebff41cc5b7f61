#pragma once
// The rows of the GPU timeline, built once from a session recording: for every host thread its
// NVTX ranges (one row per nesting depth) and its CUDA runtime and driver calls, then one row per
// GPU stream with its kernels, copies, memsets and CUDA graph launches (a graph launch recorded as a
// whole, CUPTI_ACTIVITY_KIND_GRAPH_TRACE, is one item: the decode steps without kernel detail). Each row keeps its items sorted by start with a
// running maximum of their ends, so a view finds the first visible item by binary search and
// walks only what is on screen. visit() is the level-of-detail walk: an item at least a pixel
// wide is one bar; items narrower than a pixel are merged into one bar per pixel column (with
// their count), so a frame costs O(rows × pixels × log n) whatever the number of records.
// Plain C++ (no Qt): the view, its tests and bench/gui/timeline_frames share it.
#include <cstdint>
#include <functional>
#include <string>
#include <unordered_map>
#include <vector>

#include "profiler/session_recorder.h"

namespace lazyscope::workbench {

enum class TimelineItemKind : uint8_t { Nvtx, Runtime, Driver, Kernel, Memcpy, Memset, Graph };

struct TimelineItem {
  int64_t start_ns = 0;  // the recording's clock (ns since the recorder started)
  int64_t end_ns = 0;
  uint32_t label = 0;   // index into GpuTimelineData::labels()
  uint32_t source = 0;  // index into the recording's vector of this kind
  TimelineItemKind kind = TimelineItemKind::Kernel;
};

enum class TimelineRowKind : uint8_t { Nvtx, Runtime, Driver, Stream };

struct TimelineRow {
  TimelineRowKind kind = TimelineRowKind::Stream;
  std::string title;     // "NVTX · thread 4711", "CUDA runtime · thread 4711", "GPU 0 · stream 7"
  uint32_t thread = 0;   // host rows: the OS thread id
  uint32_t device = 0;   // stream rows
  uint32_t stream = 0;
  int depth = 0;         // NVTX rows: nesting level
  std::vector<TimelineItem> items;  // by start
  std::vector<int64_t> max_end;     // max_end[i] = the largest end of items[0..i]
  // graphs_before[i] = how many of items[0..i) are graph launches (size n + 1); empty: none are.
  std::vector<uint32_t> graphs_before;
};

// One bar of a frame: items [first, first + count) of a row drawn from x0 to x1 (pixels from the
// left edge of the drawn time range). count > 1: narrow items merged into one pixel column.
struct TimelineBar {
  double x0 = 0.0, x1 = 0.0;
  uint32_t first = 0;
  uint32_t count = 1;
};

// An item of a row.
struct TimelineRef {
  int row = -1;
  int item = -1;
  bool valid() const { return row >= 0 && item >= 0; }
  bool operator==(const TimelineRef& o) const { return row == o.row && item == o.item; }
};

class GpuTimelineData {
 public:
  GpuTimelineData() = default;
  explicit GpuTimelineData(const SessionRecording& recording) { build(recording); }
  void build(const SessionRecording& recording);

  const std::vector<TimelineRow>& rows() const { return rows_; }
  const std::vector<std::string>& labels() const { return labels_; }
  const SessionRecording& recording() const { return recording_; }
  int64_t beginNs() const { return begin_ns_; }  // the earliest item's start
  int64_t endNs() const { return end_ns_; }      // the latest item's end
  size_t itemCount() const { return item_count_; }
  bool empty() const { return item_count_ == 0; }

  // The level-of-detail walk of row `row` over [t0_ns, t0_ns + width_px * ns_per_px): calls `bar`
  // for each bar; with lod == false every item in the range is its own bar (the baseline).
  // Returns the number of bars.
  size_t visit(int row, double t0_ns, double ns_per_px, int width_px, bool lod,
               const std::function<void(const TimelineBar&)>& bar) const;
  // The item of `row` that contains t_ns, else the nearest within slack_ns; invalid if none.
  TimelineRef itemAt(int row, double t_ns, double slack_ns) const;
  // Items of `row` whose start lies in [t0, t1) (the count a merged pixel stands for).
  size_t countStarting(int row, double t0_ns, double t1_ns) const;
  // Graph launches among items [first, first + count) of `row` (a merged bar shows them), O(1).
  size_t graphItemsIn(int row, uint32_t first, uint32_t count) const;

  // The other side of a launch: for a kernel, copy, memset or graph launch the runtime/driver call
  // with its correlation id; for a call, the device items it launched (a graph launch replayed node
  // by node: many). Empty if none.
  std::vector<TimelineRef> correlated(const TimelineRef& ref) const;
  uint32_t correlationId(const TimelineRef& ref) const;
  const TimelineItem& item(const TimelineRef& ref) const { return rows_[size_t(ref.row)].items[size_t(ref.item)]; }
  // Plain-text description of an item (the view puts it into its tooltip).
  std::string describe(const TimelineRef& ref) const;
  // The NVTX ranges of `thread` that contain t_ns, outermost first (the step a launch belongs to).
  std::vector<TimelineRef> enclosingRanges(uint32_t thread, double t_ns) const;

 private:
  struct CorrelationEntry {
    uint32_t id = 0;
    int row = 0;
    int item = 0;
    bool operator<(const CorrelationEntry& o) const { return id < o.id; }
  };
  uint32_t intern(const std::string& label);
  // For the runtime/driver call that launched a device item: the NVTX ranges around it, the request
  // they belong to (0: none), and both in words ("request 2: request (lazy) › decode step 5").
  std::vector<TimelineRef> callRanges(const TimelineRef& call) const;
  int launchRequest(const TimelineRef& call) const;
  std::string launchContext(const TimelineRef& call) const;

  SessionRecording recording_;
  std::vector<TimelineRow> rows_;
  std::vector<std::string> labels_;
  std::unordered_map<std::string, uint32_t> label_ids_;
  std::vector<CorrelationEntry> api_by_correlation_, device_by_correlation_;
  int64_t begin_ns_ = 0, end_ns_ = 0;
  size_t item_count_ = 0;
};

// "12.3 µs", "4.56 ms", "850 ns", "1.23 s".
std::string format_duration_ns(double ns);
// A point in time with six significant digits, "264.951 ms" (positions on a long timeline).
std::string format_time_ns(double ns);

}  // namespace lazyscope::workbench

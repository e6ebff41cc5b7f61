#include "app/workbench/models/gpu_timeline_data.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <tuple>

#include "profiler/kernel_stats.h"

namespace lazyscope::workbench {
namespace {

const char* copy_kind_name(int kind) {
  switch (kind) {
    case 1: return "HtoD";
    case 2: return "DtoH";
    case 8: return "DtoD";
    case 10: return "PtoP";
    default: return "copy";
  }
}

std::string bytes_text(uint64_t bytes) {
  char buf[64];
  if (bytes >= (1u << 20))
    std::snprintf(buf, sizeof buf, "%.2f MiB", double(bytes) / double(1u << 20));
  else if (bytes >= 1024)
    std::snprintf(buf, sizeof buf, "%.1f KiB", double(bytes) / 1024.0);
  else
    std::snprintf(buf, sizeof buf, "%llu B", static_cast<unsigned long long>(bytes));
  return buf;
}

void finish_row(TimelineRow* row) {
  std::stable_sort(row->items.begin(), row->items.end(),
                   [](const TimelineItem& a, const TimelineItem& b) { return a.start_ns < b.start_ns; });
  row->max_end.resize(row->items.size());
  int64_t m = INT64_MIN;
  for (size_t i = 0; i < row->items.size(); ++i) row->max_end[i] = m = std::max(m, row->items[i].end_ns);
  row->graphs_before.clear();
  if (std::none_of(row->items.begin(), row->items.end(),
                   [](const TimelineItem& it) { return it.kind == TimelineItemKind::Graph; }))
    return;
  row->graphs_before.resize(row->items.size() + 1);
  uint32_t graphs = 0;
  for (size_t i = 0; i < row->items.size(); ++i) {
    row->graphs_before[i] = graphs;
    graphs += row->items[i].kind == TimelineItemKind::Graph ? 1 : 0;
  }
  row->graphs_before.back() = graphs;
}

// The first index >= from whose item starts at or after t. Galloping from `from`: the next pixel
// column's items are close by, so this touches a few neighbouring cache lines instead of a
// binary search's spread over the whole row.
size_t first_starting_at(const std::vector<TimelineItem>& items, size_t from, double t) {
  const size_t n = items.size();
  if (from >= n || double(items[from].start_ns) >= t) return from;
  size_t lo = from, step = 1;  // items[lo] starts before t
  size_t hi = from + step;
  while (hi < n && double(items[hi].start_ns) < t) {
    lo = hi;
    step *= 2;
    hi = lo + step;
  }
  hi = std::min(hi, n);
  return size_t(std::partition_point(items.begin() + std::ptrdiff_t(lo) + 1, items.begin() + std::ptrdiff_t(hi),
                                     [t](const TimelineItem& x) { return double(x.start_ns) < t; }) -
                items.begin());
}

}  // namespace

namespace {

// `significant` digits in the unit the magnitude calls for: "12.3 µs" (3), "264.951 ms" (6).
std::string format_ns(double ns, int significant) {
  char buf[64];
  const double a = std::fabs(ns);
  if (a >= 1e9)
    std::snprintf(buf, sizeof buf, "%.*g s", significant, ns / 1e9);
  else if (a >= 1e6)
    std::snprintf(buf, sizeof buf, "%.*g ms", significant, ns / 1e6);
  else if (a >= 1e3)
    std::snprintf(buf, sizeof buf, "%.*g µs", significant, ns / 1e3);
  else
    std::snprintf(buf, sizeof buf, "%.0f ns", ns);
  return buf;
}

}  // namespace

std::string format_duration_ns(double ns) { return format_ns(ns, 3); }
std::string format_time_ns(double ns) { return format_ns(ns, 6); }

uint32_t GpuTimelineData::intern(const std::string& label) {
  const auto [it, inserted] = label_ids_.emplace(label, uint32_t(labels_.size()));
  if (inserted) labels_.push_back(label);
  return it->second;
}

void GpuTimelineData::build(const SessionRecording& recording) {
  recording_ = recording;
  rows_.clear();
  labels_.clear();
  label_ids_.clear();
  api_by_correlation_.clear();
  device_by_correlation_.clear();
  item_count_ = 0;

  // Host rows, by thread: NVTX depth 0..n, then runtime, then driver calls.
  std::map<std::tuple<uint32_t, int, int>, size_t> host_rows;  // (thread, order, depth) -> row
  std::map<std::tuple<uint32_t, uint32_t>, size_t> stream_rows;
  auto host_row = [&](uint32_t thread, TimelineRowKind kind, int depth) -> TimelineRow& {
    const int order = kind == TimelineRowKind::Nvtx ? 0 : kind == TimelineRowKind::Runtime ? 1 : 2;
    const auto key = std::make_tuple(thread, order, depth);
    auto it = host_rows.find(key);
    if (it == host_rows.end()) {
      TimelineRow row;
      row.kind = kind;
      row.thread = thread;
      row.depth = depth;
      const std::string t = "thread " + std::to_string(thread);
      row.title = kind == TimelineRowKind::Nvtx ? (depth == 0 ? "NVTX · " + t : "NVTX · depth " + std::to_string(depth))
                  : kind == TimelineRowKind::Runtime ? "CUDA runtime · " + t
                                                     : "CUDA driver · " + t;
      it = host_rows.emplace(key, rows_.size()).first;
      rows_.push_back(std::move(row));
    }
    return rows_[it->second];
  };
  auto stream_row = [&](uint32_t device, uint32_t stream) -> TimelineRow& {
    const auto key = std::make_tuple(device, stream);
    auto it = stream_rows.find(key);
    if (it == stream_rows.end()) {
      TimelineRow row;
      row.kind = TimelineRowKind::Stream;
      row.device = device;
      row.stream = stream;
      row.title = "GPU " + std::to_string(device) + " · stream " + std::to_string(stream);
      it = stream_rows.emplace(key, rows_.size()).first;
      rows_.push_back(std::move(row));
    }
    return rows_[it->second];
  };

  // NVTX depth from the nesting itself, per thread: a report keeps start and end (nsys's columns),
  // not the depth, so a replayed report and the live session get the same rows.
  std::vector<int> nvtx_depth(recording.ranges.size(), 0);
  {
    std::vector<size_t> order(recording.ranges.size());
    for (size_t i = 0; i < order.size(); ++i) order[i] = i;
    std::sort(order.begin(), order.end(), [&](size_t a, size_t b) {
      const HostRange& x = recording.ranges[a].range;
      const HostRange& y = recording.ranges[b].range;
      return std::tie(x.thread_id, x.start_ns, y.end_ns) < std::tie(y.thread_id, y.start_ns, x.end_ns);
    });
    std::vector<int64_t> open;  // ends of the ranges enclosing the current one
    uint32_t thread = 0;
    for (size_t k = 0; k < order.size(); ++k) {
      const HostRange& r = recording.ranges[order[k]].range;
      if (k == 0 || r.thread_id != thread) open.clear();
      thread = r.thread_id;
      // Enclosing ranges are those still open that also outlast this one (push/pop ranges nest;
      // a range overlapping another's end, from some other tool, sits beside it instead).
      while (!open.empty() && (open.back() <= r.start_ns || open.back() < r.end_ns)) open.pop_back();
      nvtx_depth[order[k]] = int(open.size());
      open.push_back(std::max(r.start_ns, r.end_ns));
    }
  }
  for (size_t i = 0; i < recording.ranges.size(); ++i) {
    const HostRange& r = recording.ranges[i].range;
    host_row(r.thread_id, TimelineRowKind::Nvtx, nvtx_depth[i])
        .items.push_back({r.start_ns, std::max(r.start_ns, r.end_ns), intern(r.name), uint32_t(i), TimelineItemKind::Nvtx});
  }
  for (size_t i = 0; i < recording.api_calls.size(); ++i) {
    const ApiRecord& a = recording.api_calls[i];
    const TimelineRowKind kind = a.driver ? TimelineRowKind::Driver : TimelineRowKind::Runtime;
    host_row(a.thread_id, kind, 0)
        .items.push_back({a.start_ns, std::max(a.start_ns, a.end_ns), intern(a.name), uint32_t(i),
                          a.driver ? TimelineItemKind::Driver : TimelineItemKind::Runtime});
  }
  for (size_t i = 0; i < recording.kernels.size(); ++i) {
    const KernelRecord& k = recording.kernels[i];
    stream_row(k.device_id, k.stream_id)
        .items.push_back({k.start_ns, std::max(k.start_ns, k.end_ns), intern(kernel_stats_name(k)), uint32_t(i),
                          TimelineItemKind::Kernel});
  }
  for (size_t i = 0; i < recording.memcpys.size(); ++i) {
    const MemcpyRecord& m = recording.memcpys[i];
    stream_row(m.device_id, m.stream_id)
        .items.push_back({m.start_ns, std::max(m.start_ns, m.end_ns),
                          intern(std::string("memcpy ") + copy_kind_name(m.copy_kind)), uint32_t(i),
                          TimelineItemKind::Memcpy});
  }
  for (size_t i = 0; i < recording.memsets.size(); ++i) {
    const MemsetRecord& m = recording.memsets[i];
    stream_row(m.device_id, m.stream_id)
        .items.push_back({m.start_ns, std::max(m.start_ns, m.end_ns), intern("memset"), uint32_t(i),
                          TimelineItemKind::Memset});
  }
  for (size_t i = 0; i < recording.graphs.size(); ++i) {
    const GraphRecord& g = recording.graphs[i];
    stream_row(g.device_id, g.stream_id)
        .items.push_back({g.start_ns, std::max(g.start_ns, g.end_ns), intern(graph_stats_name(g)), uint32_t(i),
                          TimelineItemKind::Graph});
  }

  // Rows in a fixed order: host threads (by id: NVTX depths, runtime, driver), then streams.
  std::vector<TimelineRow> ordered;
  ordered.reserve(rows_.size());
  for (const auto& [key, index] : host_rows) ordered.push_back(std::move(rows_[index]));
  for (const auto& [key, index] : stream_rows) ordered.push_back(std::move(rows_[index]));
  rows_ = std::move(ordered);

  begin_ns_ = INT64_MAX;
  end_ns_ = INT64_MIN;
  for (int r = 0; r < int(rows_.size()); ++r) {
    TimelineRow& row = rows_[size_t(r)];
    finish_row(&row);
    item_count_ += row.items.size();
    for (int i = 0; i < int(row.items.size()); ++i) {
      const TimelineItem& it = row.items[size_t(i)];
      begin_ns_ = std::min(begin_ns_, it.start_ns);
      end_ns_ = std::max(end_ns_, it.end_ns);
      const TimelineRef ref{r, i};
      const uint32_t id = correlationId(ref);
      if (id == 0) continue;
      if (row.kind == TimelineRowKind::Stream)
        device_by_correlation_.push_back({id, r, i});
      else if (row.kind != TimelineRowKind::Nvtx)
        api_by_correlation_.push_back({id, r, i});
    }
  }
  if (item_count_ == 0) begin_ns_ = end_ns_ = 0;
  std::sort(api_by_correlation_.begin(), api_by_correlation_.end());
  std::sort(device_by_correlation_.begin(), device_by_correlation_.end());
}

size_t GpuTimelineData::visit(int row_index, double t0, double ns_per_px, int width_px, bool lod,
                              const std::function<void(const TimelineBar&)>& bar) const {
  if (row_index < 0 || row_index >= int(rows_.size()) || ns_per_px <= 0.0 || width_px <= 0) return 0;
  const TimelineRow& row = rows_[size_t(row_index)];
  const std::vector<TimelineItem>& items = row.items;
  const double t1 = t0 + double(width_px) * ns_per_px;
  // The first item that can reach into the range: the running maximum of the ends passes t0.
  size_t i = size_t(std::partition_point(row.max_end.begin(), row.max_end.end(),
                                         [t0](int64_t e) { return double(e) <= t0; }) -
                    row.max_end.begin());
  const size_t n = items.size();
  size_t bars = 0;
  auto x_of = [&](int64_t t) { return (double(t) - t0) / ns_per_px; };
  while (i < n && double(items[i].start_ns) < t1) {
    const TimelineItem& it = items[i];
    const double x0 = x_of(it.start_ns), x1 = x_of(it.end_ns);
    if (!lod || x1 - x0 >= 1.0) {
      if (x1 >= 0.0) {
        bar({x0, x1, uint32_t(i), 1});
        ++bars;
      }
      ++i;
      continue;
    }
    // A narrow item: merge it with every item that starts in the same pixel column.
    const double column = std::floor(x0);
    const double column_end_t = t0 + (column + 1.0) * ns_per_px;
    const size_t j = first_starting_at(items, i + 1, column_end_t);
    // On a stream items do not overlap: only the column's last item can be wide. Draw it whole.
    size_t merged_end = j;
    if (j - i > 1) {
      const TimelineItem& last = items[j - 1];
      if (x_of(last.end_ns) - x_of(last.start_ns) >= 1.0) merged_end = j - 1;
    }
    double x_end = column + 1.0;
    for (size_t k = merged_end; k > i && k + 8 > merged_end; --k) x_end = std::max(x_end, x_of(items[k - 1].end_ns));
    if (x_end >= 0.0) {
      bar({column, std::min(x_end, column + 2.0), uint32_t(i), uint32_t(merged_end - i)});
      ++bars;
    }
    i = merged_end;
  }
  return bars;
}

TimelineRef GpuTimelineData::itemAt(int row_index, double t, double slack) const {
  if (row_index < 0 || row_index >= int(rows_.size())) return {};
  const TimelineRow& row = rows_[size_t(row_index)];
  const auto& items = row.items;
  size_t i = size_t(std::partition_point(row.max_end.begin(), row.max_end.end(),
                                         [t, slack](int64_t e) { return double(e) + slack < t; }) -
                    row.max_end.begin());
  int best = -1;
  double best_distance = 0.0;
  for (; i < items.size() && double(items[i].start_ns) <= t + slack; ++i) {
    const TimelineItem& it = items[i];
    const double distance = t < double(it.start_ns) ? double(it.start_ns) - t
                            : t > double(it.end_ns) ? t - double(it.end_ns)
                                                    : 0.0;
    if (distance > slack) continue;
    // Containing items win; among them the innermost (the latest start).
    if (best < 0 || distance < best_distance || (distance == 0.0 && best_distance == 0.0)) {
      best = int(i);
      best_distance = distance;
    }
  }
  return best < 0 ? TimelineRef{} : TimelineRef{row_index, best};
}

size_t GpuTimelineData::countStarting(int row_index, double t0, double t1) const {
  if (row_index < 0 || row_index >= int(rows_.size())) return 0;
  const auto& items = rows_[size_t(row_index)].items;
  auto lo = std::partition_point(items.begin(), items.end(), [t0](const TimelineItem& x) { return double(x.start_ns) < t0; });
  auto hi = std::partition_point(lo, items.end(), [t1](const TimelineItem& x) { return double(x.start_ns) < t1; });
  return size_t(hi - lo);
}

size_t GpuTimelineData::graphItemsIn(int row_index, uint32_t first, uint32_t count) const {
  if (row_index < 0 || row_index >= int(rows_.size())) return 0;
  const std::vector<uint32_t>& before = rows_[size_t(row_index)].graphs_before;
  if (before.empty() || size_t(first) + count >= before.size()) return 0;
  return before[first + count] - before[first];
}

uint32_t GpuTimelineData::correlationId(const TimelineRef& ref) const {
  if (!ref.valid()) return 0;
  const TimelineItem& it = item(ref);
  switch (it.kind) {
    case TimelineItemKind::Kernel: return recording_.kernels[it.source].correlation_id;
    case TimelineItemKind::Memcpy: return recording_.memcpys[it.source].correlation_id;
    case TimelineItemKind::Memset: return recording_.memsets[it.source].correlation_id;
    case TimelineItemKind::Graph: return recording_.graphs[it.source].correlation_id;
    case TimelineItemKind::Runtime:
    case TimelineItemKind::Driver: return recording_.api_calls[it.source].correlation_id;
    case TimelineItemKind::Nvtx: return 0;
  }
  return 0;
}

std::vector<TimelineRef> GpuTimelineData::correlated(const TimelineRef& ref) const {
  std::vector<TimelineRef> out;
  const uint32_t id = correlationId(ref);
  if (id == 0) return out;
  const bool device = rows_[size_t(ref.row)].kind == TimelineRowKind::Stream;
  const auto& table = device ? api_by_correlation_ : device_by_correlation_;
  const auto range = std::equal_range(table.begin(), table.end(), CorrelationEntry{id, 0, 0});
  for (auto it = range.first; it != range.second; ++it) out.push_back({it->row, it->item});
  return out;
}

std::vector<TimelineRef> GpuTimelineData::enclosingRanges(uint32_t thread, double t) const {
  std::vector<TimelineRef> out;
  for (int r = 0; r < int(rows_.size()); ++r) {
    const TimelineRow& row = rows_[size_t(r)];
    if (row.kind != TimelineRowKind::Nvtx || row.thread != thread) continue;
    const TimelineRef ref = itemAt(r, t, 0.0);
    if (ref.valid()) out.push_back(ref);  // rows come by depth: outermost first
  }
  return out;
}

std::vector<TimelineRef> GpuTimelineData::callRanges(const TimelineRef& call) const {
  const TimelineRow& row = rows_[size_t(call.row)];
  if (row.kind != TimelineRowKind::Runtime && row.kind != TimelineRowKind::Driver) return {};
  return enclosingRanges(row.thread, double(item(call).start_ns));
}

int GpuTimelineData::launchRequest(const TimelineRef& call) const {
  for (const TimelineRef& r : callRanges(call)) {
    const RecordedRange& range = recording_.ranges[item(r).source];
    const int request = range.request != 0 ? range.request : int(range.range.request_id);
    if (request != 0) return request;
  }
  return 0;
}

std::string GpuTimelineData::launchContext(const TimelineRef& call) const {
  std::string path;
  for (const TimelineRef& r : callRanges(call)) path += (path.empty() ? "" : " › ") + labels_[item(r).label];
  const int request = launchRequest(call);
  return request != 0 && !path.empty() ? "request " + std::to_string(request) + ": " + path : path;
}

std::string GpuTimelineData::describe(const TimelineRef& ref) const {
  if (!ref.valid()) return {};
  const TimelineItem& it = item(ref);
  std::string text = labels_[it.label] + "\nduration " + format_duration_ns(double(it.end_ns - it.start_ns)) +
                     ", starts at " + format_time_ns(double(it.start_ns - begin_ns_));
  const bool device = rows_[size_t(ref.row)].kind == TimelineRowKind::Stream;
  const std::vector<TimelineRef> other = correlated(ref);
  switch (it.kind) {
    case TimelineItemKind::Kernel: {
      const KernelRecord& k = recording_.kernels[it.source];
      text += "\ngrid " + std::to_string(k.grid[0]) + "," + std::to_string(k.grid[1]) + "," + std::to_string(k.grid[2]) +
              "  block " + std::to_string(k.block[0]) + "," + std::to_string(k.block[1]) + "," +
              std::to_string(k.block[2]) + "\nregisters/thread " + std::to_string(k.registers_per_thread) +
              ", shared memory " + std::to_string(k.static_shared_memory) + " B static + " +
              std::to_string(k.dynamic_shared_memory) + " B dynamic";
      if (k.graph_node_id != 0) text += "\nlaunched by CUDA graph " + std::to_string(k.graph_id);
      break;
    }
    case TimelineItemKind::Graph: {
      const GraphRecord& g = recording_.graphs[it.source];
      text += "\nCUDA graph " + std::to_string(g.graph_id) + ", GPU " + std::to_string(g.device_id) + " · stream " +
              std::to_string(g.stream_id) + ": one record for the whole launch (CUPTI graph trace); the kernels "
              "inside are not itemised";
      // Which steps of this launch's request do have kernel rows (the report's device_trace).
      const int request = other.empty() ? 0 : launchRequest(other.front());
      for (const RecordedTraceSummary& t : recording_.traces) {
        if (t.request != request || request == 0 || t.kernel_detail_steps < 0) continue;
        text += "\nrequest " + std::to_string(request) + ": " +
                (t.kernel_detail_steps == 0   ? std::string("no decode step has")
                 : t.kernel_detail_steps == 1 ? std::string("decode step 1 has")
                                              : "decode steps 1–" + std::to_string(t.kernel_detail_steps) + " have") +
                " kernel rows, " + std::to_string(t.graph_level_steps) + " later step" +
                (t.graph_level_steps == 1 ? "" : "s") + " ran as graph launches";
        break;
      }
      break;
    }
    case TimelineItemKind::Memcpy: text += "\n" + bytes_text(recording_.memcpys[it.source].bytes); break;
    case TimelineItemKind::Memset: text += "\n" + bytes_text(recording_.memsets[it.source].bytes); break;
    case TimelineItemKind::Nvtx:
      text += "\nNVTX range, domain LazyScope, depth " + std::to_string(rows_[size_t(ref.row)].depth);
      break;
    default: break;
  }
  // Where a device item was launched from: the NVTX ranges around its launch call.
  if (device && !other.empty()) {
    const std::string context = launchContext(other.front());
    if (!context.empty()) text += "\nlaunched in " + context;
  }
  const uint32_t id = correlationId(ref);
  if (id != 0) {
    text += "\ncorrelation id " + std::to_string(id);
    if (!other.empty()) {
      const TimelineItem& o = item(other.front());
      text += device ? "\nlaunched by " : "\nlaunches ";
      text += labels_[o.label];
      if (other.size() > 1) text += " and " + std::to_string(other.size() - 1) + " more";
      if (device)
        text += " (" + format_duration_ns(double(it.start_ns - o.start_ns)) + " before the " +
                (it.kind == TimelineItemKind::Graph    ? "graph"
                 : it.kind == TimelineItemKind::Kernel ? "kernel"
                 : it.kind == TimelineItemKind::Memset ? "memset"
                                                       : "copy") +
                " started)";
    }
  }
  return text;
}

}  // namespace lazyscope::workbench

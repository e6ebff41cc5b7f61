#include "profiler/kernel_stats.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <set>
#include <tuple>
#include <utility>

namespace lazyscope {
namespace {

using Launch = std::tuple<int, int, int, int, int, int>;

struct Accumulator {
  std::vector<int64_t> durations;
  std::set<Launch> launches;
  int registers_min = 0, registers_max = 0;
};

std::string launch_text(const std::set<Launch>& launches) {
  if (launches.size() != 1) return std::to_string(launches.size()) + " configurations";
  const auto& [gx, gy, gz, bx, by, bz] = *launches.begin();
  return "grid " + std::to_string(gx) + "," + std::to_string(gy) + "," + std::to_string(gz) + " block " +
         std::to_string(bx) + "," + std::to_string(by) + "," + std::to_string(bz);
}

// Count, total, mean, median, p95, min and max of `durations` (sorted here), share of `busy_ns`.
KernelStatsRow duration_row(const std::string& name, std::vector<int64_t>* durations, int64_t busy_ns) {
  std::vector<int64_t>& d = *durations;
  std::sort(d.begin(), d.end());
  KernelStatsRow row;
  row.name = name;
  row.count = int64_t(d.size());
  for (int64_t v : d) row.total_ns += v;
  row.mean_ns = double(row.total_ns) / double(row.count);
  const size_t n = d.size();
  row.median_ns = n % 2 == 1 ? double(d[n / 2]) : 0.5 * (double(d[n / 2 - 1]) + double(d[n / 2]));
  // Nearest rank; the integer form of ceil(0.95 n) avoids 0.95's binary rounding.
  const size_t rank = (95 * n + 99) / 100;
  row.p95_ns = d[std::max<size_t>(rank, 1) - 1];
  row.min_ns = d.front();
  row.max_ns = d.back();
  row.share = busy_ns > 0 ? double(row.total_ns) / double(busy_ns) : 0.0;
  return row;
}

}  // namespace

const std::string& kernel_stats_name(const KernelRecord& k) {
  if (!k.display_name.empty()) return k.display_name;
  if (!k.short_name.empty()) return k.short_name;
  return k.mangled_name;
}

std::string graph_stats_name(const GraphRecord& g) { return "CUDA graph " + std::to_string(g.graph_id); }

KernelStats kernel_stats(const std::vector<KernelRecord>& kernels, int64_t from_ns, int64_t to_ns) {
  return kernel_stats(kernels, {}, from_ns, to_ns);
}

KernelStats kernel_stats(const std::vector<KernelRecord>& kernels, const std::vector<GraphRecord>& graphs,
                         int64_t from_ns, int64_t to_ns) {
  const bool all = to_ns <= from_ns;
  auto counted = [&](int64_t start) { return all || (start >= from_ns && start < to_ns); };
  std::map<std::string, Accumulator> by_name;
  std::map<uint32_t, std::vector<int64_t>> by_graph;
  KernelStats out;
  for (const KernelRecord& k : kernels) {
    if (!counted(k.start_ns)) continue;
    Accumulator& a = by_name[kernel_stats_name(k)];
    const int64_t d = std::max<int64_t>(0, k.end_ns - k.start_ns);
    if (a.durations.empty()) {
      a.registers_min = a.registers_max = k.registers_per_thread;
    } else {
      a.registers_min = std::min(a.registers_min, k.registers_per_thread);
      a.registers_max = std::max(a.registers_max, k.registers_per_thread);
    }
    a.durations.push_back(d);
    a.launches.insert({k.grid[0], k.grid[1], k.grid[2], k.block[0], k.block[1], k.block[2]});
    ++out.kernels;
    out.total_ns += d;
  }
  for (const GraphRecord& g : graphs) {
    if (!counted(g.start_ns)) continue;
    const int64_t d = std::max<int64_t>(0, g.end_ns - g.start_ns);
    by_graph[g.graph_id].push_back(d);
    ++out.graph_launches;
    out.graph_total_ns += d;
  }
  const int64_t busy = out.busy_ns();
  for (auto& [name, a] : by_name) {
    KernelStatsRow row = duration_row(name, &a.durations, busy);
    row.launch = launch_text(a.launches);
    row.registers_min = a.registers_min;
    row.registers_max = a.registers_max;
    out.rows.push_back(std::move(row));
  }
  for (auto& [id, durations] : by_graph) {
    GraphRecord g;
    g.graph_id = id;
    KernelStatsRow row = duration_row(graph_stats_name(g), &durations, busy);
    row.launch = "whole graph launch";
    row.graph = true;
    row.graph_id = id;
    out.rows.push_back(std::move(row));
  }
  std::sort(out.rows.begin(), out.rows.end(), [](const KernelStatsRow& x, const KernelStatsRow& y) {
    return x.total_ns != y.total_ns ? x.total_ns > y.total_ns : x.name < y.name;
  });
  return out;
}

KernelStats kernel_stats_graphs_combined(const std::vector<KernelRecord>& kernels, const std::vector<GraphRecord>& graphs) {
  std::vector<GraphRecord> one = graphs;
  for (GraphRecord& g : one) g.graph_id = 0;
  KernelStats s = kernel_stats(kernels, one);
  for (KernelStatsRow& r : s.rows)
    if (r.graph) r.name = kAllGraphsRowName;
  std::sort(s.rows.begin(), s.rows.end(), [](const KernelStatsRow& x, const KernelStatsRow& y) {
    return x.total_ns != y.total_ns ? x.total_ns > y.total_ns : x.name < y.name;
  });
  return s;
}

std::string kernel_detail_note(const std::vector<RecordedTraceSummary>& traces) {
  std::map<int, std::vector<int>> requests_by_detail;  // kernel_detail_steps -> requests
  int64_t graph_steps = 0, graph_rows = 0;
  size_t traced = 0;
  for (const RecordedTraceSummary& t : traces) {
    if (!t.device_traced) continue;
    ++traced;
    if (t.kernel_detail_steps < 0 || (t.graph_level_steps == 0 && t.graphs == 0)) continue;
    requests_by_detail[t.kernel_detail_steps].push_back(t.request);
    graph_steps += t.graph_level_steps;
    graph_rows += t.graphs;
  }
  if (requests_by_detail.empty()) return {};
  auto steps_text = [](int k) {
    return k == 0 ? std::string("no decode step") : k == 1 ? std::string("decode step 1")
                                                           : "decode steps 1–" + std::to_string(k);
  };
  std::string detail;
  if (requests_by_detail.size() == 1) {
    const auto& [k, requests] = *requests_by_detail.begin();
    const std::string which = requests.size() == traced ? "each traced request"
                                                        : std::to_string(requests.size()) + " of the " +
                                                              std::to_string(traced) + " traced requests";
    detail = k == 0 ? "no decode step of " + which + " has kernel rows"
                    : steps_text(k) + " of " + which + (k == 1 ? " has" : " have") + " kernel rows";
  } else {
    for (const auto& [k, requests] : requests_by_detail) {
      std::string ids;
      for (int r : requests) ids += (ids.empty() ? "" : ", ") + std::to_string(r);
      detail += (detail.empty() ? "" : "; ") + std::string(requests.size() == 1 ? "request " : "requests ") + ids +
                ": " + (k == 0 ? std::string("none") : steps_text(k)) + " with kernel rows";
    }
  }
  return "Kernels inside CUDA graph launches are not itemised: " + detail + "; the " + std::to_string(graph_steps) +
         " later decode step" + (graph_steps == 1 ? "" : "s") + " ran as " + std::to_string(graph_rows) +
         " graph launch" + (graph_rows == 1 ? "" : "es") + ", each counted whole in its graph's row.";
}

std::vector<KernelDiffRow> compare_kernel_stats(const KernelStats& a, const KernelStats& b) {
  std::map<std::string, KernelDiffRow> rows;
  for (const KernelStatsRow& r : a.rows) {
    KernelDiffRow& d = rows[r.name];
    d.name = r.name;
    d.count_a = r.count;
    d.total_a_ns = r.total_ns;
    d.mean_a_ns = r.mean_ns;
  }
  for (const KernelStatsRow& r : b.rows) {
    KernelDiffRow& d = rows[r.name];
    d.name = r.name;
    d.count_b = r.count;
    d.total_b_ns = r.total_ns;
    d.mean_b_ns = r.mean_ns;
  }
  std::vector<KernelDiffRow> out;
  for (auto& [name, d] : rows) out.push_back(d);
  std::sort(out.begin(), out.end(), [](const KernelDiffRow& x, const KernelDiffRow& y) {
    const int64_t dx = std::llabs(x.diff_ns()), dy = std::llabs(y.diff_ns());
    return dx != dy ? dx > dy : x.name < y.name;
  });
  return out;
}

namespace {

// The [start, end) windows, in ns, of the request spans of `policy`'s requests.
std::vector<std::pair<int64_t, int64_t>> policy_windows(const SessionRecording& recording, const std::string& policy) {
  std::set<int> ids;
  for (const RecordedRequest& r : recording.requests)
    if (r.event.policy == policy) ids.insert(r.id);
  std::vector<std::pair<int64_t, int64_t>> windows;
  for (const RecordedSpan& s : recording.spans)
    if (s.category == "request" && ids.count(s.request))
      windows.push_back({int64_t(std::llround(s.start_ms * 1e6)), int64_t(std::llround((s.start_ms + s.duration_ms) * 1e6))});
  return windows;
}

template <typename Record>
std::vector<Record> records_in(const std::vector<Record>& records, const std::vector<std::pair<int64_t, int64_t>>& windows) {
  std::vector<Record> out;
  for (const Record& k : records)
    for (const auto& [from, to] : windows)
      if (k.start_ns >= from && k.start_ns < to) {
        out.push_back(k);
        break;
      }
  return out;
}

}  // namespace

std::vector<KernelRecord> kernels_of_policy(const SessionRecording& recording, const std::string& policy) {
  return records_in(recording.kernels, policy_windows(recording, policy));
}

std::vector<GraphRecord> graphs_of_policy(const SessionRecording& recording, const std::string& policy) {
  return records_in(recording.graphs, policy_windows(recording, policy));
}

}  // namespace lazyscope

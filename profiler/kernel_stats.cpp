#include "profiler/kernel_stats.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <set>
#include <tuple>

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

}  // namespace

const std::string& kernel_stats_name(const KernelRecord& k) {
  if (!k.display_name.empty()) return k.display_name;
  if (!k.short_name.empty()) return k.short_name;
  return k.mangled_name;
}

KernelStats kernel_stats(const std::vector<KernelRecord>& kernels, int64_t from_ns, int64_t to_ns) {
  const bool all = to_ns <= from_ns;
  std::map<std::string, Accumulator> by_name;
  KernelStats out;
  for (const KernelRecord& k : kernels) {
    if (!all && (k.start_ns < from_ns || k.start_ns >= to_ns)) continue;
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
  for (auto& [name, a] : by_name) {
    std::vector<int64_t>& d = a.durations;
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
    row.share = out.total_ns > 0 ? double(row.total_ns) / double(out.total_ns) : 0.0;
    row.launch = launch_text(a.launches);
    row.registers_min = a.registers_min;
    row.registers_max = a.registers_max;
    out.rows.push_back(std::move(row));
  }
  std::sort(out.rows.begin(), out.rows.end(), [](const KernelStatsRow& x, const KernelStatsRow& y) {
    return x.total_ns != y.total_ns ? x.total_ns > y.total_ns : x.name < y.name;
  });
  return out;
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

std::vector<KernelRecord> kernels_of_policy(const SessionRecording& recording, const std::string& policy) {
  std::set<int> ids;
  for (const RecordedRequest& r : recording.requests)
    if (r.event.policy == policy) ids.insert(r.id);
  std::vector<std::pair<int64_t, int64_t>> windows;
  for (const RecordedSpan& s : recording.spans)
    if (s.category == "request" && ids.count(s.request))
      windows.push_back({int64_t(std::llround(s.start_ms * 1e6)), int64_t(std::llround((s.start_ms + s.duration_ms) * 1e6))});
  std::vector<KernelRecord> out;
  for (const KernelRecord& k : recording.kernels)
    for (const auto& [from, to] : windows)
      if (k.start_ns >= from && k.start_ns < to) {
        out.push_back(k);
        break;
      }
  return out;
}

}  // namespace lazyscope

#pragma once
// Per-kernel statistics of a traced session (the workbench's Kernel Statistics panel, and the
// comparison of two reports): count, total, mean, median, p95, min and max of the kernels' GPU
// durations, their share of the GPU time, and their launch configuration. CUDA graph launches
// recorded as a whole (CUPTI_ACTIVITY_KIND_GRAPH_TRACE: the decode steps without kernel detail)
// get rows of their own, one per graph id, so the shares add up to the GPU busy time of kernels
// and graphs together. Plain C++ over the report's CUPTI records; no Qt.
#include <cstdint>
#include <string>
#include <vector>

#include "kernels/device_trace.h"
#include "profiler/session_recorder.h"

namespace lazyscope {

struct KernelStatsRow {
  std::string name;  // the display name ("decode_kernel<128, 4, true>"), else the mangled name;
                     // a graph row: "CUDA graph 12" (the name the report's graph spans carry)
  int64_t count = 0;
  int64_t total_ns = 0;
  double mean_ns = 0.0;
  double median_ns = 0.0;  // the middle duration; the mean of the two middle ones for an even count
  int64_t p95_ns = 0;      // nearest rank: the ceil(0.95 * count)-th smallest duration
  int64_t min_ns = 0;
  int64_t max_ns = 0;
  double share = 0.0;      // total_ns / the GPU busy time in the range, kernels and graphs (0..1)
  // Launch configuration: "grid x,y,z block x,y,z" when every launch used the same one, else the
  // number of distinct configurations ("3 configurations"); a graph row: "whole graph launch".
  std::string launch;
  int registers_min = 0, registers_max = 0;  // registers per thread over the launches (graph rows: 0)
  bool graph = false;                        // one CUDA graph's launches, each counted whole
  uint32_t graph_id = 0;
};

struct KernelStats {
  std::vector<KernelStatsRow> rows;  // kernels and graphs, by total time, largest first (ties by name)
  int64_t kernels = 0;               // kernels counted
  int64_t total_ns = 0;              // their summed durations
  int64_t graph_launches = 0;        // graph launches counted (each one row of GRAPH_TRACE)
  int64_t graph_total_ns = 0;        // their summed GPU durations
  int64_t busy_ns() const { return total_ns + graph_total_ns; }  // what the shares divide
};

// The statistics of the kernels (and graph launches) whose start lies in [from_ns, to_ns)
// (to_ns <= from_ns: all of them). A record is counted whole where it starts, so a selected range
// never splits one.
KernelStats kernel_stats(const std::vector<KernelRecord>& kernels, int64_t from_ns = 0, int64_t to_ns = 0);
KernelStats kernel_stats(const std::vector<KernelRecord>& kernels, const std::vector<GraphRecord>& graphs,
                         int64_t from_ns = 0, int64_t to_ns = 0);

// Which decode steps of the recording have per-kernel records, in words, from its device_trace
// rows: "decode steps 1–1 of every request have kernel rows; steps 2–32 ran as CUDA graph launches
// (62 graph rows), their kernels not itemised". Empty when no request was traced with graph-level
// steps (every kernel has its row, or there is no device trace).
std::string kernel_detail_note(const std::vector<RecordedTraceSummary>& traces);

// The same, with the launches of every graph in one row, "CUDA graph launches (all graphs)": graph
// ids differ between two sessions or pools, so a comparison puts their launches side by side there.
KernelStats kernel_stats_graphs_combined(const std::vector<KernelRecord>& kernels, const std::vector<GraphRecord>& graphs);
inline constexpr const char* kAllGraphsRowName = "CUDA graph launches (all graphs)";

// One kernel name in two reports (A and B, e.g. lazy and materialized).
struct KernelDiffRow {
  std::string name;
  int64_t count_a = 0, count_b = 0;
  int64_t total_a_ns = 0, total_b_ns = 0;
  double mean_a_ns = 0.0, mean_b_ns = 0.0;
  int64_t diff_ns() const { return total_b_ns - total_a_ns; }
  // total B / total A; 0 when the kernel is absent from A.
  double ratio() const { return total_a_ns > 0 ? double(total_b_ns) / double(total_a_ns) : 0.0; }
};

// Every name present in either report, by the absolute difference of their totals (largest first).
std::vector<KernelDiffRow> compare_kernel_stats(const KernelStats& a, const KernelStats& b);

// The kernels that start inside a request of `policy` ("lazy", "materialized", ...): the report's
// request spans give each request's time window. graphs_of_policy: the same for graph launches.
std::vector<KernelRecord> kernels_of_policy(const SessionRecording& recording, const std::string& policy);
std::vector<GraphRecord> graphs_of_policy(const SessionRecording& recording, const std::string& policy);

// The name a graph launch is listed under: "CUDA graph 12".
std::string graph_stats_name(const GraphRecord& g);

// The name a kernel is listed under (display name, else short name, else the mangled name).
const std::string& kernel_stats_name(const KernelRecord& k);

}  // namespace lazyscope

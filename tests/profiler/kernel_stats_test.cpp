// Kernel statistics against numbers worked out by hand.
#include "profiler/kernel_stats.h"

#include <gtest/gtest.h>

namespace lazyscope {
namespace {

KernelRecord kernel(const std::string& name, int64_t start, int64_t duration, int grid_x = 1, int regs = 32) {
  KernelRecord k;
  k.display_name = name;
  k.start_ns = start;
  k.end_ns = start + duration;
  k.grid[0] = grid_x;
  k.grid[1] = k.grid[2] = 1;
  k.block[0] = 128;
  k.block[1] = k.block[2] = 1;
  k.registers_per_thread = regs;
  return k;
}

// "gemv": 10, 20, 30, 40 ns; "decode": 1, 2, 3, 4, 100 ns; starts 1000 ns apart.
std::vector<KernelRecord> sample() {
  std::vector<KernelRecord> v;
  int64_t t = 0;
  for (int64_t d : {10, 20, 30, 40}) v.push_back(kernel("gemv", t += 1000, d));
  for (int64_t d : {1, 2, 3, 4, 100}) v.push_back(kernel("decode", t += 1000, d, d == 100 ? 7 : 1, d == 100 ? 40 : 32));
  return v;
}

TEST(KernelStats, HandWorkedNumbers) {
  const KernelStats s = kernel_stats(sample());
  EXPECT_EQ(s.kernels, 9);
  EXPECT_EQ(s.total_ns, 210);
  ASSERT_EQ(s.rows.size(), 2u);
  const KernelStatsRow& decode = s.rows[0];  // 110 ns > 100 ns: first
  EXPECT_EQ(decode.name, "decode");
  EXPECT_EQ(decode.count, 5);
  EXPECT_EQ(decode.total_ns, 110);
  EXPECT_DOUBLE_EQ(decode.mean_ns, 22.0);
  EXPECT_DOUBLE_EQ(decode.median_ns, 3.0);
  EXPECT_EQ(decode.p95_ns, 100);  // rank ceil(4.75) = 5
  EXPECT_EQ(decode.min_ns, 1);
  EXPECT_EQ(decode.max_ns, 100);
  EXPECT_DOUBLE_EQ(decode.share, 110.0 / 210.0);
  EXPECT_EQ(decode.launch, "2 configurations");
  EXPECT_EQ(decode.registers_min, 32);
  EXPECT_EQ(decode.registers_max, 40);
  const KernelStatsRow& gemv = s.rows[1];
  EXPECT_EQ(gemv.count, 4);
  EXPECT_DOUBLE_EQ(gemv.median_ns, 25.0);  // even count: (20 + 30) / 2
  EXPECT_EQ(gemv.p95_ns, 40);              // rank ceil(3.8) = 4
  EXPECT_DOUBLE_EQ(gemv.mean_ns, 25.0);
  EXPECT_EQ(gemv.launch, "grid 1,1,1 block 128,1,1");
  EXPECT_NEAR(gemv.share + decode.share, 1.0, 1e-12);
}

TEST(KernelStats, RangeCountsKernelsByTheirStart) {
  // Starts: gemv 1000..4000, decode 5000..9000. [2500, 6000) holds gemv 30, 40 and decode 1.
  const KernelStats s = kernel_stats(sample(), 2500, 6000);
  EXPECT_EQ(s.kernels, 3);
  EXPECT_EQ(s.total_ns, 71);
  ASSERT_EQ(s.rows.size(), 2u);
  EXPECT_EQ(s.rows[0].name, "gemv");
  EXPECT_EQ(s.rows[0].count, 2);
  EXPECT_DOUBLE_EQ(s.rows[0].median_ns, 35.0);
  EXPECT_EQ(s.rows[1].total_ns, 1);
  // An empty range: no rows, no division by zero.
  EXPECT_TRUE(kernel_stats(sample(), 100, 200).rows.empty());
  EXPECT_TRUE(kernel_stats({}).rows.empty());
}

TEST(KernelStats, PercentileOfTwentyLaunches) {
  std::vector<KernelRecord> v;
  for (int i = 1; i <= 20; ++i) v.push_back(kernel("k", i * 100, i));
  const KernelStatsRow r = kernel_stats(v).rows.at(0);
  EXPECT_EQ(r.p95_ns, 19);  // rank ceil(19.0) = 19: exactly, without 0.95's rounding
  EXPECT_DOUBLE_EQ(r.median_ns, 10.5);
}

TEST(KernelStats, CompareTwoReports) {
  std::vector<KernelRecord> lazy = sample();
  std::vector<KernelRecord> materialized = sample();
  materialized.push_back(kernel("materialize_copy", 20000, 500));
  materialized.push_back(kernel("gemv", 21000, 60));
  const std::vector<KernelDiffRow> d = compare_kernel_stats(kernel_stats(lazy), kernel_stats(materialized));
  ASSERT_EQ(d.size(), 3u);
  EXPECT_EQ(d[0].name, "materialize_copy");  // +500 ns, absent from A
  EXPECT_EQ(d[0].diff_ns(), 500);
  EXPECT_EQ(d[0].count_a, 0);
  EXPECT_DOUBLE_EQ(d[0].ratio(), 0.0);
  EXPECT_EQ(d[1].name, "gemv");  // 100 -> 160 ns
  EXPECT_EQ(d[1].diff_ns(), 60);
  EXPECT_DOUBLE_EQ(d[1].ratio(), 1.6);
  EXPECT_EQ(d[2].name, "decode");
  EXPECT_EQ(d[2].diff_ns(), 0);
}

}  // namespace
}  // namespace lazyscope

namespace lazyscope {
namespace {

TEST(KernelStats, KernelsOfAPolicyFallInsideItsRequests) {
  SessionRecording r;
  RecordedRequest lazy, materialized;
  lazy.id = 1;
  lazy.event.policy = "lazy";
  materialized.id = 2;
  materialized.event.policy = "materialized";
  r.requests = {lazy, materialized};
  r.spans.push_back({1, "request 1 (lazy)", "request", 1.0, 2.0});          // 1..3 ms
  r.spans.push_back({2, "request 2 (materialized)", "request", 4.0, 2.0});  // 4..6 ms
  r.spans.push_back({1, "prefill", "prefill", 1.0, 1.0});
  for (int64_t t : {1'500'000, 2'999'999, 3'000'000, 4'000'000, 5'500'000, 7'000'000}) {
    KernelRecord k;
    k.display_name = "k" + std::to_string(t);
    k.start_ns = t;
    k.end_ns = t + 10;
    r.kernels.push_back(k);
  }
  const auto a = kernels_of_policy(r, "lazy");
  ASSERT_EQ(a.size(), 2u);  // 1.5 ms and just before 3 ms
  EXPECT_EQ(a[1].start_ns, 2'999'999);
  const auto b = kernels_of_policy(r, "materialized");
  ASSERT_EQ(b.size(), 2u);
  EXPECT_EQ(b[0].start_ns, 4'000'000);
  EXPECT_TRUE(kernels_of_policy(r, "positional").empty());
}

}  // namespace
}  // namespace lazyscope

namespace lazyscope {
namespace {

GraphRecord graph(uint32_t id, int64_t start, int64_t duration) {
  GraphRecord g;
  g.graph_id = id;
  g.start_ns = start;
  g.end_ns = start + duration;
  g.stream_id = 7;
  return g;
}

TEST(KernelStats, GraphLaunchesGetRowsOfTheirOwnAndShareTheBusyTime) {
  // The sample's 210 ns of kernels (starts 1000..9000), then graph 3: 100, 300, 200, 400 ns and
  // graph 8: 90 ns (starts 10000..14000).
  const std::vector<GraphRecord> graphs = {graph(3, 10000, 100), graph(3, 11000, 300), graph(3, 12000, 200),
                                           graph(3, 13000, 400), graph(8, 14000, 90)};
  const KernelStats s = kernel_stats(sample(), graphs);
  EXPECT_EQ(s.kernels, 9);
  EXPECT_EQ(s.total_ns, 210);
  EXPECT_EQ(s.graph_launches, 5);
  EXPECT_EQ(s.graph_total_ns, 1090);
  EXPECT_EQ(s.busy_ns(), 1300);
  ASSERT_EQ(s.rows.size(), 4u);
  const KernelStatsRow& g3 = s.rows[0];  // 1000 ns: first
  EXPECT_EQ(g3.name, "CUDA graph 3");
  EXPECT_TRUE(g3.graph);
  EXPECT_EQ(g3.graph_id, 3u);
  EXPECT_EQ(g3.count, 4);
  EXPECT_EQ(g3.total_ns, 1000);
  EXPECT_DOUBLE_EQ(g3.mean_ns, 250.0);
  EXPECT_DOUBLE_EQ(g3.median_ns, 250.0);  // (200 + 300) / 2
  EXPECT_EQ(g3.p95_ns, 400);              // rank ceil(3.8) = 4
  EXPECT_EQ(g3.min_ns, 100);
  EXPECT_EQ(g3.max_ns, 400);
  EXPECT_DOUBLE_EQ(g3.share, 1000.0 / 1300.0);
  EXPECT_EQ(g3.launch, "whole graph launch");
  EXPECT_EQ(s.rows[1].name, "decode");  // 110 ns
  EXPECT_FALSE(s.rows[1].graph);
  EXPECT_DOUBLE_EQ(s.rows[1].share, 110.0 / 1300.0);
  EXPECT_EQ(s.rows[2].name, "gemv");
  EXPECT_EQ(s.rows[3].name, "CUDA graph 8");
  double shares = 0.0;
  for (const KernelStatsRow& r : s.rows) shares += r.share;
  EXPECT_NEAR(shares, 1.0, 1e-12);
  // A range counts graph launches by their start, like kernels: [8500, 12500) holds decode's
  // 100 ns kernel (start 9000) and graph 3's first three launches (100 + 300 + 200 ns).
  const KernelStats r = kernel_stats(sample(), graphs, 8500, 12500);
  EXPECT_EQ(r.kernels, 1);
  EXPECT_EQ(r.graph_launches, 3);
  EXPECT_EQ(r.graph_total_ns, 600);
  ASSERT_EQ(r.rows.size(), 2u);
  EXPECT_EQ(r.rows[0].name, "CUDA graph 3");
  EXPECT_DOUBLE_EQ(r.rows[0].median_ns, 200.0);
  EXPECT_DOUBLE_EQ(r.rows[0].share, 600.0 / 700.0);
  // Without graphs the kernel shares are what they were.
  EXPECT_DOUBLE_EQ(kernel_stats(sample()).rows[0].share, 110.0 / 210.0);
}

TEST(KernelStats, GraphLaunchesCompareByGraphName) {
  const KernelStats a = kernel_stats({}, {graph(3, 0, 100), graph(3, 1000, 100)});
  const KernelStats b = kernel_stats({}, {graph(3, 0, 150), graph(3, 1000, 150)});
  const std::vector<KernelDiffRow> d = compare_kernel_stats(a, b);
  ASSERT_EQ(d.size(), 1u);
  EXPECT_EQ(d[0].name, "CUDA graph 3");
  EXPECT_EQ(d[0].diff_ns(), 100);
  EXPECT_DOUBLE_EQ(d[0].ratio(), 1.5);
}

TEST(KernelStats, ComparedGraphLaunchesShareOneRowWhateverTheirIds) {
  // A's decode replays graph 2, B's graph 5 (each pool captures its own): one row side by side.
  const KernelStats a = kernel_stats_graphs_combined(sample(), {graph(2, 10000, 100), graph(2, 11000, 300)});
  const KernelStats b = kernel_stats_graphs_combined(sample(), {graph(5, 10000, 150), graph(5, 11000, 350),
                                                                graph(6, 12000, 100)});
  ASSERT_EQ(a.rows.size(), 3u);
  EXPECT_EQ(a.rows[0].name, kAllGraphsRowName);
  EXPECT_EQ(a.rows[0].count, 2);
  EXPECT_EQ(a.rows[0].total_ns, 400);
  EXPECT_DOUBLE_EQ(a.rows[0].share, 400.0 / 610.0);
  EXPECT_EQ(b.rows[0].count, 3);
  EXPECT_EQ(b.rows[0].total_ns, 600);
  EXPECT_DOUBLE_EQ(b.rows[0].median_ns, 150.0);
  const std::vector<KernelDiffRow> d = compare_kernel_stats(a, b);
  ASSERT_EQ(d.size(), 3u);
  EXPECT_EQ(d[0].name, kAllGraphsRowName);
  EXPECT_EQ(d[0].count_a, 2);
  EXPECT_EQ(d[0].count_b, 3);
  EXPECT_EQ(d[0].diff_ns(), 200);
  EXPECT_DOUBLE_EQ(d[0].ratio(), 1.5);
  // Without graphs it is kernel_stats itself.
  EXPECT_EQ(kernel_stats_graphs_combined(sample(), {}).rows.size(), 2u);
}

RecordedTraceSummary trace(int request, int detail, int graph_steps) {
  RecordedTraceSummary t;
  t.request = request;
  t.device_traced = true;
  t.kernel_detail_steps = detail;
  t.graph_level_steps = graph_steps;
  t.graphs = graph_steps;
  return t;
}

TEST(KernelStats, TheDetailNoteSaysWhichStepsHaveKernelRows) {
  EXPECT_EQ(kernel_detail_note({trace(1, 1, 31), trace(2, 1, 31)}),
            "Kernels inside CUDA graph launches are not itemised: decode step 1 of each traced request has kernel "
            "rows; the 62 later decode steps ran as 62 graph launches, each counted whole in its graph's row.");
  EXPECT_EQ(kernel_detail_note({trace(1, 4, 1)}),
            "Kernels inside CUDA graph launches are not itemised: decode steps 1–4 of each traced request have "
            "kernel rows; the 1 later decode step ran as 1 graph launch, each counted whole in its graph's row.");
  // Requests traced differently are listed apart; untraced and every-kernel requests are left out.
  RecordedTraceSummary host_only;
  host_only.request = 4;
  const std::string mixed = kernel_detail_note({trace(1, 1, 7), trace(2, 0, 8), trace(3, -1, 0), host_only});
  EXPECT_NE(mixed.find("request 2: none with kernel rows; request 1: decode step 1 with kernel rows"),
            std::string::npos)
      << mixed;
  EXPECT_NE(mixed.find("the 15 later decode steps ran as 15 graph launches"), std::string::npos) << mixed;
  // Every kernel recorded (--trace-kernel-steps all), or no device trace: nothing to say.
  EXPECT_EQ(kernel_detail_note({trace(1, -1, 0)}), "");
  EXPECT_EQ(kernel_detail_note({host_only}), "");
  EXPECT_EQ(kernel_detail_note({}), "");
}

TEST(KernelStats, GraphsOfAPolicyFallInsideItsRequests) {
  SessionRecording r;
  RecordedRequest lazy;
  lazy.id = 1;
  lazy.event.policy = "lazy";
  r.requests = {lazy};
  r.spans.push_back({1, "request 1 (lazy)", "request", 1.0, 2.0});  // 1..3 ms
  r.graphs = {graph(1, 500'000, 10), graph(1, 1'500'000, 10), graph(1, 3'000'000, 10)};
  const auto g = graphs_of_policy(r, "lazy");
  ASSERT_EQ(g.size(), 1u);
  EXPECT_EQ(g[0].start_ns, 1'500'000);
}

}  // namespace
}  // namespace lazyscope

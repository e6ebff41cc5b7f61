// The lazy-overhead probe on the CPU backend: it measures the CPU reference kernels and says so,
// reports the median of per-repeat ratios inside its own spread, refuses bad shapes naming the
// option, and its rows go into a session report and back.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>

#include "base/error.h"
#include "profiler/overhead_probe.h"
#include "profiler/session_recorder.h"

namespace lazyscope {
namespace {

OverheadProbeOptions small_cpu_grid() {
  OverheadProbeOptions o;
  o.shapes = {"smollm2-135m", "4/2/32"};
  o.contexts = {256, 1024};
  o.batches = {1};
  o.repeats = 4;
  o.timing_ms = 2.0;
  o.backend = BackendKind::Cpu;
  o.cpu_threads = 1;
  return o;
}

TEST(OverheadProbe, CpuGridRowsAreLabelledAndConsistent) {
  int seen = 0;
  const std::vector<OverheadProbeRow> rows = run_overhead_probe(small_cpu_grid(), [&](const OverheadProbeRow&) { ++seen; });
  ASSERT_EQ(rows.size(), 4u);
  EXPECT_EQ(seen, 4);
  EXPECT_EQ(rows[0].shape, "smollm2-135m");
  EXPECT_EQ(rows[0].num_heads, 9);
  EXPECT_EQ(rows[0].num_kv_heads, 3);
  EXPECT_EQ(rows[0].head_dim, 64);
  EXPECT_EQ(rows[3].shape, "4/2/32");
  EXPECT_EQ(rows[3].context, 1024);
  for (const OverheadProbeRow& r : rows) {
    EXPECT_EQ(r.backend, "cpu");
    EXPECT_NE(r.kernel.find("cpu paged_attention"), std::string::npos) << r.kernel;
    EXPECT_GT(r.plain_us, 0.0);
    EXPECT_GT(r.lazy_us, 0.0);
    EXPECT_GE(r.calls, 1);
    EXPECT_LE(r.overhead_min, r.overhead_p25);
    EXPECT_LE(r.overhead_p25, r.overhead);
    EXPECT_LE(r.overhead, r.overhead_p75);
    EXPECT_LE(r.overhead_p75, r.overhead_max);
  }
  const std::string table = overhead_table(rows);
  EXPECT_NE(table.find("cpu paged_attention"), std::string::npos);
  EXPECT_NE(table.find("| smollm2-135m | 9/3/64 | 16 | 1 | 1024 |"), std::string::npos) << table;
  const std::string plot = overhead_plot(rows);
  EXPECT_EQ(std::count(plot.begin(), plot.end(), '\n'), 5);  // a legend and one line per row
}

TEST(OverheadProbe, BadShapesAndOptionsNameTheProblem) {
  OverheadProbeOptions o = small_cpu_grid();
  o.shapes = {"9/4/64"};
  try {
    run_overhead_probe(o);
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("kv heads must divide heads"), std::string::npos) << e.what();
  }
  o.shapes = {"big"};
  try {
    run_overhead_probe(o);
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("unknown model shape 'big'"), std::string::npos) << e.what();
  }
  o = small_cpu_grid();
  o.repeats = 1;
  EXPECT_THROW(run_overhead_probe(o), Error);
  o = small_cpu_grid();
  o.contexts = {0};
  try {
    run_overhead_probe(o);
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("--contexts"), std::string::npos) << e.what();
  }
}

// The whole grid is checked before the first shape is timed: a bad last entry gives no rows at all.
TEST(OverheadProbe, TheWholeGridIsCheckedBeforeAnyTiming) {
  OverheadProbeOptions o = small_cpu_grid();
  o.contexts = {256, 0};
  int timed = 0;
  EXPECT_THROW(run_overhead_probe(o, [&](const OverheadProbeRow&) { ++timed; }), Error);
  EXPECT_EQ(timed, 0);
  o = small_cpu_grid();
  o.batches = {1, 1024};
  o.contexts = {1 << 20};
  try {
    run_overhead_probe(o, [&](const OverheadProbeRow&) { ++timed; });
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("exceeds 8 GiB"), std::string::npos) << e.what();
  }
  EXPECT_EQ(timed, 0);
  o = small_cpu_grid();
  o.timing_ms = std::nan("");
  EXPECT_THROW(run_overhead_probe(o), Error);
  o.timing_ms = 2.0;
  o.document_tokens = -1;
  EXPECT_THROW(run_overhead_probe(o), Error);
}

TEST(OverheadProbe, RowsGoIntoTheReport) {
  OverheadProbeOptions o = small_cpu_grid();
  o.shapes = {"4/2/32"};
  o.contexts = {256};
  SessionRecorder recorder;
  recorder.add_overhead(run_overhead_probe(o));
  const auto path = std::filesystem::temp_directory_path() / ("ls-overhead-" + std::to_string(getpid()) + ".db");
  save_session_sqlite(recorder.snapshot(), path);
  const SessionRecording back = load_session_sqlite(path);
  ASSERT_EQ(back.overhead.size(), 1u);
  EXPECT_EQ(back.overhead[0].backend, "cpu");
  EXPECT_EQ(back.overhead[0].context, 256);
  EXPECT_EQ(back.overhead[0].repeats, 4);
  EXPECT_DOUBLE_EQ(back.overhead[0].overhead, recorder.snapshot().overhead[0].overhead);
  std::filesystem::remove(path);
}

}  // namespace
}  // namespace lazyscope

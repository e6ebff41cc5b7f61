// Nsight-style SQL on a real GPU-traced report (`generate --trace-gpu --record`, made on the GPU
// machine; scripts/device/device_run.sh step `profile-report` names it in LAZYSCOPE_GPU_REPORT):
// kernel summary by name, NVTX ranges joined to our requests by their payload, every kernel joined
// to its runtime or driver launch call on correlationId, every graph-level record joined to its
// cudaGraphLaunch, and the per-request summary agreeing with the rows. Skipped without such a report.
#include <gtest/gtest.h>
#include <sqlite3.h>

#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "profiler/session_recorder.h"

namespace lazyscope {
namespace {

class GpuReport : public ::testing::Test {
 protected:
  void SetUp() override {
    const char* path = std::getenv("LAZYSCOPE_GPU_REPORT");
    if (path == nullptr || *path == '\0') GTEST_SKIP() << "no GPU-traced report (set LAZYSCOPE_GPU_REPORT)";
    path_ = path;
    ASSERT_TRUE(std::filesystem::exists(path_)) << path_;
    ASSERT_EQ(sqlite3_open_v2(path_.c_str(), &db_, SQLITE_OPEN_READONLY, nullptr), SQLITE_OK) << path_;
  }
  void TearDown() override { sqlite3_close(db_); }

  std::vector<std::vector<std::string>> rows(const std::string& sql) {
    std::vector<std::vector<std::string>> out;
    sqlite3_stmt* st = nullptr;
    if (sqlite3_prepare_v2(db_, sql.c_str(), -1, &st, nullptr) != SQLITE_OK) {
      ADD_FAILURE() << sqlite3_errmsg(db_) << " in: " << sql;
      return out;
    }
    while (sqlite3_step(st) == SQLITE_ROW) {
      std::vector<std::string> row;
      for (int c = 0; c < sqlite3_column_count(st); ++c) {
        const unsigned char* t = sqlite3_column_text(st, c);
        row.push_back(t ? reinterpret_cast<const char*>(t) : "NULL");
      }
      out.push_back(row);
    }
    sqlite3_finalize(st);
    return out;
  }
  int64_t number(const std::string& sql) {
    const auto r = rows(sql);
    return r.empty() || r[0].empty() || r[0][0] == "NULL" ? -1 : std::stoll(r[0][0]);
  }

  std::filesystem::path path_;
  sqlite3* db_ = nullptr;
};

TEST_F(GpuReport, KernelSummaryByName) {
  const auto summary = rows("SELECT s.value, COUNT(*), SUM(k.end - k.start) AS total FROM CUPTI_ACTIVITY_KIND_KERNEL k "
                            "JOIN StringIds s ON s.id = k.shortName GROUP BY s.value ORDER BY total DESC");
  ASSERT_FALSE(summary.empty());
  bool decode = false, prefill = false;
  for (const auto& r : summary) {
    decode = decode || r[0].find("decode_kernel") != std::string::npos;
    prefill = prefill || r[0].find("prefill_kernel") != std::string::npos;
    EXPECT_GT(std::stoll(r[2]), 0) << r[0];
  }
  EXPECT_TRUE(decode);
  EXPECT_TRUE(prefill);
  EXPECT_EQ(number("SELECT COUNT(*) FROM CUPTI_ACTIVITY_KIND_KERNEL WHERE registersPerThread = 0 OR blockX = 0 "
                   "OR gridX = 0 OR end < start"),
            0);
}

TEST_F(GpuReport, EveryKernelJoinsItsRuntimeOrDriverLaunch) {
  const auto missing = rows("SELECT s.value, COUNT(*) FROM CUPTI_ACTIVITY_KIND_KERNEL k JOIN StringIds s ON s.id = "
                            "k.shortName WHERE k.correlationId NOT IN (SELECT correlationId FROM "
                            "CUPTI_ACTIVITY_KIND_RUNTIME UNION SELECT correlationId FROM CUPTI_ACTIVITY_KIND_DRIVER) "
                            "GROUP BY s.value");
  for (const auto& r : missing) ADD_FAILURE() << r[1] << " kernels " << r[0] << " join no launch call";
  EXPECT_GT(number("SELECT COUNT(*) FROM CUPTI_ACTIVITY_KIND_KERNEL k JOIN CUPTI_ACTIVITY_KIND_RUNTIME r "
                   "ON r.correlationId = k.correlationId"),
            0);
  // The launch call starts before its kernel and runs on the engine's thread.
  EXPECT_EQ(number("SELECT COUNT(*) FROM CUPTI_ACTIVITY_KIND_KERNEL k JOIN (SELECT * FROM CUPTI_ACTIVITY_KIND_RUNTIME "
                   "UNION ALL SELECT * FROM CUPTI_ACTIVITY_KIND_DRIVER) a ON a.correlationId = k.correlationId "
                   "WHERE a.start > k.start"),
            0);
}

TEST_F(GpuReport, GraphLevelRecordsJoinTheirGraphLaunch) {
  EXPECT_EQ(number("SELECT COUNT(*) FROM CUPTI_ACTIVITY_KIND_GRAPH_TRACE g WHERE NOT EXISTS (SELECT 1 FROM "
                   "CUPTI_ACTIVITY_KIND_RUNTIME r JOIN StringIds n ON n.id = r.nameId WHERE r.correlationId = "
                   "g.correlationId AND n.value LIKE 'cudaGraphLaunch%')"),
            0);
  // A graph launch has either kernel rows or one graph row, never both.
  EXPECT_EQ(number("SELECT COUNT(*) FROM CUPTI_ACTIVITY_KIND_GRAPH_TRACE g JOIN CUPTI_ACTIVITY_KIND_KERNEL k "
                   "ON k.correlationId = g.correlationId"),
            0);
  // The per-request summary says how many steps were recorded which way, and matches the rows.
  EXPECT_EQ(number("SELECT SUM(graphs) FROM device_trace"), number("SELECT COUNT(*) FROM CUPTI_ACTIVITY_KIND_GRAPH_TRACE"));
  EXPECT_EQ(number("SELECT SUM(kernels) FROM device_trace"), number("SELECT COUNT(*) FROM CUPTI_ACTIVITY_KIND_KERNEL"));
  EXPECT_EQ(number("SELECT SUM(dropped_records) FROM device_trace"), 0);
  const auto detail = rows("SELECT kernel_detail_steps, graph_level_steps, graphs FROM device_trace WHERE device_traced = 1");
  ASSERT_FALSE(detail.empty());
  for (const auto& d : detail) {
    if (d[0] == "-1") {
      EXPECT_EQ(d[1], "0");
    } else {
      EXPECT_GE(std::stoll(d[2]), std::stoll(d[1])) << "fewer graph records than graph-level steps";
    }
  }
}

TEST_F(GpuReport, NvtxRangesCarryTheirRequestAndEncloseTheirKernels) {
  EXPECT_EQ(number("SELECT COUNT(*) FROM NVTX_EVENTS WHERE eventType = 75 AND text = 'LazyScope'"), 1);
  EXPECT_GT(number("SELECT COUNT(*) FROM NVTX_EVENTS WHERE eventType = 59"), 0);
  EXPECT_EQ(number("SELECT COUNT(*) FROM NVTX_EVENTS n WHERE n.eventType = 59 AND NOT EXISTS "
                   "(SELECT 1 FROM requests q WHERE q.id = n.int64Value)"),
            0);
  // Every kernel whose launch lies in a decode-step or prefill range ran after that launch, and the
  // range's request is the one whose request range holds it.
  EXPECT_EQ(number("SELECT COUNT(*) FROM NVTX_EVENTS e JOIN CUPTI_ACTIVITY_KIND_RUNTIME r ON r.globalTid = e.globalTid "
                   "AND r.start >= e.start AND r.end <= e.end JOIN CUPTI_ACTIVITY_KIND_KERNEL k ON k.correlationId = "
                   "r.correlationId JOIN NVTX_EVENTS q ON q.eventType = 59 AND q.text LIKE 'request (%' AND "
                   "q.int64Value = e.int64Value WHERE e.eventType = 59 AND r.start < q.start"),
            0);
  EXPECT_GT(number("SELECT COUNT(*) FROM NVTX_EVENTS e JOIN CUPTI_ACTIVITY_KIND_RUNTIME r ON r.globalTid = e.globalTid "
                   "AND r.start >= e.start AND r.end <= e.end JOIN CUPTI_ACTIVITY_KIND_KERNEL k ON k.correlationId = "
                   "r.correlationId WHERE e.eventType = 59 AND e.text LIKE 'decode step%'"),
            0);
}

TEST_F(GpuReport, LoadsBackThroughTheProfiler) {
  const SessionRecording r = load_session_sqlite(path_);
  EXPECT_FALSE(r.kernels.empty());
  EXPECT_FALSE(r.gpus.empty());
  EXPECT_FALSE(r.requests.empty());
}

}  // namespace
}  // namespace lazyscope

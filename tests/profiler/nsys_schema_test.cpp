// Nsight Systems' export tables inside our reports: SQL written for nsys exports (kernel summaries
// by name through StringIds, NVTX ranges, runtime → kernel joins on correlationId, kernels per NVTX
// range) runs unchanged on a report whose CUPTI records were inserted through the recorder API; a CPU
// session's host ranges land in NVTX_EVENTS with the kernel tables present and empty.
#include <gtest/gtest.h>
#include <sqlite3.h>
#include <unistd.h>

#include <chrono>
#include <set>

#include "engine/runtime/session.h"
#include "profiler/session_recorder.h"

namespace lazyscope {
namespace {

std::filesystem::path temp(const std::string& name) {
  return std::filesystem::temp_directory_path() / (std::to_string(getpid()) + "-" + name);
}

int64_t steady_now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// Rows of a query as strings (NULL as "NULL"), every column joined by '|'.
std::vector<std::string> query(const std::filesystem::path& path, const std::string& sql) {
  sqlite3* db = nullptr;
  EXPECT_EQ(sqlite3_open_v2(path.c_str(), &db, SQLITE_OPEN_READONLY, nullptr), SQLITE_OK);
  sqlite3_stmt* st = nullptr;
  std::vector<std::string> rows;
  if (sqlite3_prepare_v2(db, sql.c_str(), -1, &st, nullptr) != SQLITE_OK) {
    ADD_FAILURE() << sqlite3_errmsg(db) << " in: " << sql;
    sqlite3_close(db);
    return rows;
  }
  while (sqlite3_step(st) == SQLITE_ROW) {
    std::string row;
    for (int c = 0; c < sqlite3_column_count(st); ++c) {
      const unsigned char* t = sqlite3_column_text(st, c);
      row += (c ? "|" : "") + std::string(t ? reinterpret_cast<const char*>(t) : "NULL");
    }
    rows.push_back(row);
  }
  sqlite3_finalize(st);
  sqlite3_close(db);
  return rows;
}

const char* kDecodeMangled = "_ZN9lazyscope4cuda12_GLOBAL__N_113decode_kernelILi128ELi4ELb1EEEvNS0_12DecodeParamsE";
const char* kGemm = "sm90_xmma_gemm_bf16bf16_bf16f32";

// One request as a CUDA session would report it: a prefill range that launches a cuBLAS GEMM (driver
// launch) and the decode kernel (runtime launch), then decode step 1 whose two kernels run inside one
// CUDA graph (kernel detail), decode step 2 replaying that graph with one graph-level record, a copy
// back, and a memset. Every range carries the request number 1 as its payload.
DeviceActivity synthetic_activity(int64_t t0, uint32_t tid) {
  DeviceActivity a;
  a.device_traced = true;
  a.dropped_records = 3;
  a.kernel_detail_steps = 1;
  a.graph_level_steps = 1;
  a.ranges = {{"request (lazy)", t0, t0 + 9'000'000, tid, 0, 1},
              {"prefill 64 tokens (lazy)", t0 + 100'000, t0 + 4'000'000, tid, 1, 1},
              {"decode step 1", t0 + 5'000'000, t0 + 8'000'000, tid, 1, 1},
              {"decode step 2", t0 + 8'000'000, t0 + 8'900'000, tid, 1, 1}};
  a.api_calls = {{t0 + 200'000, t0 + 210'000, true, tid, 11, "cuLaunchKernelEx", 0},
                 {t0 + 300'000, t0 + 305'000, false, tid, 12, "cudaLaunchKernel_v7000", 0},
                 {t0 + 3'000'000, t0 + 3'010'000, false, tid, 13, "cudaMemcpyAsync_v3020", 0},
                 {t0 + 5'100'000, t0 + 5'120'000, false, tid, 14, "cudaGraphLaunch_v10000", 0},
                 {t0 + 8'050'000, t0 + 8'070'000, false, tid, 15, "cudaGraphLaunch_v10000", 0}};
  a.graphs = {{t0 + 8'100'000, t0 + 8'800'000, 0, 1, 7, 15, 5}};
  KernelRecord gemm;
  gemm.start_ns = t0 + 400'000;
  gemm.end_ns = t0 + 1'400'000;
  gemm.device_id = 0;
  gemm.context_id = 1;
  gemm.stream_id = 7;
  gemm.correlation_id = 11;
  gemm.mangled_name = kGemm;
  gemm.grid[0] = 132, gemm.grid[1] = 1, gemm.grid[2] = 1;
  gemm.block[0] = 384, gemm.block[1] = 1, gemm.block[2] = 1;
  gemm.registers_per_thread = 168;
  gemm.dynamic_shared_memory = 200 * 1024;
  KernelRecord decode = gemm;
  decode.start_ns = t0 + 1'500'000;
  decode.end_ns = t0 + 1'750'000;
  decode.correlation_id = 12;
  decode.mangled_name = kDecodeMangled;
  decode.grid[0] = 8, decode.grid[1] = 4;
  decode.block[0] = 128;
  decode.registers_per_thread = 64;
  decode.static_shared_memory = 4096;
  decode.dynamic_shared_memory = 0;
  KernelRecord graph_gemm = gemm;
  graph_gemm.start_ns = t0 + 5'200'000;
  graph_gemm.end_ns = t0 + 6'200'000;
  graph_gemm.correlation_id = 14;
  graph_gemm.graph_node_id = 901;
  graph_gemm.graph_id = 5;
  KernelRecord graph_decode = decode;
  graph_decode.start_ns = t0 + 6'300'000;
  graph_decode.end_ns = t0 + 6'500'000;
  graph_decode.correlation_id = 14;
  graph_decode.graph_node_id = 902;
  graph_decode.graph_id = 5;
  a.kernels = {gemm, decode, graph_gemm, graph_decode};
  a.memcpys = {{t0 + 3'100'000, t0 + 3'101'000, 0, 1, 7, 13, 4, 2, 0, 0, 0}};
  a.memsets = {{t0 + 4'100'000, t0 + 4'102'000, 0, 1, 7, 0, 4096, 0, 0, 0}};
  GpuInfo gpu;
  gpu.name = "NVIDIA H200";
  gpu.uuid = "GPU-00000000-0000-0000-0000-000000000001";
  gpu.sm_count = 132;
  gpu.compute_major = 9;
  a.gpus = {gpu};
  return a;
}

class NsysQueries : public ::testing::Test {
 protected:
  void SetUp() override {
    SessionRecorder recorder;
    t0_ = steady_now_ns() + 1'000'000;
    recorder.on_device_activity(synthetic_activity(t0_, 4242));
    RequestFinishedEvent done;
    done.policy = "lazy";
    recorder.on_request_finished(done);
    recording_ = recorder.snapshot();
    path_ = temp("ls-nsys-queries.db");
    save_session_sqlite(recording_, path_);
  }
  void TearDown() override { std::filesystem::remove(path_); }
  int64_t t0_ = 0;
  SessionRecording recording_;
  std::filesystem::path path_;
};

TEST_F(NsysQueries, KernelSummaryByNameThroughStringIds) {
  // The shape of `nsys stats`' kernel summary: GPU time per kernel name, by total descending.
  const auto rows = query(path_,
                          "SELECT s.value AS name, COUNT(*) AS calls, SUM(k.end - k.start) AS total_ns, "
                          "MIN(k.end - k.start), MAX(k.end - k.start) "
                          "FROM CUPTI_ACTIVITY_KIND_KERNEL AS k JOIN StringIds AS s ON s.id = k.shortName "
                          "GROUP BY s.value ORDER BY total_ns DESC");
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_EQ(rows[0], std::string(kGemm) + "|2|2000000|1000000|1000000");
  EXPECT_EQ(rows[1], "decode_kernel|2|450000|200000|250000");
  // demangledName keeps the template arguments and parameters, mangledName the raw symbol.
  const auto names = query(path_,
                           "SELECT DISTINCT d.value, m.value FROM CUPTI_ACTIVITY_KIND_KERNEL k "
                           "JOIN StringIds d ON d.id = k.demangledName JOIN StringIds m ON m.id = k.mangledName "
                           "WHERE k.registersPerThread = 64");
  ASSERT_EQ(names.size(), 1u);
  EXPECT_EQ(names[0], std::string("void lazyscope::cuda::(anonymous namespace)::decode_kernel<128, 4, true>"
                                  "(lazyscope::cuda::DecodeParams)|") + kDecodeMangled);
}

TEST_F(NsysQueries, LaunchConfigurationRegistersAndSharedMemory) {
  const auto rows = query(path_,
                          "SELECT gridX, gridY, gridZ, blockX, blockY, blockZ, registersPerThread, staticSharedMemory, "
                          "dynamicSharedMemory, streamId, deviceId, contextId FROM CUPTI_ACTIVITY_KIND_KERNEL "
                          "ORDER BY start LIMIT 2");
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_EQ(rows[0], "132|1|1|384|1|1|168|0|204800|7|0|1");
  EXPECT_EQ(rows[1], "8|4|1|128|1|1|64|4096|0|7|0|1");
}

TEST_F(NsysQueries, RuntimeAndDriverToKernelJoinOnCorrelationId) {
  // nsys' "CUDA API calls and the kernels they launched" recipe; graph kernels come back under
  // cudaGraphLaunch with their graph node ids; driver calls are in their own table, as in nsys.
  const auto rows = query(path_,
                          "SELECT n.value, r.eventClass, s.value, k.graphNodeId "
                          "FROM CUPTI_ACTIVITY_KIND_KERNEL AS k "
                          "JOIN CUPTI_ACTIVITY_KIND_RUNTIME AS r ON r.correlationId = k.correlationId "
                          "JOIN StringIds AS n ON n.id = r.nameId JOIN StringIds AS s ON s.id = k.shortName "
                          "ORDER BY k.start");
  ASSERT_EQ(rows.size(), 3u);
  EXPECT_EQ(rows[0], "cudaLaunchKernel_v7000|0|decode_kernel|NULL");
  EXPECT_EQ(rows[1], std::string("cudaGraphLaunch_v10000|0|") + kGemm + "|901");
  EXPECT_EQ(rows[2], "cudaGraphLaunch_v10000|0|decode_kernel|902");
  EXPECT_EQ(query(path_, "SELECT n.value, d.eventClass, s.value FROM CUPTI_ACTIVITY_KIND_KERNEL AS k "
                         "JOIN CUPTI_ACTIVITY_KIND_DRIVER AS d ON d.correlationId = k.correlationId "
                         "JOIN StringIds AS n ON n.id = d.nameId JOIN StringIds AS s ON s.id = k.shortName"),
            std::vector<std::string>{std::string("cuLaunchKernelEx|1|") + kGemm});
  // Every kernel joins one of the two API tables.
  EXPECT_EQ(query(path_, "SELECT COUNT(*) FROM CUPTI_ACTIVITY_KIND_KERNEL k WHERE k.correlationId NOT IN "
                         "(SELECT correlationId FROM CUPTI_ACTIVITY_KIND_RUNTIME UNION "
                         "SELECT correlationId FROM CUPTI_ACTIVITY_KIND_DRIVER)"),
            std::vector<std::string>{"0"});
  const auto copies = query(path_,
                            "SELECT n.value, m.bytes, o.label FROM CUPTI_ACTIVITY_KIND_MEMCPY m "
                            "JOIN CUPTI_ACTIVITY_KIND_RUNTIME r ON r.correlationId = m.correlationId "
                            "JOIN StringIds n ON n.id = r.nameId JOIN ENUM_CUDA_MEMCPY_OPER o ON o.id = m.copyKind");
  ASSERT_EQ(copies.size(), 1u);
  EXPECT_EQ(copies[0], "cudaMemcpyAsync_v3020|4|Device-to-Host");
  EXPECT_EQ(query(path_, "SELECT bytes, value FROM CUPTI_ACTIVITY_KIND_MEMSET"), std::vector<std::string>{"4096|0"});
}

TEST_F(NsysQueries, NvtxRangesAndTheKernelsTheyLaunched) {
  const auto domain = query(path_, "SELECT domainId FROM NVTX_EVENTS WHERE eventType = 75 AND text = 'LazyScope'");
  ASSERT_EQ(domain.size(), 1u);
  const auto ranges = query(path_,
                            "SELECT text, end - start, globalTid % 0x1000000, globalTid / 0x1000000 % 0x1000000 "
                            "FROM NVTX_EVENTS WHERE eventType = 59 AND domainId = " + domain[0] + " ORDER BY start");
  const std::string pid = std::to_string(getpid() & 0xFFFFFF);
  ASSERT_EQ(ranges.size(), 4u);
  EXPECT_EQ(ranges[0], "request (lazy)|9000000|4242|" + pid);
  EXPECT_EQ(ranges[1], "prefill 64 tokens (lazy)|3900000|4242|" + pid);
  EXPECT_EQ(ranges[2], "decode step 1|3000000|4242|" + pid);
  EXPECT_EQ(ranges[3], "decode step 2|900000|4242|" + pid);
  // The payload is the request number: NVTX ranges join our requests table.
  EXPECT_EQ(query(path_, "SELECT q.id, q.policy, COUNT(*) FROM NVTX_EVENTS n JOIN requests q ON q.id = n.int64Value "
                         "WHERE n.eventType = 59 GROUP BY q.id"),
            std::vector<std::string>{"1|lazy|4"});
  // Kernels by the innermost range whose thread made their launch call (nsys' NVTX → CUDA projection),
  // through runtime and driver launches alike.
  const auto per_range = query(path_,
                               "SELECT n.text, COUNT(*), SUM(k.end - k.start) FROM NVTX_EVENTS n "
                               "JOIN (SELECT * FROM CUPTI_ACTIVITY_KIND_RUNTIME UNION ALL "
                               "SELECT * FROM CUPTI_ACTIVITY_KIND_DRIVER) r ON r.globalTid = n.globalTid "
                               "AND r.start >= n.start AND r.end <= n.end "
                               "JOIN CUPTI_ACTIVITY_KIND_KERNEL k ON k.correlationId = r.correlationId "
                               "WHERE n.eventType = 59 AND n.text <> 'request (lazy)' GROUP BY n.text ORDER BY n.text");
  ASSERT_EQ(per_range.size(), 2u);
  EXPECT_EQ(per_range[0], "decode step 1|2|1200000");
  EXPECT_EQ(per_range[1], "prefill 64 tokens (lazy)|2|1250000");
  const auto pids = query(path_, "SELECT DISTINCT globalPid / 0x1000000 % 0x1000000 FROM CUPTI_ACTIVITY_KIND_KERNEL");
  EXPECT_EQ(pids, std::vector<std::string>{pid});
}

TEST_F(NsysQueries, TargetInfoAndExportMetadata) {
  EXPECT_EQ(query(path_, "SELECT value FROM META_DATA_EXPORT WHERE name = 'EXPORT_SCHEMA_VERSION'"),
            std::vector<std::string>{"3.28.1"});
  EXPECT_EQ(query(path_, "SELECT value FROM META_DATA_EXPORT WHERE name = 'LAZYSCOPE_CUPTI_DROPPED_RECORDS'"),
            std::vector<std::string>{"3"});
  EXPECT_EQ(query(path_, "SELECT g.name, g.smCount, g.computeMajor, c.cudaId, c.pid = " + std::to_string(getpid()) +
                             " FROM TARGET_INFO_GPU g JOIN TARGET_INFO_CUDA_DEVICE c ON c.gpuId = g.id"),
            std::vector<std::string>{"NVIDIA H200|132|9|0|1"});
  EXPECT_EQ(query(path_, "SELECT request, device_traced, kernels, api_calls, ranges, dropped_records FROM device_trace"),
            std::vector<std::string>{"1|1|4|5|4|3"});
}

TEST_F(NsysQueries, GraphLevelStepsHaveOneGraphTraceRowPerLaunch) {
  // The decode steps past the kernel-detail ones: one row per cudaGraphLaunch, joined on correlationId.
  EXPECT_EQ(query(path_, "SELECT n.value, g.end - g.start, g.graphId, g.streamId FROM CUPTI_ACTIVITY_KIND_GRAPH_TRACE g "
                         "JOIN CUPTI_ACTIVITY_KIND_RUNTIME r ON r.correlationId = g.correlationId "
                         "JOIN StringIds n ON n.id = r.nameId"),
            std::vector<std::string>{"cudaGraphLaunch_v10000|700000|5|7"});
  // Which steps have kernel detail, per request and in the export metadata.
  EXPECT_EQ(query(path_, "SELECT graphs, kernel_detail_steps, graph_level_steps FROM device_trace"),
            std::vector<std::string>{"1|1|1"});
  const auto detail = query(path_, "SELECT value FROM META_DATA_EXPORT WHERE name = 'LAZYSCOPE_KERNEL_DETAIL'");
  ASSERT_EQ(detail.size(), 1u);
  EXPECT_NE(detail[0].find("CUPTI_ACTIVITY_KIND_GRAPH_TRACE"), std::string::npos) << detail[0];
  // The graph launch lies inside the range of the step it replays (NVTX → graph projection).
  EXPECT_EQ(query(path_, "SELECT e.text FROM NVTX_EVENTS e JOIN CUPTI_ACTIVITY_KIND_RUNTIME r ON r.globalTid = "
                         "e.globalTid AND r.start >= e.start AND r.end <= e.end JOIN CUPTI_ACTIVITY_KIND_GRAPH_TRACE g "
                         "ON g.correlationId = r.correlationId WHERE e.eventType = 59 AND e.text LIKE 'decode%'"),
            std::vector<std::string>{"decode step 2"});
  // The timeline (spans) shows it on the GPU as a "graph" span.
  EXPECT_EQ(query(path_, "SELECT name, ROUND(duration_ms, 3) FROM spans WHERE category = 'graph'"),
            std::vector<std::string>{"CUDA graph 5|0.7"});
}

TEST_F(NsysQueries, ColumnsCarryNsysNamesAndTypes) {
  // A sample of the columns nsys-based tools read, with the types its export declares.
  const auto kernel = query(path_, "SELECT name, type FROM pragma_table_info('CUPTI_ACTIVITY_KIND_KERNEL')");
  const std::set<std::string> columns(kernel.begin(), kernel.end());
  for (const char* c : {"start|INTEGER", "end|INTEGER", "deviceId|INTEGER", "contextId|INTEGER", "streamId|INTEGER",
                        "correlationId|INTEGER", "globalPid|INTEGER", "demangledName|INTEGER", "shortName|INTEGER",
                        "mangledName|INTEGER", "gridX|INTEGER", "blockZ|INTEGER", "registersPerThread|INTEGER",
                        "staticSharedMemory|INTEGER", "dynamicSharedMemory|INTEGER", "graphNodeId|INTEGER"}) {
    EXPECT_TRUE(columns.count(c)) << c;
  }
  const auto nvtx = query(path_, "SELECT name, type FROM pragma_table_info('NVTX_EVENTS')");
  const std::set<std::string> nvtx_columns(nvtx.begin(), nvtx.end());
  for (const char* c : {"start|INTEGER", "end|INTEGER", "eventType|INTEGER", "text|TEXT", "textId|INTEGER",
                        "globalTid|INTEGER", "domainId|INTEGER", "rangeId|INTEGER"}) {
    EXPECT_TRUE(nvtx_columns.count(c)) << c;
  }
}

TEST_F(NsysQueries, JoinableWithOurTablesByTimeAndRequest) {
  // The nsys tables share the origin of our *_ms columns: kernels fall inside their request's span.
  const auto rows = query(path_,
                          "SELECT s.request, COUNT(*) FROM CUPTI_ACTIVITY_KIND_KERNEL k JOIN spans s "
                          "ON s.category = 'range' AND s.name = 'request (lazy)' "
                          "AND k.start >= CAST(s.start_ms * 1e6 AS INTEGER) - 1 "
                          "AND k.end <= CAST((s.start_ms + s.duration_ms) * 1e6 AS INTEGER) + 1 GROUP BY s.request");
  EXPECT_EQ(rows, std::vector<std::string>{"1|4"});
}

TEST_F(NsysQueries, RecordsSurviveALoadAndSaveAgain) {
  const SessionRecording back = load_session_sqlite(path_);
  ASSERT_EQ(back.kernels.size(), 4u);
  EXPECT_EQ(back.kernels[1].display_name, "decode_kernel<128, 4, true>");
  EXPECT_EQ(back.kernels[3].graph_node_id, 902u);
  EXPECT_EQ(back.api_calls.size(), 5u);
  EXPECT_TRUE(back.api_calls[0].driver);
  EXPECT_FALSE(back.api_calls[1].driver);
  EXPECT_EQ(back.ranges.size(), 4u);
  EXPECT_EQ(back.ranges[3].request, 1);
  EXPECT_EQ(back.ranges[3].range.request_id, 1);
  ASSERT_EQ(back.graphs.size(), 1u);
  EXPECT_EQ(back.graphs[0].correlation_id, 15u);
  EXPECT_EQ(back.graphs[0].end_ns - back.graphs[0].start_ns, 700'000);
  ASSERT_EQ(back.traces.size(), 1u);
  EXPECT_EQ(back.traces[0].dropped_records, 3u);
  EXPECT_EQ(back.traces[0].kernel_detail_steps, 1);
  EXPECT_EQ(back.traces[0].graph_level_steps, 1);
  EXPECT_EQ(back.process_id, uint32_t(getpid()));
  const auto again = temp("ls-nsys-again.db");
  save_session_sqlite(back, again);
  EXPECT_EQ(query(again, "SELECT s.value, COUNT(*) FROM CUPTI_ACTIVITY_KIND_KERNEL k JOIN StringIds s "
                         "ON s.id = k.shortName GROUP BY s.value ORDER BY 1"),
            (std::vector<std::string>{"decode_kernel|2", std::string(kGemm) + "|2"}));
  EXPECT_EQ(query(again, "SELECT COUNT(*), MIN(int64Value), MAX(int64Value) FROM NVTX_EVENTS WHERE eventType = 59"),
            std::vector<std::string>{"4|1|1"});
  EXPECT_EQ(query(again, "SELECT COUNT(*) FROM CUPTI_ACTIVITY_KIND_DRIVER"), std::vector<std::string>{"1"});
  EXPECT_EQ(query(again, "SELECT COUNT(*) FROM CUPTI_ACTIVITY_KIND_GRAPH_TRACE"), std::vector<std::string>{"1"});
  std::filesystem::remove(again);
}

TEST(NsysSchema, CpuSessionRangesGoToNvtxEventsAndKernelTablesAreEmpty) {
  SessionRecorder rec;
  SessionOptions o;
  o.synthetic = "tiny";
  o.backend = BackendKind::Cpu;
  Session session(o, &rec);
  Request r;
  r.document_ids = {std::vector<int32_t>(18, 30), std::vector<int32_t>(7, 31)};
  r.query_ids = std::vector<int32_t>{4, 5};
  r.max_new_tokens = 3;
  session.submit(r, RunOptions{});
  RunOptions second;
  second.policy = Policy::Materialized;
  session.submit(r, second);
  const auto path = temp("ls-nsys-cpu.db");
  save_session_sqlite(rec.snapshot(), path);
  // Each range's payload is its request's number: the two requests' ranges join their requests rows.
  EXPECT_EQ(query(path, "SELECT q.id, q.policy, SUM(n.text LIKE 'request (%'), SUM(n.text LIKE 'decode step%') "
                        "FROM NVTX_EVENTS n JOIN requests q ON q.id = n.int64Value WHERE n.eventType = 59 "
                        "GROUP BY q.id ORDER BY q.id"),
            (std::vector<std::string>{"1|lazy|1|2", "2|materialized|1|2"}));
  EXPECT_EQ(query(path, "SELECT COUNT(*) FROM NVTX_EVENTS WHERE eventType = 59 AND int64Value IS NULL"),
            std::vector<std::string>{"0"});
  const auto ranges = query(path, "SELECT text FROM NVTX_EVENTS WHERE eventType = 59 AND int64Value = 1 ORDER BY start");
  ASSERT_FALSE(ranges.empty());
  EXPECT_EQ(ranges.front(), "request (lazy)");
  int encodes = 0, prefill = 0, decode = 0;
  for (const std::string& t : ranges) {
    encodes += t.rfind("encode segment", 0) == 0;
    prefill += t.rfind("prefill", 0) == 0;
    decode += t.rfind("decode step", 0) == 0;
  }
  EXPECT_EQ(encodes, 2);
  EXPECT_EQ(prefill, 1);
  EXPECT_EQ(decode, 2);  // three tokens: the prefill gives the first
  // Every range lies inside its request's range, and each has an end after its start.
  EXPECT_EQ(query(path, "SELECT COUNT(*) FROM NVTX_EVENTS n, NVTX_EVENTS q WHERE q.text LIKE 'request (%' "
                        "AND q.int64Value = n.int64Value AND n.eventType = 59 "
                        "AND (n.start < q.start OR n.end > q.end OR n.end < n.start)"),
            std::vector<std::string>{"0"});
  for (const char* table : {"CUPTI_ACTIVITY_KIND_KERNEL", "CUPTI_ACTIVITY_KIND_MEMCPY", "CUPTI_ACTIVITY_KIND_MEMSET",
                            "CUPTI_ACTIVITY_KIND_RUNTIME", "CUPTI_ACTIVITY_KIND_DRIVER", "CUPTI_ACTIVITY_KIND_GRAPH_TRACE",
                            "TARGET_INFO_GPU"}) {
    EXPECT_EQ(query(path, std::string("SELECT COUNT(*) FROM ") + table), std::vector<std::string>{"0"}) << table;
  }
  EXPECT_EQ(query(path, "SELECT device_traced, kernels FROM device_trace"), (std::vector<std::string>{"0|0", "0|0"}));
  EXPECT_EQ(query(path, "SELECT value FROM META_DATA_EXPORT WHERE name = 'LAZYSCOPE_DEVICE_TRACE'"),
            std::vector<std::string>{"host ranges only (no device trace)"});
  std::filesystem::remove(path);
}

}  // namespace
}  // namespace lazyscope

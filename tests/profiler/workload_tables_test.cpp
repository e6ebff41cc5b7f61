// Workload runs in a session report: what save_workload_sqlite writes, load_workload_sqlite reads
// back unchanged (runs, requests, steps, prompts); a report without them reads as none.
#include "profiler/workload_tables.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <fstream>

#include "base/error.h"
#include "engine/serving/serving_engine.h"
#include "profiler/session_recorder.h"

namespace lazyscope {
namespace {

std::filesystem::path temp_file(const std::string& name) {
  return std::filesystem::temp_directory_path() / ("ls-wt-" + std::to_string(getpid()) + "-" + name);
}

struct Served {
  Workload workload;
  std::vector<ServingResult> runs;
};

const Served& served() {
  static const Served s = [] {
    Served out;
    WorkloadOptions o;
    o.documents = 10;
    o.doc_tokens = 40;
    o.docs_per_request = 3;
    o.requests = 30;
    o.concurrency = 4;
    o.query_tokens = 8;
    o.output_tokens = 3;
    o.prefix_tokens = 5;
    ServingConfig config;
    config.synthetic = "tiny";
    ServingEngine engine(config);
    o.vocab_size = engine.shape().vocab_size;
    out.workload = make_workload(o);
    SchedulerOptions so;
    so.keep_samples = true;
    for (Policy p : {Policy::Materialized, Policy::Lazy}) {
      out.runs.push_back(engine.run(out.workload, 20 * int64_t(engine.bytes_per_block()) * 16, p, so));
    }
    return out;
  }();
  return s;
}

TEST(WorkloadTables, SavedRunsReadBackUnchanged) {
  const Served& s = served();
  const std::filesystem::path path = temp_file("roundtrip.db");
  const WorkloadPrompts prompts = workload_prompts(s.workload);
  save_workload_sqlite({{"workload.seed", "1"}}, s.runs, path, &prompts);
  const std::optional<WorkloadReport> back = load_workload_sqlite(path);
  ASSERT_TRUE(back.has_value());
  EXPECT_EQ(back->metadata.at("workload.seed"), "1");
  EXPECT_EQ(back->metadata.at("kind"), "workload");
  ASSERT_EQ(back->runs.size(), s.runs.size());
  for (std::size_t i = 0; i < s.runs.size(); ++i) {
    const ServingResult& a = s.runs[i];
    const ServingResult& b = back->runs[i];
    EXPECT_EQ(a.policy, b.policy);
    EXPECT_EQ(a.kv_budget_bytes, b.kv_budget_bytes);
    EXPECT_EQ(a.num_blocks, b.num_blocks);
    EXPECT_DOUBLE_EQ(a.hit_ratio_tokens, b.hit_ratio_tokens);
    EXPECT_DOUBLE_EQ(a.hit_ratio_documents, b.hit_ratio_documents);
    EXPECT_DOUBLE_EQ(a.ttft_ms.p50, b.ttft_ms.p50);
    EXPECT_DOUBLE_EQ(a.ttft_ms.p99, b.ttft_ms.p99);
    EXPECT_DOUBLE_EQ(a.tpot_ms.p90, b.tpot_ms.p90);
    EXPECT_DOUBLE_EQ(a.e2e_ms.mean, b.e2e_ms.mean);
    EXPECT_DOUBLE_EQ(a.output_tok_s, b.output_tok_s);
    EXPECT_DOUBLE_EQ(a.throughput_tok_s, b.throughput_tok_s);
    EXPECT_EQ(a.bytes_copied, b.bytes_copied);
    EXPECT_EQ(a.evictions, b.evictions);
    EXPECT_EQ(a.peak_blocks, b.peak_blocks);
    ASSERT_EQ(a.records.size(), b.records.size());
    for (std::size_t r = 0; r < a.records.size(); ++r) {
      EXPECT_EQ(a.records[r].index, b.records[r].index);
      EXPECT_DOUBLE_EQ(a.records[r].first_token_s, b.records[r].first_token_s);
      EXPECT_EQ(a.records[r].document_hits, b.records[r].document_hits);
      EXPECT_EQ(a.records[r].cached_document_tokens, b.records[r].cached_document_tokens);
      EXPECT_EQ(a.records[r].bytes_copied, b.records[r].bytes_copied);
    }
    ASSERT_EQ(a.samples.size(), b.samples.size());
    ASSERT_FALSE(a.samples.empty());
    EXPECT_EQ(a.samples.back().blocks_in_use, b.samples.back().blocks_in_use);
    EXPECT_DOUBLE_EQ(a.samples.back().t_s, b.samples.back().t_s);
  }
  // The prompts: every request's documents, starts and shifts.
  EXPECT_EQ(back->prompts.prefix_tokens, 5);
  ASSERT_EQ(back->prompts.documents.size(), 10u);
  ASSERT_EQ(back->prompts.placements.size(), 30u * 3u);
  const WorkloadPlacementRow& p = back->prompts.placements[4];  // request 1, slot 1
  EXPECT_EQ(p.request, 1);
  EXPECT_EQ(p.slot, 1);
  EXPECT_EQ(p.document, s.workload.requests[1].documents[1]);
  EXPECT_EQ(p.start, 5 + 40);
  EXPECT_EQ(p.shift, 40);
  EXPECT_EQ(p.tokens, 40);
  std::filesystem::remove(path);
}

TEST(WorkloadTables, SessionTablesStayBesideTheWorkload) {
  const Served& s = served();
  SessionRecording session;
  session.metadata["model"] = "m";
  RecordedRequest rr;
  rr.id = 7;
  rr.event.policy = "lazy";
  rr.event.generated_tokens = 2;
  session.requests.push_back(rr);
  const std::filesystem::path path = temp_file("merged.db");
  save_workload_sqlite({}, s.runs, path, nullptr, &session);
  const SessionRecording back = load_session_sqlite(path);
  EXPECT_EQ(back.metadata.at("model"), "m");
  ASSERT_GT(back.requests.size(), 1u);
  EXPECT_EQ(back.requests.front().id, 7);
  EXPECT_GT(back.requests[1].id, 7);  // workload requests numbered after the session's
  const auto w = load_workload_sqlite(path);
  ASSERT_TRUE(w.has_value());
  EXPECT_TRUE(w->prompts.placements.empty());
  std::filesystem::remove(path);
}

TEST(WorkloadTables, ReportWithoutWorkloadReadsAsNoneAndBadFilesAreNamed) {
  const std::filesystem::path path = temp_file("plain.db");
  save_session_sqlite(SessionRecording{}, path);
  EXPECT_FALSE(load_workload_sqlite(path).has_value());
  std::filesystem::remove(path);
  const std::filesystem::path junk = temp_file("junk.db");
  std::ofstream(junk) << "not a database at all, just text";
  try {
    (void)load_workload_sqlite(junk);
    ADD_FAILURE() << "a text file read as a report";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(junk.string()), std::string::npos) << e.what();
  }
  std::filesystem::remove(junk);
  EXPECT_THROW((void)load_workload_sqlite(temp_file("missing.db")), Error);
}

}  // namespace
}  // namespace lazyscope

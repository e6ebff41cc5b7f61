// lazyscope-cli workload: the table, the --json shape, the session report, and clear errors.
#include <gtest/gtest.h>

#include <array>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <string>

namespace {

struct Outcome {
  int status = -1;
  std::string output;
};

Outcome run(const std::string& args) {
  Outcome o;
  FILE* pipe = popen((std::string(LAZYSCOPE_CLI) + " workload " + args + " 2>&1").c_str(), "r");
  if (!pipe) return o;
  std::array<char, 4096> buffer;
  while (fgets(buffer.data(), buffer.size(), pipe)) o.output += buffer.data();
  const int status = pclose(pipe);
  o.status = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return o;
}

// The small accounting workload's options, with `changes` replacing or adding some.
std::string small(const std::map<std::string, std::string>& changes = {}) {
  std::map<std::string, std::string> o = {
      {"--backend", "accounting"}, {"--shape", "tiny"},          {"--documents", "12"},
      {"--doc-tokens", "48"},      {"--docs-per-request", "3"},  {"--requests", "40"},
      {"--concurrency", "4"},      {"--query-tokens", "8"},      {"--output-tokens", "4"},
      {"--kv-budget", "512KiB"}};
  for (const auto& [k, v] : changes) o[k] = v;
  std::string args;
  for (const auto& [k, v] : o) {
    if (!v.empty()) args += " " + k + " " + v;
  }
  return args;
}
const std::string kSmall = small();

TEST(WorkloadCli, JsonHasEveryPolicyAndTheDocumentedFields) {
  const std::string json = (std::filesystem::temp_directory_path() / ("ls-workload-" + std::to_string(getpid()) + ".json")).string();
  const Outcome o = run(kSmall + " --json " + json);
  ASSERT_EQ(o.status, 0) << o.output;
  EXPECT_NE(o.output.find("lazy vs materialized"), std::string::npos) << o.output;
  std::ifstream in(json);
  const nlohmann::json j = nlohmann::json::parse(in);
  EXPECT_EQ(j["config"]["documents"], 12);
  EXPECT_EQ(j["config"]["layout"], "zipf");
  ASSERT_EQ(j["results"].size(), 5u);
  std::vector<std::string> policies;
  for (const auto& r : j["results"]) {
    policies.push_back(r["policy"]);
    for (const char* key : {"mode", "kv_budget_bytes", "requests", "hit_ratio_tokens", "hit_ratio_documents",
                            "throughput_tok_s", "output_tok_s", "bytes_copied", "evictions", "preemptions",
                            "peak_blocks", "wall_s"}) {
      EXPECT_TRUE(r.contains(key)) << key;
    }
    for (const char* key : {"p50", "p90", "p99", "mean"}) {
      EXPECT_TRUE(r["ttft_ms"].contains(key));
      EXPECT_TRUE(r["tpot_ms"].contains(key));
    }
    EXPECT_EQ(r["requests"], 40);
    EXPECT_EQ(r["kv_budget_bytes"], 512 * 1024);
    EXPECT_GE(r["hit_ratio_tokens"].get<double>(), 0.0);
    EXPECT_LE(r["hit_ratio_tokens"].get<double>(), 1.0);
    EXPECT_GT(r["ttft_ms"]["p50"].get<double>(), 0.0);
  }
  EXPECT_EQ(policies, (std::vector<std::string>{"none", "prefix", "positional", "materialized", "lazy"}));
  std::filesystem::remove(json);
}

TEST(WorkloadCli, SweepGivesARowPerBudgetAndPolicy) {
  const Outcome o = run(small({{"--kv-budget", ""}, {"--policies", "materialized,lazy"}, {"--sweep-kv-budget", "512KiB,1MiB,unlimited"}}));
  ASSERT_EQ(o.status, 0) << o.output;
  EXPECT_NE(o.output.find("512KiB     lazy"), std::string::npos) << o.output;
  EXPECT_NE(o.output.find("unlimited  materialized"), std::string::npos) << o.output;
  EXPECT_NE(o.output.find("unlimited  lazy"), std::string::npos) << o.output;
  EXPECT_NE(o.output.find("1MiB       lazy"), std::string::npos) << o.output;
}

TEST(WorkloadCli, ARowThatCannotFitIsReportedAndTheOthersRun) {
  const Outcome o = run(small({{"--kv-budget", ""}, {"--policies", "positional,lazy"}, {"--sweep-kv-budget", "64KiB,512KiB"}}));
  EXPECT_NE(o.status, 0) << o.output;
  EXPECT_NE(o.output.find("64KiB      positional    cannot serve this workload: KV budget of"), std::string::npos) << o.output;
  EXPECT_NE(o.output.find("64KiB      lazy "), std::string::npos) << o.output;
  EXPECT_NE(o.output.find("512KiB     positional "), std::string::npos) << o.output;
  EXPECT_NE(o.output.find("1 of 4 runs could not serve the workload"), std::string::npos) << o.output;
}

TEST(WorkloadCli, RecordWritesWorkloadTables) {
  const std::string db = (std::filesystem::temp_directory_path() / ("ls-workload-" + std::to_string(getpid()) + ".sqlite")).string();
  const Outcome o = run(kSmall + " --policies lazy --record " + db);
  ASSERT_EQ(o.status, 0) << o.output;
  ASSERT_TRUE(std::filesystem::exists(db));
  std::ifstream in(db, std::ios::binary);
  const std::string bytes((std::istreambuf_iterator<char>(in)), {});
  for (const char* table : {"workload_runs", "workload_requests", "workload_steps", "CREATE TABLE requests"}) {
    EXPECT_NE(bytes.find(table), std::string::npos) << table;
  }
  std::filesystem::remove(db);
}

TEST(WorkloadCli, BadOptionsAreClearErrors) {
  struct Case {
    std::string args, expect;
  };
  const std::vector<Case> cases = {
      {small({{"--zipf", "-2"}}), "--zipf: -2 is outside the valid range 0..10"},
      {small({{"--docs-per-request", "40"}}), "--docs-per-request must be between 1 and 12"},
      {small({{"--requests", "0"}}), "1..1000000"},
      {small({{"--json", "/etc/hostname"}}), "--json"},
      {small({{"--kv-budget", "lots"}}), "--kv-budget: 'lots' is not a KV budget"},
      {small({{"--layout", "ring"}}), "unknown --layout 'ring' (expected zipf or window)"},
      {small({{"--policies", "lazy,fast"}}), "--policies: unknown policy 'fast'"},
      {small({{"--rate", "5"}}), "give --concurrency (closed loop) or --rate (open loop), not both"},
      {small({{"--backend", "tpu"}}), "--backend: unknown backend 'tpu'"},
      {small({{"--preset", "fast"}}), "--preset: unknown preset 'fast'"},
      {small({{"--kv-budget", "64KiB"}}), "cannot hold request 0"},
      {small({{"--shape", "huge"}}), "unknown model shape 'huge'"},
      {small({{"--backend", "cpu"}, {"--kv-budget", "unlimited"}}), "an unlimited --kv-budget needs --backend accounting"},
  };
  for (const Case& c : cases) {
    const Outcome o = run(c.args);
    EXPECT_NE(o.status, 0) << c.args;
    EXPECT_NE(o.output.find(c.expect), std::string::npos) << c.args << "\n" << o.output;
  }
}

TEST(WorkloadCli, CorpusTraceRecordsItsConfigAndServesEveryQuestion) {
  const std::string json = (std::filesystem::temp_directory_path() / ("ls-workload-trace-" + std::to_string(getpid()) + ".json")).string();
  const Outcome o = run("--corpus sample --trace questions --top-k 3 --concurrency 4 --output-tokens 2 "
                        "--policies materialized,lazy --kv-budget 256MiB --json " + json);
  ASSERT_EQ(o.status, 0) << o.output;
  EXPECT_NE(o.output.find("177 questions"), std::string::npos) << o.output;
  std::ifstream in(json);
  const nlohmann::json j = nlohmann::json::parse(in);
  EXPECT_EQ(j["config"]["corpus"], "sample");
  EXPECT_EQ(j["config"]["trace"], "questions");
  EXPECT_EQ(j["config"]["top_k"], 3);
  EXPECT_EQ(j["config"]["requests"], 177);
  EXPECT_EQ(j["config"]["doc_order"], "retrieved");
  EXPECT_FALSE(j["config"]["tokenizer"].get<std::string>().empty());
  ASSERT_EQ(j["results"].size(), 2u);
  for (const auto& r : j["results"]) {
    EXPECT_EQ(r["requests"], 177);
    EXPECT_GT(r["hit_ratio_documents"].get<double>(), 0.0);
  }
  std::filesystem::remove(json);
  // --requests takes the first questions.
  const Outcome first = run("--corpus sample --requests 12 --policies lazy --kv-budget 256MiB");
  ASSERT_EQ(first.status, 0) << first.output;
  EXPECT_NE(first.output.find("12 questions"), std::string::npos) << first.output;
}

TEST(WorkloadCli, BadCorpusOptionsAreClearErrors) {
  struct Case {
    std::string args, expect;
  };
  const std::vector<Case> cases = {
      {"--corpus sample --top-k 0", "--top-k must be between 1 and 64 (got 0)"},
      {"--corpus sample --top-k 65", "--top-k must be between 1 and 64 (got 65)"},
      {"--corpus sample --trace bm25", "unknown --trace 'bm25'"},
      {"--trace zipf", "--trace needs --corpus STORE|sample"},
      {"--top-k 3", "--top-k needs --corpus STORE|sample"},
      {"--corpus /no/such/store.db", "no such corpus store"},
      {"--corpus sample --doc-tokens 64", "--doc-tokens does not apply to --corpus"},
      {"--corpus sample --zipf 1.2", "--zipf does not apply to --corpus with --trace questions"},
      {"--corpus sample --trace zipf --top-k 2", "--top-k does not apply to --corpus with --trace zipf"},
      {"--corpus sample --preset paper", "give --preset or --corpus, not both"},
      {"--corpus sample --questions /no/such/questions.jsonl", "/no/such/questions.jsonl"},
  };
  for (const Case& c : cases) {
    const Outcome o = run(c.args + " --policies lazy");
    EXPECT_NE(o.status, 0) << c.args;
    EXPECT_NE(o.output.find(c.expect), std::string::npos) << c.args << "\n" << o.output;
  }
}

}  // namespace

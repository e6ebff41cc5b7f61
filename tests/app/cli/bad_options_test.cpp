// Every numeric option has a stated range checked before work starts: out-of-range values, NaN
// and infinities end the command at once with an error naming the option and the range.
// Outputs never replace an input or a file of another kind.
#include <gtest/gtest.h>
#include <unistd.h>

#include <array>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

namespace {

namespace fs = std::filesystem;

struct Outcome {
  int status = -1;
  std::string output;
  double seconds = 0;
};

// `timeout` turns a hang into exit status 124, so a regression fails instead of stalling the suite.
Outcome run(const std::string& args) {
  Outcome o;
  const auto t0 = std::chrono::steady_clock::now();
  FILE* pipe =
      popen(("timeout 60 " + std::string(LAZYSCOPE_CLI) + " " + args + " 2>&1").c_str(), "r");
  if (!pipe) return o;
  std::array<char, 4096> buffer;
  while (fgets(buffer.data(), buffer.size(), pipe)) o.output += buffer.data();
  const int status = pclose(pipe);
  o.status = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  o.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return o;
}

void expect_refused(const std::string& args, const std::string& option, const std::string& range) {
  SCOPED_TRACE(args);
  const Outcome o = run(args);
  EXPECT_NE(o.status, 0) << o.output;
  EXPECT_NE(o.status, 124) << "timed out: " << o.output;
  EXPECT_LT(o.status, 128) << "killed by a signal: " << o.output;
  EXPECT_NE(o.output.find(option), std::string::npos) << o.output;
  EXPECT_NE(o.output.find(range), std::string::npos) << o.output;
  EXPECT_LT(o.seconds, 20.0) << "the check did not run before the work";
}

TEST(BadOptions, CacheDemoRefusesOutOfRangeValues) {
  expect_refused("cache-demo --block-size 0", "--block-size", "1..1024");
  expect_refused("cache-demo --block-size -3", "--block-size", "1..1024");
  expect_refused("cache-demo --zipf nan", "--zipf", "0..10");
  expect_refused("cache-demo --zipf inf", "--zipf", "0..10");
  expect_refused("cache-demo --zipf -1", "--zipf", "0..10");
  expect_refused("cache-demo --documents 2000000000", "--documents", "1..20000");
  expect_refused("cache-demo --documents 0", "--documents", "1..20000");
  expect_refused("cache-demo --requests 100000000", "--requests", "1..10000");
  expect_refused("cache-demo --docs-per-request 0", "--docs-per-request", "1..64");
  expect_refused("cache-demo --kv-budget 1e30TiB", "1e30TiB", "too large");
  expect_refused("cache-demo --kv-budget 1KiB", "--kv-budget", "valid range is 1..");
}

TEST(BadOptions, CacheDemoWithASteepZipfEnds) {
  // Every request wants 64 of 64 documents while almost all popularity sits on the first one.
  const Outcome o =
      run("cache-demo --documents 64 --docs-per-request 64 --requests 4 --zipf 10 --shape tiny");
  EXPECT_EQ(o.status, 0) << o.output;
  EXPECT_NE(o.output.find("lazy"), std::string::npos) << o.output;
}

TEST(BadOptions, CorpusOptionsHaveRanges) {
  expect_refused("corpus search -k 0 river", "-k", "1..10000");
  expect_refused("corpus questions --limit -1", "--limit", "0..1000000000");
  expect_refused("corpus import x.jsonl --out y.db --chunk-tokens -5", "--chunk-tokens",
                 "0..1000000");
}

class OutputsNeverOverwrite : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("lazyscope-cli-guard-" + std::to_string(::getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    std::ofstream(dir_ / "passages.jsonl")
        << R"({"id":"p1","title":"Lune","text":"The Lune flows past Carrow."})"
        << "\n";
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string read(const fs::path& p) {
    std::ifstream in(p, std::ios::binary);
    return std::string((std::istreambuf_iterator<char>(in)), {});
  }
  fs::path dir_;
};

TEST_F(OutputsNeverOverwrite, CorpusImportOverItsOwnSource) {
  const fs::path source = dir_ / "passages.jsonl";
  const std::string before = read(source);
  const Outcome o =
      run("corpus import " + source.string() + " --format jsonl --out " + source.string());
  EXPECT_NE(o.status, 0) << o.output;
  EXPECT_NE(o.output.find("refusing"), std::string::npos) << o.output;
  EXPECT_EQ(read(source), before);
}

TEST_F(OutputsNeverOverwrite, SessionTraceOverItsReportOrAForeignFile) {
  const fs::path store = dir_ / "corpus.db";
  ASSERT_EQ(run("corpus import " + (dir_ / "passages.jsonl").string() + " --format jsonl --out " +
                store.string())
                .status,
            0);
  const std::string request = (dir_ / "r.json").string();
  std::ofstream(request)
      << R"({"prefix_ids":[1,2],"document_ids":[[5,6,7]],"query_ids":[8],"max_new_tokens":2})";
  const fs::path report = dir_ / "s.db";
  const Outcome made = run("generate --synthetic tiny --backend cpu --request " + request +
                           " --record " + report.string());
  ASSERT_EQ(made.status, 0) << made.output;
  const std::string report_bytes = read(report), store_bytes = read(store),
                    request_bytes = read(request);

  Outcome o = run("session trace " + report.string() + " --out " + report.string());
  EXPECT_NE(o.status, 0) << o.output;
  EXPECT_NE(o.output.find("FILE input"), std::string::npos) << o.output;
  o = run("session trace " + report.string() + " --out " + store.string());
  EXPECT_NE(o.status, 0) << o.output;
  EXPECT_NE(o.output.find("not a Chrome trace"), std::string::npos) << o.output;
  o = run("session trace " + report.string() + " --out " + request);
  EXPECT_NE(o.status, 0) << o.output;
  EXPECT_EQ(read(report), report_bytes);
  EXPECT_EQ(read(store), store_bytes);
  EXPECT_EQ(read(request), request_bytes);

  // Our own kind is replaced, atomically.
  const fs::path trace = dir_ / "t.json";
  ASSERT_EQ(run("session trace " + report.string() + " --out " + trace.string()).status, 0);
  o = run("session trace " + report.string() + " --out " + trace.string());
  EXPECT_EQ(o.status, 0) << o.output;
  EXPECT_NE(read(trace).find("traceEvents"), std::string::npos);
}

TEST_F(OutputsNeverOverwrite, GenerateRecordOverItsRequestACorpusOrItsOwnDump) {
  const fs::path store = dir_ / "corpus.db";
  ASSERT_EQ(run("corpus import " + (dir_ / "passages.jsonl").string() + " --format jsonl --out " +
                store.string())
                .status,
            0);
  const fs::path request = dir_ / "r.json";
  std::ofstream(request)
      << R"({"prefix_ids":[1,2],"document_ids":[[5,6,7]],"query_ids":[8],"max_new_tokens":2})";
  const std::string request_bytes = read(request), store_bytes = read(store);
  const std::string generate =
      "generate --synthetic tiny --backend cpu --request " + request.string();

  Outcome o = run(generate + " --record " + request.string());
  EXPECT_NE(o.status, 0) << o.output;
  EXPECT_NE(o.output.find("--request input"), std::string::npos) << o.output;
  o = run(generate + " --record " + store.string());
  EXPECT_NE(o.status, 0) << o.output;
  EXPECT_NE(o.output.find("not a session report"), std::string::npos) << o.output;
  o = run(generate + " --record " + (dir_ / "x.json").string() + " --dump-logits " +
          (dir_ / "x.json").string());
  EXPECT_NE(o.status, 0) << o.output;
  EXPECT_NE(o.output.find("give each output its own file"), std::string::npos) << o.output;
  o = run(generate + " --dump-logits " + store.string());
  EXPECT_NE(o.status, 0) << o.output;
  EXPECT_NE(o.output.find("not a logits dump"), std::string::npos) << o.output;
  EXPECT_EQ(read(request), request_bytes);
  EXPECT_EQ(read(store), store_bytes);

  // Our own kinds are replaced.
  const fs::path report = dir_ / "s.db", dump = dir_ / "d.json";
  for (int i = 0; i < 2; ++i) {
    o = run(generate + " --record " + report.string() + " --dump-logits " + dump.string());
    EXPECT_EQ(o.status, 0) << o.output;
  }
  EXPECT_NE(read(dump).find("step_logits"), std::string::npos);
}

TEST(BadOptions, GenerateOptionsHaveRanges) {
  expect_refused("generate --synthetic tiny --request r.json --max-new-tokens 1000000000",
                 "--max-new-tokens", "0..1000000");
  expect_refused("generate --synthetic tiny --request r.json --block-size 0", "--block-size",
                 "1..1024");
  expect_refused("generate --synthetic tiny --request r.json --threads -2", "--threads", "0..4096");
}

TEST(BadOptions, EvalOptionsHaveRanges) {
  expect_refused("eval --model tiny -k 0", "-k", "1..64");
  expect_refused("eval --model tiny --max-new-tokens 100000", "--max-new-tokens", "1..4096");
  expect_refused("eval --model tiny --limit -1", "--limit", "0..1000000000");
  expect_refused("eval --model tiny --block-size 0", "--block-size", "1..1024");
  expect_refused("eval --model tiny --threads 100000", "--threads", "0..4096");
}

TEST(BadOptions, WorkloadOptionsAndSizesHaveRanges) {
  expect_refused("workload --documents 0", "--documents", "1..100000");
  expect_refused("workload --zipf nan", "--zipf", "0..10");
  expect_refused("workload --rate inf", "--rate", "0..1e+06");
  expect_refused("workload --requests 2000000000", "--requests", "1..1000000");
  expect_refused("workload --step-tokens 0", "--step-tokens", "1..1048576");
  // Every option in range, the workload they make too large: refused before anything is allocated.
  expect_refused("workload --documents 100000 --doc-tokens 131072", "--documents x --doc-tokens",
                 "268435456");
  expect_refused("workload --requests 1000000 --query-tokens 131072", "--requests x --query-tokens",
                 "268435456");
  expect_refused("workload --documents 100000 --doc-tokens 4 --docs-per-request 64 --requests 1000000",
                 "--requests x --docs-per-request x --documents", "17179869184");
}

TEST(BadOptions, OverheadOptionsHaveRangesForTheWholeGrid) {
  expect_refused("overhead --backend cpu --timing-ms nan", "--timing-ms", "0..10000");
  expect_refused("overhead --backend cpu --repeats 1", "--repeats", "2..1000");
  expect_refused("overhead --backend cpu --block-size 0", "--block-size", "1..1024");
  expect_refused("overhead --backend cpu --threads -1", "--threads", "0..4096");
  // The bad value is last: nothing is timed before it is refused.
  expect_refused("overhead --backend cpu --contexts 256,0", "--contexts", "1..1048576");
  expect_refused("overhead --backend cpu --contexts 256 --batches 1,5000", "--batches", "1..1024");
  expect_refused("overhead --backend cpu --contexts 256,1048576 --batches 1,1024", "exceeds 8 GiB", "fp32");
}

TEST_F(OutputsNeverOverwrite, EvalRecordOverAnotherCorpusStore) {
  // A corpus store is SQLite too, but not a session report: eval must not replace it.
  const fs::path store = dir_ / "other.db";
  ASSERT_EQ(run("corpus import " + (dir_ / "passages.jsonl").string() + " --format jsonl --out " +
                store.string())
                .status,
            0);
  const std::string before = read(store);
  const Outcome o = run("eval --model tiny --backend cpu --limit 1 --record " + store.string());
  EXPECT_NE(o.status, 0) << o.output;
  EXPECT_NE(o.output.find("not a session report"), std::string::npos) << o.output;
  EXPECT_EQ(read(store), before);
}

}  // namespace

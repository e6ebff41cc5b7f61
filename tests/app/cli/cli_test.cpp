// lazyscope-cli end to end: generate/compare on the tiny model, clear errors on bad input.
#include <gtest/gtest.h>

#include <array>
#include <cstdio>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "support/tiny_model.h"

namespace {

struct Outcome {
  int status = -1;
  std::string output;
};

Outcome run(const std::string& args) {
  Outcome o;
  FILE* pipe = popen((std::string(LAZYSCOPE_CLI) + " " + args + " 2>&1").c_str(), "r");
  if (!pipe) return o;
  std::array<char, 4096> buffer;
  while (fgets(buffer.data(), buffer.size(), pipe)) o.output += buffer.data();
  int status = pclose(pipe);
  o.status = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return o;
}

std::string write_file(const std::string& name, const std::string& text) {
  std::string path = (std::filesystem::temp_directory_path() / name).string();
  std::ofstream(path) << text;
  return path;
}

TEST(Cli, CompareLazyMaterializedIsIdentical) {
  const std::string req = write_file("ls-cli-req.json",
      R"({"prefix": "System.", "documents": ["The bell of Pellworth rings at noon.", "Marra Voss built it."],
          "order": [1, 0, 1], "query": "Who built the bell?", "max_new_tokens": 6})");
  const std::string dump = (std::filesystem::temp_directory_path() / "ls-cli-dump.json").string();
  Outcome o = run("generate --model " + lazyscope::testing::tiny_model_dir().string() + " --request " + req +
                  " --compare lazy,materialized --backend cpu --dump-logits " + dump);
  EXPECT_EQ(o.status, 0) << o.output;
  EXPECT_NE(o.output.find("identical: greedy tokens agree over 6 steps"), std::string::npos) << o.output;
  std::ifstream lazy((std::filesystem::temp_directory_path() / "ls-cli-dump.lazy.json").string());
  std::string text((std::istreambuf_iterator<char>(lazy)), {});
  EXPECT_NE(text.find("\"step_logits\""), std::string::npos);
  EXPECT_NE(text.find("\"policy\":\"lazy\""), std::string::npos);
}

// One "cache:" line per policy run, in order: {cached tokens, document hits, counted documents, bytes copied}.
struct CacheLine {
  std::string policy;
  long long cached_tokens = -1, document_hits = -1, documents = -1;
  long long copied_bytes = -1;
};

std::vector<CacheLine> cache_lines(const std::string& output) {
  std::vector<CacheLine> lines;
  std::size_t pos = 0;
  while ((pos = output.find("\n[block/", pos)) != std::string::npos) {
    CacheLine line;
    const std::size_t slash = pos + 8;
    line.policy = output.substr(slash, output.find(' ', slash) - slash);
    const std::size_t cache = output.find("  cache: ", pos);
    if (cache == std::string::npos) break;
    long long prompt = 0;
    double token_pct = 0, doc_pct = 0;
    std::sscanf(output.c_str() + cache, "  cache: %lld/%lld prompt tokens from cache (%lf%%), %lld/%lld documents from cache (%lf%%)",
                &line.cached_tokens, &prompt, &token_pct, &line.document_hits, &line.documents, &doc_pct);
    const std::size_t end = output.find('\n', cache);
    const std::size_t open = output.rfind('(', end);
    std::sscanf(output.c_str() + open, "(%lld bytes)", &line.copied_bytes);
    lines.push_back(line);
    pos = cache;
  }
  return lines;
}

// Every policy in a comparison runs on its own KV pool: the cold run is cold for both sides (no
// policy is served from the other's encodes); a reordered re-run hits each side's own blocks,
// lazy without a copy, materialized with copies.
TEST(Cli, CompareRunsEachPolicyOnItsOwnPool) {
  const std::string docs = R"("documents": ["The bell of Pellworth rings at noon and at midnight.", "Marra Voss built it in the year of the flood.", "Its rope is made of river reeds."], "titles": ["Bell", "Builder", "Rope"], "query": "Who built the bell?", "max_new_tokens": 4)";
  const std::string cold = write_file("ls-cli-cold.json", "{" + docs + R"(, "order": [0, 1, 2]})");
  const std::string warm = write_file("ls-cli-warm.json", "{" + docs + R"(, "order": [2, 0, 1]})");
  Outcome o = run("generate --model " + lazyscope::testing::tiny_model_dir().string() + " --request " + cold +
                  " --request " + warm + " --compare lazy,materialized --backend cpu");
  ASSERT_EQ(o.status, 0) << o.output;
  const std::vector<CacheLine> lines = cache_lines(o.output);
  ASSERT_EQ(lines.size(), 4u) << o.output;
  EXPECT_EQ(lines[0].policy, "lazy");
  EXPECT_EQ(lines[1].policy, "materialized");
  for (int i : {0, 1}) {
    EXPECT_EQ(lines[i].cached_tokens, 0) << o.output;
    EXPECT_EQ(lines[i].document_hits, 0) << o.output;
    EXPECT_EQ(lines[i].documents, 3) << o.output;
  }
  for (int i : {2, 3}) {
    EXPECT_GT(lines[i].cached_tokens, 0) << o.output;
    EXPECT_EQ(lines[i].document_hits, 3) << o.output;
    EXPECT_EQ(lines[i].documents, 3) << o.output;
  }
  EXPECT_EQ(lines[2].copied_bytes, 0) << o.output;
  EXPECT_GT(lines[3].copied_bytes, 0) << o.output;
  EXPECT_NE(o.output.find("request 2 of 2"), std::string::npos) << o.output;
}

TEST(Cli, BadChatSettingNamesTheOptionAndTheValues) {
  const std::string req = write_file("ls-cli-chat.json", R"({"documents": ["a"], "query": "q"})");
  Outcome o = run("generate --model " + lazyscope::testing::tiny_model_dir().string() + " --request " + req +
                  " --chat sometimes");
  EXPECT_NE(o.status, 0);
  EXPECT_NE(o.output.find("--chat sometimes"), std::string::npos) << o.output;
  EXPECT_NE(o.output.find("auto, on or off"), std::string::npos) << o.output;
}

TEST(Cli, BadRequestNamesTheFileAndExitsNonZero) {
  const std::string req = write_file("ls-cli-bad.json", R"({"documents": "not a list", "query": "x"})");
  Outcome o = run("generate --model " + lazyscope::testing::tiny_model_dir().string() + " --request " + req);
  EXPECT_NE(o.status, 0);
  EXPECT_NE(o.output.find("ls-cli-bad.json"), std::string::npos) << o.output;
  EXPECT_NE(o.output.find("documents"), std::string::npos) << o.output;
}

TEST(Cli, BudgetTooSmallIsAClearError) {
  const std::string req = write_file("ls-cli-big.json", R"({"documents": ["a b c d e f g h i j k l m n o p q r s t u v w x y z"], "query": "q"})");
  Outcome o = run("generate --model " + lazyscope::testing::tiny_model_dir().string() + " --request " + req +
                  " --kv-budget 8KiB --backend cpu");
  EXPECT_NE(o.status, 0);
  EXPECT_NE(o.output.find("KV budget"), std::string::npos) << o.output;
}

TEST(Cli, PolicyThatCannotServeTheModeIsRefused) {
  const std::string req = write_file("ls-cli-mode.json", R"({"documents": ["a"], "query": "q"})");
  Outcome o = run("generate --model " + lazyscope::testing::tiny_model_dir().string() + " --request " + req +
                  " --mode full --policy lazy");
  EXPECT_NE(o.status, 0);
  EXPECT_NE(o.output.find("--mode block"), std::string::npos) << o.output;
}

// The token hit ratio of each policy in a cache-demo table.
std::map<std::string, double> demo_hit_ratios(const std::string& output) {
  std::map<std::string, double> hits;
  for (const char* policy : {"none", "prefix", "positional", "materialized", "lazy"}) {
    const auto pos = output.find("\n" + std::string(policy) + " ");
    EXPECT_NE(pos, std::string::npos) << policy;
    if (pos == std::string::npos) continue;
    // columns: policy mode tok-hit% ...
    const std::string line = output.substr(pos + 1, output.find('\n', pos + 1) - pos - 1);
    char name[32], mode[16];
    double hit = -1;
    std::sscanf(line.c_str(), "%31s %15s %lf", name, mode, &hit);
    hits[policy] = hit;
  }
  return hits;
}

TEST(Cli, CacheDemoShowsLazyAheadOfMaterialized) {
  // A budget (128 blocks of 2 MiB) below the workload's documents (~160 blocks): materialized's
  // per-request copies take pool space and evict documents lazy keeps, so lazy must hit more.
  const std::string workload = "cache-demo --shape llama-3.1-8b --requests 10 --documents 10 --docs-per-request 3 --seed 1";
  Outcome o = run(workload + " --kv-budget 256MiB");
  ASSERT_EQ(o.status, 0) << o.output;
  std::map<std::string, double> hits = demo_hit_ratios(o.output);
  EXPECT_EQ(hits["none"], 0.0);
  EXPECT_GT(hits["lazy"], hits["materialized"] + 5.0) << o.output;
  EXPECT_GT(hits["materialized"], hits["positional"]) << o.output;
  EXPECT_NE(o.output.find("block maps"), std::string::npos);
  // With room for everything the copies evict nothing: the two policies hit alike.
  Outcome roomy = run(workload + " --kv-budget 4GiB");
  ASSERT_EQ(roomy.status, 0) << roomy.output;
  hits = demo_hit_ratios(roomy.output);
  EXPECT_EQ(hits["lazy"], hits["materialized"]) << roomy.output;
}

}  // namespace

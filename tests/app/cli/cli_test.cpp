// lazyscope-cli end to end: generate/compare on the tiny model, clear errors on bad input.
#include <gtest/gtest.h>

#include <array>
#include <cstdio>
#include <fstream>
#include <string>

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

TEST(Cli, CacheDemoShowsLazyAheadOfMaterialized) {
  Outcome o = run("cache-demo --requests 10");
  ASSERT_EQ(o.status, 0) << o.output;
  auto hit_of = [&](const std::string& policy) {
    auto pos = o.output.find("\n" + policy + " ");
    EXPECT_NE(pos, std::string::npos) << policy;
    // columns: policy mode tok-hit% ...
    std::string line = o.output.substr(pos + 1, o.output.find('\n', pos + 1) - pos - 1);
    char name[32], mode[16];
    double hit = -1;
    sscanf(line.c_str(), "%31s %15s %lf", name, mode, &hit);
    return hit;
  };
  EXPECT_EQ(hit_of("none"), 0.0);
  EXPECT_GT(hit_of("lazy"), hit_of("materialized") - 1e-9);
  EXPECT_GT(hit_of("lazy"), hit_of("positional"));
  EXPECT_NE(o.output.find("block maps"), std::string::npos);
}

}  // namespace

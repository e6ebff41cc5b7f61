// lazyscope-cli eval end to end on the tiny model: JSON and tables, Ctrl-C keeps what finished,
// clear errors for bad question files, options and outputs.
#include <gtest/gtest.h>

#include <array>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "support/tiny_model.h"

namespace {

namespace fs = std::filesystem;

struct Outcome {
  int status = -1;
  std::string output;
};

Outcome shell(const std::string& command) {
  Outcome o;
  FILE* pipe = popen((command + " 2>&1").c_str(), "r");
  if (!pipe) return o;
  std::array<char, 4096> buffer;
  while (fgets(buffer.data(), buffer.size(), pipe)) o.output += buffer.data();
  const int status = pclose(pipe);
  o.status = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return o;
}

Outcome eval(const std::string& args) {
  return shell(std::string(LAZYSCOPE_CLI) + " eval --backend cpu --model " +
               lazyscope::testing::tiny_model_dir().string() + " " + args);
}

fs::path temp(const std::string& name) {
  return fs::temp_directory_path() / ("ls-cli-eval-" + std::to_string(::getpid()) + "-" + name);
}

nlohmann::json read_json(const fs::path& path) {
  std::ifstream in(path);
  return nlohmann::json::parse(in);
}

TEST(CliEval, WritesTablesAndJsonForTheSampleQuestions) {
  const fs::path json = temp("out.json");
  Outcome o = eval(
      "--limit 3 --max-new-tokens 4 --configs full/none,block/lazy,block/materialized --json " +
      json.string());
  ASSERT_EQ(o.status, 0) << o.output;
  EXPECT_NE(o.output.find("Answers side by side"), std::string::npos) << o.output;
  EXPECT_NE(o.output.find("EM = exact match after SQuAD normalisation"), std::string::npos);
  EXPECT_NE(o.output.find("block/materialized"), std::string::npos);
  EXPECT_NE(o.output.find("lazy vs materialized: 3 questions, identical answers"),
            std::string::npos)
      << o.output;
  const nlohmann::json j = read_json(json);
  EXPECT_EQ(j["finished_questions"], 3);
  EXPECT_EQ(j["configurations"].size(), 3u);
  EXPECT_TRUE(j["lazy_vs_materialized"]["identical"].get<bool>());
  // Running again over its own earlier output is allowed (same kind of file, replaced whole).
  EXPECT_EQ(
      eval("--limit 1 --max-new-tokens 2 --configs block/lazy --quiet --json " + json.string())
          .status,
      0);
  fs::remove(json);
}

TEST(CliEval, CtrlCWritesWhatFinishedAndExitsNonZero) {
  const fs::path json = temp("partial.json");
  fs::remove(json);
  const fs::path log = temp("partial.log");
  // SIGINT once the sessions are loaded (the "questions x configurations" line): whatever
  // finished by then is kept, possibly nothing on a slow machine.
  Outcome o = shell(
      "(" + std::string(LAZYSCOPE_CLI) + " eval --backend cpu --model " +
      lazyscope::testing::tiny_model_dir().string() +
      " --max-new-tokens 200 --configs block/lazy --quiet --json " + json.string() + " > " +
      log.string() + " 2>&1 & pid=$!; i=0; while ! grep -q 'questions x' " + log.string() +
      " && [ $i -lt 1200 ]; do sleep 0.1; i=$((i+1)); done; sleep 0.5; kill -INT $pid; wait $pid;"
      " rc=$?; cat " +
      log.string() + "; exit $rc)");
  EXPECT_NE(o.status, 0) << o.output;
  EXPECT_NE(o.output.find("interrupted:"), std::string::npos) << o.output;
  ASSERT_TRUE(fs::exists(json)) << o.output;
  const nlohmann::json j = read_json(json);
  EXPECT_TRUE(j["cancelled"].get<bool>());
  EXPECT_LT(j["finished_questions"].get<int>(), 177);
  EXPECT_EQ(j["questions"].size(), j["finished_questions"].get<std::size_t>());
  fs::remove(json);
  fs::remove(log);
}

TEST(CliEval, BadQuestionFileNamesTheFileAndLine) {
  const fs::path questions = temp("bad.jsonl");
  std::ofstream(questions)
      << "{\"question\": \"Capital?\", \"answers\": [\"Brannock\"]}\n{\"question\": \"x\"}\n";
  Outcome o = eval("--questions " + questions.string());
  EXPECT_NE(o.status, 0);
  EXPECT_NE(o.output.find(questions.string() + ": line 2: the question has no gold answer"),
            std::string::npos)
      << o.output;
  fs::remove(questions);
}

TEST(CliEval, BadOptionsAndOutputsAreRefusedBeforeAnyWork) {
  Outcome configs = eval("--configs full/lazy");
  EXPECT_NE(configs.status, 0);
  EXPECT_NE(configs.output.find("lazy"), std::string::npos) << configs.output;
  Outcome pairs = eval("--modes full --policies lazy");
  EXPECT_NE(pairs.status, 0);
  EXPECT_NE(pairs.output.find("no valid mode/policy pair"), std::string::npos) << pairs.output;
  Outcome k = eval("-k 0");
  EXPECT_NE(k.status, 0);
  EXPECT_NE(k.output.find("-k: 0 is outside the valid range 1..64"), std::string::npos) << k.output;
  Outcome concurrency = eval("--concurrency 0");
  EXPECT_NE(concurrency.status, 0);
  EXPECT_NE(concurrency.output.find("--concurrency: 0 is outside the valid range 1..256"),
            std::string::npos)
      << concurrency.output;
  Outcome precision = eval("--cpu-precision half");
  EXPECT_NE(precision.status, 0);
  EXPECT_NE(precision.output.find("--cpu-precision"), std::string::npos) << precision.output;
  Outcome retrieval = eval("--retrieval dense");
  EXPECT_NE(retrieval.output.find("--retrieval must be bm25 or gold"), std::string::npos)
      << retrieval.output;
  const fs::path questions = temp("good.jsonl");
  std::ofstream(questions) << "{\"question\": \"Capital?\", \"answers\": [\"Brannock\"]}\n";
  Outcome over_input = eval("--questions " + questions.string() + " --json " + questions.string());
  EXPECT_NE(over_input.status, 0);
  EXPECT_NE(over_input.output.find("--json"), std::string::npos) << over_input.output;
  std::ifstream in(questions);
  std::string kept((std::istreambuf_iterator<char>(in)), {});
  EXPECT_NE(kept.find("Brannock"), std::string::npos);  // the input is untouched
  fs::remove(questions);
}

}  // namespace

// Files the CLI saves survive SIGKILL of the command at any moment: a corpus store being
// re-imported and a Chrome trace being re-exported are always the previous whole file or the new
// one, and the next run removes what the killed one left behind.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "corpora/document_store.h"

extern char** environ;

namespace {

namespace fs = std::filesystem;

pid_t spawn_cli(const std::vector<std::string>& args) {
  std::vector<std::string> all{LAZYSCOPE_CLI};
  all.insert(all.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (std::string& a : all) argv.push_back(a.data());
  argv.push_back(nullptr);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0);
  posix_spawn_file_actions_addopen(&actions, 2, "/dev/null", O_WRONLY, 0);
  pid_t pid = -1;
  const int rc = posix_spawn(&pid, LAZYSCOPE_CLI, &actions, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  return rc == 0 ? pid : -1;
}

int run_cli(const std::vector<std::string>& args) {
  const pid_t pid = spawn_cli(args);
  int status = 0;
  waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

// Runs the command, kills it after a random delay, reports whether it was still running then.
bool kill_at_random(const std::vector<std::string>& args, std::mt19937& rng, int max_ms) {
  const pid_t pid = spawn_cli(args);
  if (pid <= 0) return false;  // never kill(-1, ...)
  std::this_thread::sleep_for(std::chrono::microseconds(rng() % (max_ms * 1000)));
  const bool running = kill(pid, SIGKILL) == 0;
  int status = 0;
  waitpid(pid, &status, 0);
  return running && WIFSIGNALED(status);
}

int leftovers(const fs::path& dir, const std::vector<fs::path>& keep) {
  int n = 0;
  for (const auto& e : fs::directory_iterator(dir))
    if (std::find(keep.begin(), keep.end(), e.path()) == keep.end()) ++n;
  return n;
}

class KillTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("lazyscope-cli-kill-" + std::to_string(getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_ / "out");
    std::ofstream out(dir_ / "passages.jsonl");
    for (int i = 0; i < 20000; ++i) {
      out << R"({"id":"p)" << i << R"(","title":"Passage )" << i
          << R"(","text":"The lune flows past carrow )" << i
          << R"( and the stone bridge near the market of the weavers."})"
          << "\n";
    }
  }
  void TearDown() override { fs::remove_all(dir_); }
  fs::path dir_;
};

TEST_F(KillTest, CorpusStoreSurvivesAKilledReimport) {
  const fs::path store = dir_ / "out" / "store.db";
  const std::vector<std::string> import{"corpus",      "import", (dir_ / "passages.jsonl").string(),
                                        "--format",    "jsonl",  "--out",
                                        store.string()};
  const auto start = std::chrono::steady_clock::now();
  ASSERT_EQ(run_cli(import), 0);
  // Kill moments spread over one whole re-import as long as this machine takes for it (a fixed
  // range missed every import on a fast, idle machine).
  const int import_ms = int(std::chrono::duration_cast<std::chrono::milliseconds>(
                                std::chrono::steady_clock::now() - start).count());
  std::mt19937 rng(11);
  int killed = 0;
  for (int round = 0; round < 12; ++round) {
    killed += kill_at_random(import, rng, std::max(1, import_ms));
    auto opened = lazyscope::corpora::DocumentStore::open(
        store, lazyscope::corpora::DocumentStore::Mode::read_only);
    ASSERT_EQ(opened.count(), 20000) << "round " << round;
    ASSERT_EQ(opened.search("carrow", 3).size(), 3u);
  }
  EXPECT_GT(killed, 0) << "no kill landed while the import ran; the test checked nothing";
  ASSERT_EQ(run_cli(import), 0);  // the next import removes the killed imports' temporaries
  EXPECT_EQ(leftovers(dir_ / "out", {store}), 0);
}

TEST_F(KillTest, TraceSurvivesAKilledReexport) {
  const fs::path request = dir_ / "r.json";
  std::ofstream(request)
      << R"({"prefix_ids":[1,2],"document_ids":[[5,6,7],[8,9]],"query_ids":[3],"max_new_tokens":40})";
  const fs::path report = dir_ / "s.db";
  ASSERT_EQ(
      run_cli({"generate", "--synthetic", "tiny", "--backend", "cpu", "--request", request.string(),
               "--compare", "lazy,materialized", "--record", report.string()}),
      0);
  const fs::path trace = dir_ / "out" / "trace.json";
  const std::vector<std::string> export_trace{"session", "trace", report.string(), "--out",
                                              trace.string()};
  ASSERT_EQ(run_cli(export_trace), 0);
  std::mt19937 rng(5);
  int killed = 0;
  for (int round = 0; round < 20; ++round) {
    killed += kill_at_random(export_trace, rng, 60);
    std::ifstream in(trace);
    const nlohmann::json j = nlohmann::json::parse(in, nullptr, false);
    ASSERT_TRUE(j.is_object() && j.contains("traceEvents")) << "round " << round;
  }
  EXPECT_GT(killed, 0);
  ASSERT_EQ(run_cli(export_trace), 0);
  EXPECT_EQ(leftovers(dir_ / "out", {trace}), 0);
}

}  // namespace

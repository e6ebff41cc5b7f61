// Atomic writes: the target is always a whole old or a whole new version, even when the writer
// is killed with SIGKILL at random moments; orphaned temporaries are cleaned up on the next write.
#include "base/atomic_file.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <random>
#include <sstream>
#include <thread>

#include "base/error.h"

namespace lazyscope {
namespace {

namespace fs = std::filesystem;

fs::path fresh_dir(const std::string& name) {
  fs::path d = fs::temp_directory_path() / ("lazyscope-" + name + "-" + std::to_string(::getpid()));
  fs::remove_all(d);
  fs::create_directories(d);
  return d;
}

std::string read_all(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// Version k: a header line with k and the length, then `length` copies of one letter.
std::string version_text(int k) {
  const std::size_t length = 200000 + std::size_t(k % 7) * 50000;
  return "v" + std::to_string(k) + " " + std::to_string(length) + "\n" +
         std::string(length, char('a' + k % 26));
}

bool is_whole_version(const std::string& text) {
  int k = 0;
  std::size_t length = 0;
  if (std::sscanf(text.c_str(), "v%d %zu\n", &k, &length) != 2) return false;
  return text == version_text(k);
}

std::vector<fs::path> temporaries_in(const fs::path& dir) {
  std::vector<fs::path> out;
  for (const auto& e : fs::directory_iterator(dir)) {
    if (e.path().filename().string().find(".tmp-") != std::string::npos) out.push_back(e.path());
  }
  return out;
}

TEST(AtomicFile, WritesAndReplacesWholeFiles) {
  const fs::path dir = fresh_dir("atomic");
  const fs::path target = dir / "out.json";
  write_file_atomically(target, "first", "test file");
  EXPECT_EQ(read_all(target), "first");
  write_file_atomically(target, "second, longer", "test file");
  EXPECT_EQ(read_all(target), "second, longer");
  EXPECT_TRUE(temporaries_in(dir).empty());
  fs::remove_all(dir);
}

TEST(AtomicFile, UncommittedTemporaryIsRemoved) {
  const fs::path dir = fresh_dir("atomic-abandon");
  const fs::path target = dir / "report.db";
  write_file_atomically(target, "old", "test file");
  {
    AtomicFile file(target, "test file");
    std::ofstream(file.temp_path()) << "half written";
    EXPECT_TRUE(fs::exists(file.temp_path()));
  }  // an exception between writing and commit() lands here
  EXPECT_TRUE(temporaries_in(dir).empty());
  EXPECT_EQ(read_all(target), "old");
  fs::remove_all(dir);
}

TEST(AtomicFile, WriteIntoMissingFolderNamesTheFile) {
  const fs::path target = fs::temp_directory_path() / "lazyscope-no-such-folder-xyz" / "a.json";
  try {
    write_file_atomically(target, "x", "trace");
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(target.string()), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("trace"), std::string::npos) << e.what();
  }
}

TEST(AtomicFile, OrphansOfDeadWritersAreRemovedOthersKept) {
  const fs::path dir = fresh_dir("atomic-orphans");
  const fs::path target = dir / "s.db";
  // A pid that has exited: fork a child that exits at once and reap it.
  const pid_t dead = ::fork();
  if (dead == 0) ::_exit(0);
  ::waitpid(dead, nullptr, 0);
  const fs::path orphan = dir / (".s.db.tmp-" + std::to_string(dead) + "-0");
  const fs::path live =
      dir / (".s.db.tmp-" + std::to_string(::getppid()) + "-0");              // a running process
  const fs::path other = dir / (".t.db.tmp-" + std::to_string(dead) + "-0");  // another target's
  for (const fs::path& p : {orphan, live, other}) std::ofstream(p) << "junk";
  EXPECT_EQ(remove_orphaned_temporaries(target), 1);
  EXPECT_FALSE(fs::exists(orphan));
  EXPECT_TRUE(fs::exists(live));
  EXPECT_TRUE(fs::exists(other));
  fs::remove_all(dir);
}

TEST(AtomicFile, OrphanedTemporaryFoldersAreRemovedWhole) {
  const fs::path dir = fresh_dir("atomic-orphan-folder");
  const fs::path target = dir / "model";
  const pid_t dead = ::fork();
  if (dead == 0) ::_exit(0);
  ::waitpid(dead, nullptr, 0);
  const fs::path orphan = dir / (".model.tmp-" + std::to_string(dead) + "-3");
  fs::create_directories(orphan / "sub");
  std::ofstream(orphan / "sub" / "weights.bin") << "half a checkpoint";
  const fs::path fresh = temporary_sibling(target);
  EXPECT_EQ(fresh.parent_path(), dir);
  EXPECT_EQ(fresh.filename().string().rfind(".model.tmp-" + std::to_string(::getpid()) + "-", 0), 0u);
  EXPECT_EQ(remove_orphaned_temporaries(target), 1);
  EXPECT_FALSE(fs::exists(orphan));
  fs::remove_all(dir);
}

// A writer process replaces the file again and again; SIGKILL at a random moment; the file must be
// one whole version, and the next write must clean the killed writer's temporary up.
TEST(AtomicFile, SurvivesSigkillAtRandomMoments) {
  const fs::path dir = fresh_dir("atomic-kill");
  const fs::path target = dir / "data.txt";
  write_file_atomically(target, version_text(0), "test file");
  std::mt19937 rng(12345);
  int killed_mid_write = 0;
  for (int round = 0; round < 40; ++round) {
    const pid_t child = ::fork();
    ASSERT_GE(child, 0);
    if (child == 0) {
      for (int k = 1;; ++k)
        write_file_atomically(target, version_text(k + round * 1000), "test file");
    }
    std::this_thread::sleep_for(std::chrono::microseconds(rng() % 20000));
    ::kill(child, SIGKILL);
    int status = 0;
    ::waitpid(child, &status, 0);
    ASSERT_TRUE(WIFSIGNALED(status));
    ASSERT_TRUE(is_whole_version(read_all(target))) << "round " << round;
    if (!temporaries_in(dir).empty()) ++killed_mid_write;
    write_file_atomically(target, version_text(round), "test file");
    EXPECT_TRUE(temporaries_in(dir).empty()) << "round " << round;
  }
  EXPECT_GT(killed_mid_write, 0) << "no kill landed during a write; the test checked nothing";
  fs::remove_all(dir);
}

}  // namespace
}  // namespace lazyscope

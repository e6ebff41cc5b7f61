// Session reports survive a writer killed with SIGKILL at any moment (the previous report stays
// whole and opens), and a truncated or foreign file at a report path is a clear error.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <random>
#include <thread>

#include "base/error.h"
#include "profiler/session_recorder.h"

namespace lazyscope {
namespace {

namespace fs = std::filesystem;

// A synthetic recording whose size and content depend on `version`, so a mix of two versions
// would show.
SessionRecording recording(int version) {
  SessionRecording r;
  r.metadata["version"] = std::to_string(version);
  const int tokens = 2000 + (version % 5) * 700;
  for (int i = 0; i < tokens; ++i) {
    RecordedToken t;
    t.request = 1;
    t.event.policy = "lazy";
    t.event.step = i;
    t.event.id = version;
    t.event.text = "token text " + std::to_string(i);
    r.tokens.push_back(t);
  }
  RecordedRequest q;
  q.id = 1;
  q.event.policy = "lazy";
  q.event.generated_tokens = tokens;
  r.requests.push_back(q);
  return r;
}

bool is_whole(const SessionRecording& r) {
  const int version = std::stoi(r.metadata.at("version"));
  if (r.requests.size() != 1 || r.tokens.size() != recording(version).tokens.size()) return false;
  for (const RecordedToken& t : r.tokens)
    if (t.event.id != version) return false;
  return r.requests[0].event.generated_tokens == int(r.tokens.size());
}

fs::path fresh_dir(const std::string& name) {
  fs::path d = fs::temp_directory_path() / ("lazyscope-" + name + "-" + std::to_string(::getpid()));
  fs::remove_all(d);
  fs::create_directories(d);
  return d;
}

std::string error_of(const fs::path& p) {
  try {
    load_session_sqlite(p);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(SessionReportCrash, SurvivesSigkillOfTheWriterAtRandomMoments) {
  const fs::path dir = fresh_dir("report-kill");
  const fs::path path = dir / "session.db";
  save_session_sqlite(recording(0), path);
  std::mt19937 rng(7);
  int temporaries_seen = 0;
  for (int round = 0; round < 25; ++round) {
    const pid_t child = ::fork();
    ASSERT_GE(child, 0);
    if (child == 0) {
      for (int k = 1;; ++k) save_session_sqlite(recording(round * 100 + k), path);
    }
    std::this_thread::sleep_for(std::chrono::microseconds(rng() % 60000));
    ::kill(child, SIGKILL);
    ::waitpid(child, nullptr, 0);
    SessionRecording back;
    ASSERT_NO_THROW(back = load_session_sqlite(path)) << "round " << round;
    ASSERT_TRUE(is_whole(back)) << "round " << round;
    for (const auto& e : fs::directory_iterator(dir))
      if (e.path().filename().string().find(".tmp-") != std::string::npos) ++temporaries_seen;
    save_session_sqlite(recording(round),
                        path);  // the next save removes the killed writer's temporary
    int left = 0;
    for (const auto& e : fs::directory_iterator(dir)) left += e.path() != path;
    EXPECT_EQ(left, 0) << "round " << round;
  }
  EXPECT_GT(temporaries_seen, 0) << "no kill landed during a save; the test checked nothing";
  fs::remove_all(dir);
}

TEST(SessionReportCrash, TruncatedReportIsAClearError) {
  const fs::path dir = fresh_dir("report-truncated");
  const fs::path path = dir / "session.db";
  save_session_sqlite(recording(3), path);
  const auto size = fs::file_size(path);
  for (const double keep : {0.0, 0.01, 0.3, 0.6, 0.95}) {
    const fs::path cut = dir / "cut.db";
    fs::copy_file(path, cut, fs::copy_options::overwrite_existing);
    fs::resize_file(cut, std::uintmax_t(double(size) * keep));
    const std::string e = error_of(cut);
    EXPECT_NE(e.find(cut.string()), std::string::npos) << "kept " << keep << ": '" << e << "'";
  }
  fs::remove_all(dir);
}

TEST(SessionReportCrash, ForeignFilesAreClearErrors) {
  const fs::path dir = fresh_dir("report-foreign");
  std::ofstream(dir / "request.json") << R"({"query": "q"})";
  EXPECT_NE(error_of(dir / "request.json").find("request.json"), std::string::npos);
  EXPECT_NE(error_of(dir / "missing.db").find("no such session file"), std::string::npos);
  fs::create_directories(dir / "folder.db");
  EXPECT_NE(error_of(dir / "folder.db").find("folder.db"), std::string::npos);
  fs::remove_all(dir);
}

}  // namespace
}  // namespace lazyscope

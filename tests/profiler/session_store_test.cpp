// Session reports: a recorded session survives a save/load round trip; bad files are refused
// clearly; a failed save leaves the previous report intact.
#include <gtest/gtest.h>

#include <sqlite3.h>
#include <unistd.h>

#include <fstream>
#include <vector>

#include "engine/runtime/session.h"
#include "base/error.h"
#include "profiler/session_recorder.h"

namespace lazyscope {
namespace {

std::filesystem::path temp(const std::string& name) { return std::filesystem::temp_directory_path() / name; }

SessionRecording record_two_requests() {
  SessionRecorder rec;
  rec.set_metadata("model", "synthetic tiny");
  SessionOptions o;
  o.synthetic = "tiny";
  o.backend = BackendKind::Cpu;
  Session session(o, &rec);
  Request r;
  r.prefix_ids = std::vector<int32_t>{1, 2};
  r.document_ids = {std::vector<int32_t>(18, 30), std::vector<int32_t>(5, 31)};
  r.query_ids = std::vector<int32_t>{4, 5};
  r.max_new_tokens = 3;
  // Every policy has its own pool: materialized hits (and copies) only what it encoded itself.
  RunOptions mat;
  mat.policy = Policy::Materialized;
  session.submit(r, mat);
  r.order = {1, 0};
  session.submit(r, mat);
  return rec.snapshot();
}

TEST(SessionStore, RoundTrip) {
  SessionRecording rec = record_two_requests();
  ASSERT_EQ(rec.requests.size(), 2u);
  const auto path = temp("ls-session-roundtrip.db");
  save_session_sqlite(rec, path);
  SessionRecording back = load_session_sqlite(path);
  EXPECT_EQ(back.metadata["model"], "synthetic tiny");
  ASSERT_EQ(back.requests.size(), 2u);
  EXPECT_EQ(back.requests[1].event.policy, "materialized");
  EXPECT_EQ(back.requests[1].event.stats.document_hits, 2);
  EXPECT_GT(back.requests[1].event.stats.bytes_copied, 0);
  EXPECT_EQ(back.tokens.size(), 6u);
  EXPECT_EQ(back.blocks.size(), rec.blocks.size());
  EXPECT_EQ(back.spans.size(), rec.spans.size());
  const std::string trace = chrome_trace_json(back);
  EXPECT_NE(trace.find("\"traceEvents\""), std::string::npos);
  EXPECT_NE(trace.find("decode step 1"), std::string::npos);
}

TEST(SessionStore, RefusesFilesThatAreNotSessions) {
  const auto junk = temp("ls-session-junk.db");
  std::ofstream(junk) << "this is not sqlite at all, just some words";
  try {
    load_session_sqlite(junk);
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("ls-session-junk.db"), std::string::npos) << e.what();
  }
  EXPECT_THROW(load_session_sqlite(temp("ls-no-such-session.db")), Error);
}

TEST(SessionStore, FailedSaveKeepsThePreviousReport) {
  SessionRecording rec = record_two_requests();
  const auto path = temp("ls-session-keep.db");
  save_session_sqlite(rec, path);
  const auto before = std::filesystem::file_size(path);
  // Directories where this process's temporary files would go make the save fail midway.
  std::vector<std::filesystem::path> blockers;
  for (int n = 0; n < 1000; ++n) {
    blockers.push_back(path.parent_path() / ("." + path.filename().string() + ".tmp-" + std::to_string(getpid()) +
                                             "-" + std::to_string(n)));
    std::filesystem::create_directories(blockers.back() / "x");
  }
  EXPECT_THROW(save_session_sqlite(rec, path), Error);
  for (const auto& b : blockers) std::filesystem::remove_all(b);
  EXPECT_EQ(std::filesystem::file_size(path), before);
  EXPECT_EQ(load_session_sqlite(path).requests.size(), 2u);
}

std::string load_error(const std::filesystem::path& path) {
  try {
    load_session_sqlite(path);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(SessionStore, TruncatedReportIsRefusedNamingTheFile) {
  SessionRecording rec = record_two_requests();
  const auto path = temp("ls-session-truncated.db");
  save_session_sqlite(rec, path);
  const auto size = std::filesystem::file_size(path);
  ASSERT_GT(size, 8192u);
  std::filesystem::resize_file(path, size / 2);
  const std::string error = load_error(path);
  EXPECT_NE(error.find("ls-session-truncated.db"), std::string::npos) << error;
  EXPECT_NE(error.find("damaged or truncated"), std::string::npos) << error;
  std::filesystem::resize_file(path, 100);  // less than one page: SQLite's header cut short
  const std::string short_error = load_error(path);
  EXPECT_NE(short_error.find("ls-session-truncated.db"), std::string::npos) << short_error;
  EXPECT_FALSE(short_error.empty());
  std::filesystem::remove(path);
}

TEST(SessionStore, ReportMissingATableIsRefused) {
  SessionRecording rec = record_two_requests();
  const auto path = temp("ls-session-missing.db");
  save_session_sqlite(rec, path);
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(path.c_str(), &db), SQLITE_OK);
  ASSERT_EQ(sqlite3_exec(db, "DROP TABLE CUPTI_ACTIVITY_KIND_KERNEL", nullptr, nullptr, nullptr), SQLITE_OK);
  sqlite3_close(db);
  const std::string error = load_error(path);
  EXPECT_NE(error.find("ls-session-missing.db"), std::string::npos) << error;
  EXPECT_NE(error.find("CUPTI_ACTIVITY_KIND_KERNEL is missing"), std::string::npos) << error;
  std::filesystem::remove(path);
}

// The reader looks the tables up in one list read from the schema: a view or an index of a
// table's name does not stand in for the table.
TEST(SessionStore, ViewOrIndexInPlaceOfATableIsRefused) {
  SessionRecording rec = record_two_requests();
  const auto path = temp("ls-session-view.db");
  for (const char* swap : {"DROP TABLE CUPTI_ACTIVITY_KIND_KERNEL; CREATE VIEW CUPTI_ACTIVITY_KIND_KERNEL AS SELECT 1",
                           "DROP TABLE spans; CREATE TABLE t(x); CREATE INDEX spans ON t(x)"}) {
    save_session_sqlite(rec, path);
    sqlite3* db = nullptr;
    ASSERT_EQ(sqlite3_open(path.c_str(), &db), SQLITE_OK);
    ASSERT_EQ(sqlite3_exec(db, swap, nullptr, nullptr, nullptr), SQLITE_OK) << swap;
    sqlite3_close(db);
    const std::string error = load_error(path);
    EXPECT_NE(error.find("is missing"), std::string::npos) << swap << ": " << error;
  }
  save_session_sqlite(rec, path);  // and the untouched report still loads
  EXPECT_EQ(load_error(path), "");
  std::filesystem::remove(path);
}

TEST(SessionStore, SqliteFileThatIsNotAReportIsRefused) {
  const auto path = temp("ls-session-other.db");
  std::filesystem::remove(path);
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(path.c_str(), &db), SQLITE_OK);
  ASSERT_EQ(sqlite3_exec(db, "CREATE TABLE t(x); INSERT INTO t VALUES(1);", nullptr, nullptr, nullptr), SQLITE_OK);
  sqlite3_close(db);
  const std::string error = load_error(path);
  EXPECT_NE(error.find("ls-session-other.db: not a LazyScope session file"), std::string::npos) << error;
  std::filesystem::remove(path);
}

}  // namespace
}  // namespace lazyscope

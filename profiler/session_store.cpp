// The session report: plain SQLite with documented tables (profiler/README.md).
#include <sqlite3.h>
#include <unistd.h>

#include <map>
#include <tuple>

#include <nlohmann/json.hpp>

#include "base/atomic_file.h"
#include "base/error.h"
#include "profiler/session_recorder.h"

namespace lazyscope {
namespace {

constexpr int kSchemaVersion = 1;

class Db {
 public:
  Db(const std::filesystem::path& path, int flags) : path_(path.string()) {
    if (sqlite3_open_v2(path_.c_str(), &db_, flags, nullptr) != SQLITE_OK) {
      std::string msg = db_ ? sqlite3_errmsg(db_) : "out of memory";
      sqlite3_close(db_);
      db_ = nullptr;
      throw Error(path_ + ": cannot open the session file: " + msg);
    }
  }
  ~Db() { sqlite3_close(db_); }
  void exec(const std::string& sql) {
    char* err = nullptr;
    if (sqlite3_exec(db_, sql.c_str(), nullptr, nullptr, &err) != SQLITE_OK) {
      std::string msg = err ? err : "unknown error";
      sqlite3_free(err);
      throw Error(path_ + ": " + msg);
    }
  }
  sqlite3_stmt* prepare(const std::string& sql) {
    sqlite3_stmt* st = nullptr;
    if (sqlite3_prepare_v2(db_, sql.c_str(), -1, &st, nullptr) != SQLITE_OK) {
      throw Error(path_ + ": " + sqlite3_errmsg(db_));
    }
    return st;
  }
  // Next row of a SELECT: false at the end; a damaged (truncated, overwritten) file throws
  // instead of ending the table early.
  bool row(sqlite3_stmt* st) {
    const int rc = sqlite3_step(st);
    if (rc == SQLITE_ROW) return true;
    if (rc == SQLITE_DONE) return false;
    throw Error(path_ + ": the session report is damaged (truncated or overwritten?): " + sqlite3_errmsg(db_));
  }
  void step_done(sqlite3_stmt* st) {
    if (sqlite3_step(st) != SQLITE_DONE) throw Error(path_ + ": " + sqlite3_errmsg(db_));
    sqlite3_reset(st);
  }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
  sqlite3* db_ = nullptr;
};

struct Stmt {
  explicit Stmt(sqlite3_stmt* s) : st(s) {}
  ~Stmt() { sqlite3_finalize(st); }
  Stmt& i(int col, int64_t v) {
    sqlite3_bind_int64(st, col, v);
    return *this;
  }
  Stmt& d(int col, double v) {
    sqlite3_bind_double(st, col, v);
    return *this;
  }
  Stmt& s(int col, const std::string& v) {
    sqlite3_bind_text(st, col, v.c_str(), int(v.size()), SQLITE_TRANSIENT);
    return *this;
  }
  sqlite3_stmt* st;
};

const char* kSchema = R"(
CREATE TABLE metadata(key TEXT PRIMARY KEY, value TEXT);
CREATE TABLE requests(id INTEGER PRIMARY KEY, policy TEXT, mode TEXT, start_ms REAL, prompt_tokens INTEGER,
  generated_tokens INTEGER, ttft_ms REAL, decode_ms_per_token REAL, cached_tokens INTEGER, documents INTEGER,
  document_hits INTEGER, bytes_stored INTEGER, bytes_copied INTEGER, blocks_allocated INTEGER,
  blocks_evicted INTEGER, cancelled INTEGER);
CREATE TABLE segments(request INTEGER, t_ms REAL, segment INTEGER, kind TEXT, label TEXT, tokens INTEGER,
  encode_position INTEGER, shift INTEGER, from_cache INTEGER, encode_ms REAL);
CREATE TABLE block_events(request INTEGER, t_ms REAL, action TEXT, block INTEGER, segment INTEGER,
  refcount INTEGER, shift INTEGER);
CREATE TABLE tokens(request INTEGER, policy TEXT, step INTEGER, token_id INTEGER, text TEXT, ms REAL);
CREATE TABLE spans(request INTEGER, name TEXT, category TEXT, start_ms REAL, duration_ms REAL);
)";

SegmentKind segment_kind_from(const std::string& s) {
  for (SegmentKind k : {SegmentKind::Prefix, SegmentKind::Document, SegmentKind::Query, SegmentKind::Copy}) {
    if (s == to_string(k)) return k;
  }
  return SegmentKind::Document;
}

BlockAction block_action_from(const std::string& s) {
  for (BlockAction a : {BlockAction::Allocated, BlockAction::Hit, BlockAction::Copied, BlockAction::Evicted,
                        BlockAction::Released}) {
    if (s == to_string(a)) return a;
  }
  return BlockAction::Allocated;
}

std::string text_column(sqlite3_stmt* st, int col) {
  const unsigned char* t = sqlite3_column_text(st, col);
  return t ? reinterpret_cast<const char*>(t) : "";
}

}  // namespace

void save_session_sqlite(const SessionRecording& r, const std::filesystem::path& path) {
  AtomicFile file(path, "session report");  // fsync'd and renamed over `path` when complete
  {
    Db db(file.temp_path(), SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE);
    db.exec("PRAGMA journal_mode=OFF; BEGIN;");
    db.exec(kSchema);
    db.exec("PRAGMA user_version=" + std::to_string(kSchemaVersion));
    {
      Stmt st(db.prepare("INSERT INTO metadata VALUES(?,?)"));
      std::map<std::string, std::string> meta = r.metadata;
      meta["format"] = "lazyscope-session";
      for (const auto& [k, v] : meta) {
        st.s(1, k).s(2, v);
        db.step_done(st.st);
      }
    }
    {
      Stmt st(db.prepare("INSERT INTO requests VALUES(?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)"));
      for (const RecordedRequest& q : r.requests) {
        const RequestFinishedEvent& e = q.event;
        st.i(1, q.id).s(2, e.policy).s(3, e.mode).d(4, q.start_ms).i(5, e.prompt_tokens).i(6, e.generated_tokens)
            .d(7, e.ttft_ms).d(8, e.decode_ms_per_token).i(9, e.stats.cached_tokens).i(10, e.stats.documents)
            .i(11, e.stats.document_hits).i(12, e.stats.bytes_stored).i(13, e.stats.bytes_copied)
            .i(14, e.stats.blocks_allocated).i(15, e.stats.blocks_evicted).i(16, e.cancelled);
        db.step_done(st.st);
      }
    }
    {
      Stmt st(db.prepare("INSERT INTO segments VALUES(?,?,?,?,?,?,?,?,?,?)"));
      for (const RecordedSegment& s : r.segments) {
        const SegmentEvent& e = s.event;
        st.i(1, s.request).d(2, s.t_ms).i(3, e.segment).s(4, to_string(e.kind)).s(5, e.label).i(6, e.tokens)
            .i(7, e.encode_position).i(8, e.shift).i(9, e.from_cache).d(10, e.encode_ms);
        db.step_done(st.st);
      }
    }
    {
      Stmt st(db.prepare("INSERT INTO block_events VALUES(?,?,?,?,?,?,?)"));
      for (const RecordedBlockEvent& b : r.blocks) {
        st.i(1, b.request).d(2, b.t_ms).s(3, to_string(b.event.action)).i(4, b.event.block).i(5, b.event.segment)
            .i(6, b.event.refcount).i(7, b.event.shift);
        db.step_done(st.st);
      }
    }
    {
      Stmt st(db.prepare("INSERT INTO tokens VALUES(?,?,?,?,?,?)"));
      for (const RecordedToken& t : r.tokens) {
        st.i(1, t.request).s(2, t.event.policy).i(3, t.event.step).i(4, t.event.id).s(5, t.event.text)
            .d(6, t.event.ms_since_submit);
        db.step_done(st.st);
      }
    }
    {
      Stmt st(db.prepare("INSERT INTO spans VALUES(?,?,?,?,?)"));
      for (const RecordedSpan& s : r.spans) {
        st.i(1, s.request).s(2, s.name).s(3, s.category).d(4, s.start_ms).d(5, s.duration_ms);
        db.step_done(st.st);
      }
    }
    db.exec("COMMIT;");
  }
  file.commit();
}

SessionRecording load_session_sqlite(const std::filesystem::path& path) {
  if (!std::filesystem::exists(path)) throw Error(path.string() + ": no such session file");
  Db db(path, SQLITE_OPEN_READONLY);
  SessionRecording r;
  try {
    Stmt meta(db.prepare("SELECT key, value FROM metadata"));
    while (db.row(meta.st)) r.metadata[text_column(meta.st, 0)] = text_column(meta.st, 1);
  } catch (const Error&) {
    throw Error(path.string() + ": not a LazyScope session file (no metadata table)");
  }
  if (r.metadata["format"] != "lazyscope-session") throw Error(path.string() + ": not a LazyScope session file");
  {
    Stmt v(db.prepare("PRAGMA user_version"));
    if (sqlite3_step(v.st) == SQLITE_ROW && sqlite3_column_int(v.st, 0) > kSchemaVersion) {
      throw Error(path.string() + ": written by a newer LazyScope (schema " +
                  std::to_string(sqlite3_column_int(v.st, 0)) + ")");
    }
  }
  {
    Stmt st(db.prepare("SELECT * FROM requests ORDER BY id"));
    while (db.row(st.st)) {
      RecordedRequest q;
      q.id = sqlite3_column_int(st.st, 0);
      q.event.policy = text_column(st.st, 1);
      q.event.mode = text_column(st.st, 2);
      q.start_ms = sqlite3_column_double(st.st, 3);
      q.event.prompt_tokens = sqlite3_column_int(st.st, 4);
      q.event.generated_tokens = sqlite3_column_int(st.st, 5);
      q.event.ttft_ms = sqlite3_column_double(st.st, 6);
      q.event.decode_ms_per_token = sqlite3_column_double(st.st, 7);
      q.event.stats.prompt_tokens = q.event.prompt_tokens;
      q.event.stats.cached_tokens = sqlite3_column_int64(st.st, 8);
      q.event.stats.documents = sqlite3_column_int64(st.st, 9);
      q.event.stats.document_hits = sqlite3_column_int64(st.st, 10);
      q.event.stats.bytes_stored = sqlite3_column_int64(st.st, 11);
      q.event.stats.bytes_copied = sqlite3_column_int64(st.st, 12);
      q.event.stats.blocks_allocated = sqlite3_column_int64(st.st, 13);
      q.event.stats.blocks_evicted = sqlite3_column_int64(st.st, 14);
      q.event.cancelled = sqlite3_column_int(st.st, 15) != 0;
      r.requests.push_back(q);
    }
  }
  {
    Stmt st(db.prepare("SELECT * FROM segments"));
    while (db.row(st.st)) {
      RecordedSegment s;
      s.request = sqlite3_column_int(st.st, 0);
      s.t_ms = sqlite3_column_double(st.st, 1);
      s.event.segment = sqlite3_column_int64(st.st, 2);
      s.event.kind = segment_kind_from(text_column(st.st, 3));
      s.event.label = text_column(st.st, 4);
      s.event.tokens = sqlite3_column_int(st.st, 5);
      s.event.encode_position = sqlite3_column_int(st.st, 6);
      s.event.shift = sqlite3_column_int(st.st, 7);
      s.event.from_cache = sqlite3_column_int(st.st, 8) != 0;
      s.event.encode_ms = sqlite3_column_double(st.st, 9);
      r.segments.push_back(s);
    }
  }
  {
    Stmt st(db.prepare("SELECT * FROM block_events"));
    while (db.row(st.st)) {
      RecordedBlockEvent b;
      b.request = sqlite3_column_int(st.st, 0);
      b.t_ms = sqlite3_column_double(st.st, 1);
      b.event.action = block_action_from(text_column(st.st, 2));
      b.event.block = sqlite3_column_int(st.st, 3);
      b.event.segment = sqlite3_column_int64(st.st, 4);
      b.event.refcount = sqlite3_column_int(st.st, 5);
      b.event.shift = sqlite3_column_int(st.st, 6);
      r.blocks.push_back(b);
    }
  }
  {
    Stmt st(db.prepare("SELECT * FROM tokens"));
    while (db.row(st.st)) {
      RecordedToken t;
      t.request = sqlite3_column_int(st.st, 0);
      t.event.policy = text_column(st.st, 1);
      t.event.step = sqlite3_column_int(st.st, 2);
      t.event.id = sqlite3_column_int(st.st, 3);
      t.event.text = text_column(st.st, 4);
      t.event.ms_since_submit = sqlite3_column_double(st.st, 5);
      r.tokens.push_back(t);
    }
  }
  {
    Stmt st(db.prepare("SELECT * FROM spans"));
    while (db.row(st.st)) {
      r.spans.push_back({sqlite3_column_int(st.st, 0), text_column(st.st, 1), text_column(st.st, 2),
                         sqlite3_column_double(st.st, 3), sqlite3_column_double(st.st, 4)});
    }
  }
  return r;
}

std::string chrome_trace_json(const SessionRecording& r) {
  nlohmann::json events = nlohmann::json::array();
  const std::map<std::string, int> tracks = {{"request", 1}, {"encode", 2}, {"prefill", 3}, {"decode", 3}};
  for (const auto& [name, tid] : tracks) {
    events.push_back({{"ph", "M"}, {"pid", 1}, {"tid", tid}, {"name", "thread_name"},
                      {"args", {{"name", tid == 1 ? "requests" : tid == 2 ? "segment encodes" : "prefill / decode"}}}});
  }
  // Device spans (generate --trace-gpu): a second process "GPU" with kernels and copies on their own
  // tracks; the host ranges that enclose them stay with the engine's host tracks.
  const std::map<std::string, std::pair<int, int>> device_tracks = {
      {"kernel", {2, 1}}, {"memcpy", {2, 2}}, {"memset", {2, 2}}, {"range", {1, 6}}};
  bool any_device = false;
  for (const RecordedSpan& s : r.spans) {
    int pid = 1, tid = 4;
    if (auto it = tracks.find(s.category); it != tracks.end()) {
      tid = it->second;
    } else if (auto dt = device_tracks.find(s.category); dt != device_tracks.end()) {
      std::tie(pid, tid) = dt->second;
      any_device = true;
    }
    events.push_back({{"ph", "X"}, {"pid", pid}, {"tid", tid}, {"name", s.name}, {"cat", s.category},
                      {"ts", s.start_ms * 1000.0}, {"dur", s.duration_ms * 1000.0}, {"args", {{"request", s.request}}}});
  }
  if (any_device) {
    events.push_back({{"ph", "M"}, {"pid", 1}, {"name", "process_name"}, {"args", {{"name", "engine (host)"}}}});
    events.push_back({{"ph", "M"}, {"pid", 1}, {"tid", 6}, {"name", "thread_name"}, {"args", {{"name", "NVTX ranges"}}}});
    events.push_back({{"ph", "M"}, {"pid", 2}, {"name", "process_name"}, {"args", {{"name", "GPU"}}}});
    events.push_back({{"ph", "M"}, {"pid", 2}, {"tid", 1}, {"name", "thread_name"}, {"args", {{"name", "kernels"}}}});
    events.push_back({{"ph", "M"}, {"pid", 2}, {"tid", 2}, {"name", "thread_name"}, {"args", {{"name", "copies"}}}});
  }
  for (const RecordedBlockEvent& b : r.blocks) {
    if (b.event.action == BlockAction::Allocated || b.event.action == BlockAction::Released) continue;
    events.push_back({{"ph", "i"}, {"pid", 1}, {"tid", 5}, {"s", "t"}, {"name", to_string(b.event.action)},
                      {"ts", b.t_ms * 1000.0}, {"args", {{"block", b.event.block}, {"shift", b.event.shift}}}});
  }
  nlohmann::json root = {{"traceEvents", events}, {"displayTimeUnit", "ms"}, {"metadata", r.metadata}};
  return root.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

}  // namespace lazyscope

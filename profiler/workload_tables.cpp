#include "profiler/workload_tables.h"

#include <sqlite3.h>
#include <unistd.h>

#include "base/error.h"
#include "profiler/session_recorder.h"

namespace lazyscope {
namespace {

const char* kWorkloadSchema = R"(
CREATE TABLE workload_runs(run INTEGER PRIMARY KEY, policy TEXT, mode TEXT, backend TEXT, kv_budget_bytes INTEGER,
  num_blocks INTEGER, block_size INTEGER, requests INTEGER, hit_ratio_tokens REAL, hit_ratio_documents REAL,
  prefix_hit_ratio REAL, ttft_p50_ms REAL, ttft_p90_ms REAL, ttft_p99_ms REAL, ttft_mean_ms REAL, tpot_p50_ms REAL,
  tpot_p99_ms REAL, throughput_tok_s REAL, output_tok_s REAL, makespan_s REAL, bytes_copied INTEGER,
  bytes_stored INTEGER, evictions INTEGER, preemptions INTEGER, peak_blocks INTEGER, steps INTEGER, wall_s REAL);
CREATE TABLE workload_requests(run INTEGER, request INTEGER, arrival_s REAL, admitted_s REAL, first_token_s REAL,
  finish_s REAL, prompt_tokens INTEGER, prefix_tokens INTEGER, prefix_hit INTEGER, document_tokens INTEGER,
  cached_document_tokens INTEGER, documents INTEGER, document_hits INTEGER, repeats INTEGER, output_tokens INTEGER,
  preemptions INTEGER, bytes_copied INTEGER);
CREATE TABLE workload_steps(run INTEGER, step INTEGER, t_s REAL, duration_s REAL, running INTEGER, waiting INTEGER,
  decode_batch INTEGER, prefill_tokens INTEGER, blocks_in_use INTEGER, blocks_cached INTEGER, blocks_free INTEGER);
)";

struct Sql {
  explicit Sql(const std::filesystem::path& path) : path_(path.string()) {
    if (sqlite3_open_v2(path_.c_str(), &db, SQLITE_OPEN_READWRITE, nullptr) != SQLITE_OK) fail();
  }
  ~Sql() {
    for (sqlite3_stmt* s : stmts) sqlite3_finalize(s);
    sqlite3_close(db);
  }
  [[noreturn]] void fail() { throw Error(path_ + ": " + (db ? sqlite3_errmsg(db) : "cannot open")); }
  void exec(const char* sql) {
    if (sqlite3_exec(db, sql, nullptr, nullptr, nullptr) != SQLITE_OK) fail();
  }
  sqlite3_stmt* prepare(const char* sql) {
    sqlite3_stmt* s = nullptr;
    if (sqlite3_prepare_v2(db, sql, -1, &s, nullptr) != SQLITE_OK) fail();
    stmts.push_back(s);
    return s;
  }
  // Binds the values in order (int64 or double), runs and resets.
  template <typename... T>
  void row(sqlite3_stmt* s, T... values) {
    int col = 1;
    (bind(s, col++, values), ...);
    if (sqlite3_step(s) != SQLITE_DONE) fail();
    sqlite3_reset(s);
  }
  static void bind(sqlite3_stmt* s, int col, double v) { sqlite3_bind_double(s, col, v); }
  static void bind(sqlite3_stmt* s, int col, int64_t v) { sqlite3_bind_int64(s, col, v); }
  static void bind(sqlite3_stmt* s, int col, int v) { sqlite3_bind_int64(s, col, v); }
  static void bind(sqlite3_stmt* s, int col, const std::string& v) {
    sqlite3_bind_text(s, col, v.c_str(), int(v.size()), SQLITE_TRANSIENT);
  }
  std::string path_;
  sqlite3* db = nullptr;
  std::vector<sqlite3_stmt*> stmts;
};

}  // namespace

void save_workload_sqlite(const std::map<std::string, std::string>& metadata, const std::vector<ServingResult>& runs,
                          const std::filesystem::path& path) {
  // The session tables first (the same reader opens it), the workload tables into the same file.
  SessionRecording rec;
  rec.metadata = metadata;
  rec.metadata["kind"] = "workload";
  int id = 1;
  for (const ServingResult& r : runs) {
    for (const RequestRecord& q : r.records) {
      if (q.output_tokens == 0) continue;
      RecordedRequest rr;
      rr.id = id++;
      rr.start_ms = 1e3 * q.arrival_s;
      rr.event.policy = r.policy;
      rr.event.mode = r.mode;
      rr.event.prompt_tokens = q.prompt_tokens;
      rr.event.generated_tokens = q.output_tokens;
      rr.event.ttft_ms = q.ttft_ms();
      rr.event.decode_ms_per_token = q.tpot_ms();
      rr.event.stats.prompt_tokens = q.prompt_tokens;
      rr.event.stats.cached_tokens = q.cached_document_tokens + (q.prefix_hit ? q.prefix_tokens : 0);
      rr.event.stats.documents = q.documents;
      rr.event.stats.document_hits = q.document_hits;
      rr.event.stats.bytes_copied = q.bytes_copied;
      rec.requests.push_back(std::move(rr));
    }
  }
  const std::filesystem::path tmp = path.string() + ".workload" + std::to_string(getpid());
  std::error_code ec;
  std::filesystem::remove(tmp, ec);
  try {
    save_session_sqlite(rec, tmp);
    Sql db(tmp);
    db.exec("BEGIN;");
    db.exec(kWorkloadSchema);
    sqlite3_stmt* run_st = db.prepare("INSERT INTO workload_runs VALUES(?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)");
    sqlite3_stmt* req_st = db.prepare("INSERT INTO workload_requests VALUES(?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)");
    sqlite3_stmt* step_st = db.prepare("INSERT INTO workload_steps VALUES(?,?,?,?,?,?,?,?,?,?,?)");
    for (std::size_t i = 0; i < runs.size(); ++i) {
      const ServingResult& r = runs[i];
      const int64_t run = int64_t(i) + 1;
      db.row(run_st, run, r.policy, r.mode, r.backend, r.kv_budget_bytes, r.num_blocks, r.block_size, r.requests,
             r.hit_ratio_tokens, r.hit_ratio_documents, r.prefix_hit_ratio, r.ttft_ms.p50, r.ttft_ms.p90, r.ttft_ms.p99,
             r.ttft_ms.mean, r.tpot_ms.p50, r.tpot_ms.p99, r.throughput_tok_s, r.output_tok_s, r.makespan_s,
             r.bytes_copied, r.bytes_stored, r.evictions, r.preemptions, r.peak_blocks, r.steps, r.wall_s);
      for (const RequestRecord& q : r.records) {
        db.row(req_st, run, q.index, q.arrival_s, q.admitted_s, q.first_token_s, q.finish_s, q.prompt_tokens,
               q.prefix_tokens, int(q.prefix_hit), q.document_tokens, q.cached_document_tokens, q.documents,
               q.document_hits, q.repeats, q.output_tokens, q.preemptions, q.bytes_copied);
      }
      for (const StepSample& s : r.samples) {
        db.row(step_st, run, s.step, s.t_s, s.duration_s, s.running, s.waiting, s.decode_batch, s.prefill_tokens,
               s.blocks_in_use, s.blocks_cached, s.blocks_free);
      }
    }
    db.exec("COMMIT;");
  } catch (...) {
    std::filesystem::remove(tmp, ec);
    throw;
  }
  std::filesystem::rename(tmp, path, ec);
  if (ec) {
    std::filesystem::remove(tmp, ec);
    throw Error(path.string() + ": cannot write the session report");
  }
}

}  // namespace lazyscope

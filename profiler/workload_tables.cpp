#include "profiler/workload_tables.h"

#include <sqlite3.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>

#include "base/error.h"
#include "profiler/session_recorder.h"

namespace lazyscope {
namespace {

const char* kWorkloadSchema = R"(
CREATE TABLE workload_runs(run INTEGER PRIMARY KEY, policy TEXT, mode TEXT, backend TEXT, kv_budget_bytes INTEGER,
  num_blocks INTEGER, block_size INTEGER, requests INTEGER, hit_ratio_tokens REAL, hit_ratio_documents REAL,
  prefix_hit_ratio REAL, ttft_p50_ms REAL, ttft_p90_ms REAL, ttft_p99_ms REAL, ttft_mean_ms REAL, tpot_p50_ms REAL,
  tpot_p99_ms REAL, throughput_tok_s REAL, output_tok_s REAL, makespan_s REAL, bytes_copied INTEGER,
  bytes_stored INTEGER, evictions INTEGER, preemptions INTEGER, peak_blocks INTEGER, steps INTEGER, wall_s REAL,
  tpot_p90_ms REAL, tpot_mean_ms REAL, e2e_p50_ms REAL, e2e_p90_ms REAL, e2e_p99_ms REAL, e2e_mean_ms REAL,
  host_fraction REAL, cancelled INTEGER);
CREATE TABLE workload_requests(run INTEGER, request INTEGER, arrival_s REAL, admitted_s REAL, first_token_s REAL,
  finish_s REAL, prompt_tokens INTEGER, prefix_tokens INTEGER, prefix_hit INTEGER, document_tokens INTEGER,
  cached_document_tokens INTEGER, documents INTEGER, document_hits INTEGER, repeats INTEGER, output_tokens INTEGER,
  preemptions INTEGER, bytes_copied INTEGER);
CREATE TABLE workload_steps(run INTEGER, step INTEGER, t_s REAL, duration_s REAL, running INTEGER, waiting INTEGER,
  decode_batch INTEGER, prefill_tokens INTEGER, blocks_in_use INTEGER, blocks_cached INTEGER, blocks_free INTEGER);
CREATE TABLE workload_documents(document INTEGER PRIMARY KEY, source_id TEXT, title TEXT, tokens INTEGER);
CREATE TABLE workload_placements(request INTEGER, slot INTEGER, document INTEGER, start INTEGER, shift INTEGER,
  tokens INTEGER);
)";

struct Sql {
  explicit Sql(const std::filesystem::path& path, int flags = SQLITE_OPEN_READWRITE) : path_(path.string()) {
    if (sqlite3_open_v2(path_.c_str(), &db, flags, nullptr) != SQLITE_OK) fail();
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

WorkloadPrompts workload_prompts(const Workload& w) {
  WorkloadPrompts p;
  p.source = w.source;
  p.prefix_tokens = int(w.prefix.size());
  for (std::size_t d = 0; d < w.documents.size(); ++d) {
    WorkloadDocumentRow row;
    row.document = int(d);
    if (d < w.document_ids.size()) row.source_id = w.document_ids[d];
    row.title = d < w.document_titles.size() ? w.document_titles[d] : "doc " + std::to_string(d);
    row.tokens = int(w.documents[d].size());
    p.documents.push_back(std::move(row));
  }
  for (const WorkloadRequest& r : w.requests) {
    int start = p.prefix_tokens;
    for (std::size_t slot = 0; slot < r.documents.size(); ++slot) {
      const int tokens = int(w.documents.at(std::size_t(r.documents[slot])).size());
      p.placements.push_back({r.index, int(slot), r.documents[slot], start, start - p.prefix_tokens, tokens});
      start += tokens;
    }
  }
  return p;
}

void save_workload_sqlite(const std::map<std::string, std::string>& metadata, const std::vector<ServingResult>& runs,
                          const std::filesystem::path& path, const WorkloadPrompts* prompts,
                          const SessionRecording* session) {
  // The session tables first (the same reader opens it), the workload tables into the same file.
  SessionRecording rec = session ? *session : SessionRecording{};
  for (const auto& [k, v] : metadata) rec.metadata[k] = v;
  rec.metadata["kind"] = "workload";
  if (prompts) {
    rec.metadata["workload.source"] = prompts->source;
    rec.metadata["workload.prefix_tokens"] = std::to_string(prompts->prefix_tokens);
  }
  int id = 1;
  for (const RecordedRequest& r : rec.requests) id = std::max(id, r.id + 1);
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
    sqlite3_stmt* run_st =
        db.prepare("INSERT INTO workload_runs VALUES(?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)");
    sqlite3_stmt* req_st = db.prepare("INSERT INTO workload_requests VALUES(?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)");
    sqlite3_stmt* step_st = db.prepare("INSERT INTO workload_steps VALUES(?,?,?,?,?,?,?,?,?,?,?)");
    for (std::size_t i = 0; i < runs.size(); ++i) {
      const ServingResult& r = runs[i];
      const int64_t run = int64_t(i) + 1;
      db.row(run_st, run, r.policy, r.mode, r.backend, r.kv_budget_bytes, r.num_blocks, r.block_size, r.requests,
             r.hit_ratio_tokens, r.hit_ratio_documents, r.prefix_hit_ratio, r.ttft_ms.p50, r.ttft_ms.p90, r.ttft_ms.p99,
             r.ttft_ms.mean, r.tpot_ms.p50, r.tpot_ms.p99, r.throughput_tok_s, r.output_tok_s, r.makespan_s,
             r.bytes_copied, r.bytes_stored, r.evictions, r.preemptions, r.peak_blocks, r.steps, r.wall_s, r.tpot_ms.p90,
             r.tpot_ms.mean, r.e2e_ms.p50, r.e2e_ms.p90, r.e2e_ms.p99, r.e2e_ms.mean, r.host_fraction, int(r.cancelled));
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
    if (prompts) {
      sqlite3_stmt* doc_st = db.prepare("INSERT INTO workload_documents VALUES(?,?,?,?)");
      sqlite3_stmt* place_st = db.prepare("INSERT INTO workload_placements VALUES(?,?,?,?,?,?)");
      for (const WorkloadDocumentRow& d : prompts->documents) db.row(doc_st, d.document, d.source_id, d.title, d.tokens);
      for (const WorkloadPlacementRow& p : prompts->placements) {
        db.row(place_st, p.request, p.slot, p.document, p.start, p.shift, p.tokens);
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

namespace {

// Rows of one table, read by column name (columns a report of an older version lacks read as 0).
class Rows {
 public:
  Rows(Sql& db, const std::string& sql) : db_(db), st_(db.prepare(sql.c_str())) {
    for (int c = 0; c < sqlite3_column_count(st_); ++c) columns_[sqlite3_column_name(st_, c)] = c;
  }
  bool next() {
    const int rc = sqlite3_step(st_);
    if (rc == SQLITE_ROW) return true;
    if (rc != SQLITE_DONE) db_.fail();
    return false;
  }
  double real(const char* column) const {
    const auto it = columns_.find(column);
    return it == columns_.end() ? 0.0 : sqlite3_column_double(st_, it->second);
  }
  int64_t integer(const char* column) const {
    const auto it = columns_.find(column);
    return it == columns_.end() ? 0 : sqlite3_column_int64(st_, it->second);
  }
  int small(const char* column) const { return int(integer(column)); }
  std::string text(const char* column) const {
    const auto it = columns_.find(column);
    if (it == columns_.end()) return {};
    const unsigned char* t = sqlite3_column_text(st_, it->second);
    return t ? reinterpret_cast<const char*>(t) : "";
  }

 private:
  Sql& db_;
  sqlite3_stmt* st_;
  std::map<std::string, int> columns_;
};

bool has_table(Sql& db, const char* name) {
  sqlite3_stmt* st = db.prepare("SELECT 1 FROM sqlite_master WHERE type='table' AND name=?");
  sqlite3_bind_text(st, 1, name, -1, SQLITE_TRANSIENT);
  const int rc = sqlite3_step(st);
  if (rc != SQLITE_ROW && rc != SQLITE_DONE) db.fail();
  return rc == SQLITE_ROW;
}

}  // namespace

std::optional<WorkloadReport> load_workload_sqlite(const std::filesystem::path& path) {
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec)) throw Error(path.string() + ": no such session report");
  Sql db(path, SQLITE_OPEN_READONLY);
  if (!has_table(db, "workload_runs")) return std::nullopt;
  for (const char* t : {"workload_requests", "workload_steps", "metadata"}) {
    if (!has_table(db, t)) throw Error(path.string() + ": a workload report without its " + std::string(t) + " table");
  }
  WorkloadReport report;
  {
    Rows m(db, "SELECT key, value FROM metadata");
    while (m.next()) report.metadata[m.text("key")] = m.text("value");
  }
  std::map<int64_t, std::size_t> index;  // run id -> position
  {
    Rows r(db, "SELECT * FROM workload_runs ORDER BY run");
    while (r.next()) {
      ServingResult x;
      x.policy = r.text("policy");
      x.mode = r.text("mode");
      x.backend = r.text("backend");
      x.kv_budget_bytes = r.integer("kv_budget_bytes");
      x.num_blocks = r.small("num_blocks");
      x.block_size = r.small("block_size");
      x.requests = r.small("requests");
      x.hit_ratio_tokens = r.real("hit_ratio_tokens");
      x.hit_ratio_documents = r.real("hit_ratio_documents");
      x.prefix_hit_ratio = r.real("prefix_hit_ratio");
      x.ttft_ms = {r.real("ttft_p50_ms"), r.real("ttft_p90_ms"), r.real("ttft_p99_ms"), r.real("ttft_mean_ms")};
      x.tpot_ms = {r.real("tpot_p50_ms"), r.real("tpot_p90_ms"), r.real("tpot_p99_ms"), r.real("tpot_mean_ms")};
      x.e2e_ms = {r.real("e2e_p50_ms"), r.real("e2e_p90_ms"), r.real("e2e_p99_ms"), r.real("e2e_mean_ms")};
      x.throughput_tok_s = r.real("throughput_tok_s");
      x.output_tok_s = r.real("output_tok_s");
      x.makespan_s = r.real("makespan_s");
      x.bytes_copied = r.integer("bytes_copied");
      x.bytes_stored = r.integer("bytes_stored");
      x.evictions = r.integer("evictions");
      x.preemptions = r.integer("preemptions");
      x.peak_blocks = r.small("peak_blocks");
      x.steps = r.integer("steps");
      x.wall_s = r.real("wall_s");
      x.host_fraction = r.real("host_fraction");
      x.cancelled = r.integer("cancelled") != 0;
      index[r.integer("run")] = report.runs.size();
      report.runs.push_back(std::move(x));
    }
  }
  auto run_of = [&](int64_t run) -> ServingResult& {
    const auto it = index.find(run);
    if (it == index.end()) {
      throw Error(path.string() + ": workload row names run " + std::to_string(run) + ", which workload_runs lacks");
    }
    return report.runs[it->second];
  };
  {
    Rows q(db, "SELECT * FROM workload_requests ORDER BY run, request");
    while (q.next()) {
      RequestRecord rec;
      rec.index = q.small("request");
      rec.arrival_s = q.real("arrival_s");
      rec.admitted_s = q.real("admitted_s");
      rec.first_token_s = q.real("first_token_s");
      rec.finish_s = q.real("finish_s");
      rec.prompt_tokens = q.small("prompt_tokens");
      rec.prefix_tokens = q.small("prefix_tokens");
      rec.prefix_hit = q.integer("prefix_hit") != 0;
      rec.document_tokens = q.small("document_tokens");
      rec.cached_document_tokens = q.small("cached_document_tokens");
      rec.documents = q.small("documents");
      rec.document_hits = q.small("document_hits");
      rec.repeats = q.small("repeats");
      rec.output_tokens = q.small("output_tokens");
      rec.preemptions = q.small("preemptions");
      rec.bytes_copied = q.integer("bytes_copied");
      run_of(q.integer("run")).records.push_back(rec);
    }
  }
  {
    Rows st(db, "SELECT * FROM workload_steps ORDER BY run, step");
    while (st.next()) {
      StepSample s;
      s.step = st.integer("step");
      s.t_s = st.real("t_s");
      s.duration_s = st.real("duration_s");
      s.running = st.small("running");
      s.waiting = st.small("waiting");
      s.decode_batch = st.small("decode_batch");
      s.prefill_tokens = st.small("prefill_tokens");
      s.blocks_in_use = st.small("blocks_in_use");
      s.blocks_cached = st.small("blocks_cached");
      s.blocks_free = st.small("blocks_free");
      run_of(st.integer("run")).samples.push_back(s);
    }
  }
  if (has_table(db, "workload_documents") && has_table(db, "workload_placements")) {
    Rows d(db, "SELECT * FROM workload_documents ORDER BY document");
    while (d.next()) {
      report.prompts.documents.push_back({d.small("document"), d.text("source_id"), d.text("title"), d.small("tokens")});
    }
    Rows p(db, "SELECT * FROM workload_placements ORDER BY request, slot");
    while (p.next()) {
      report.prompts.placements.push_back({p.small("request"), p.small("slot"), p.small("document"), p.small("start"),
                                           p.small("shift"), p.small("tokens")});
    }
    report.prompts.source = report.metadata.count("workload.source") ? report.metadata["workload.source"] : "";
    report.prompts.prefix_tokens = report.metadata.count("workload.prefix_tokens")
                                       ? std::atoi(report.metadata["workload.prefix_tokens"].c_str())
                                       : 0;
  }
  return report;
}

}  // namespace lazyscope

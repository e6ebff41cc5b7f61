#include "corpora/document_store.h"

#include <fcntl.h>
#include <sqlite3.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <chrono>
#include <ctime>
#include <mutex>
#include <nlohmann/json.hpp>
#include <unordered_set>

#include "corpora/chunking.h"
#include "base/atomic_file.h"
#include "base/error.h"

namespace lazyscope::corpora {
namespace fs = std::filesystem;

// Schema (version 1), documented for readers of the file in corpora/sample/README.md:
//   meta(key TEXT PRIMARY KEY, value TEXT)
//   documents(docid INTEGER PRIMARY KEY, id TEXT UNIQUE, title, text, parent_id, word_count,
//             popularity)
//   questions(qid INTEGER PRIMARY KEY, id, question, answers JSON, doc_ids JSON, kind)
//   documents_fts: FTS5 external-content index over documents(title, text)
namespace {

constexpr const char* kSchemaVersion = "1";
constexpr double kTitleWeight = 2.0;
constexpr double kTextWeight = 1.0;

struct Statement {
  sqlite3_stmt* stmt = nullptr;
  sqlite3* db = nullptr;

  Statement(sqlite3* database, std::string_view sql, const fs::path& path) : db(database) {
    if (sqlite3_prepare_v2(db, sql.data(), int(sql.size()), &stmt, nullptr) != SQLITE_OK)
      throw Error(path.string() + ": SQLite error: " + sqlite3_errmsg(db));
  }
  ~Statement() { sqlite3_finalize(stmt); }
  Statement(const Statement&) = delete;
  Statement& operator=(const Statement&) = delete;

  void bind(int index, std::string_view text) {
    sqlite3_bind_text(stmt, index, text.data(), int(text.size()), SQLITE_TRANSIENT);
  }
  void bind(int index, int64_t value) { sqlite3_bind_int64(stmt, index, value); }
  void bind(int index, double value) { sqlite3_bind_double(stmt, index, value); }
  void bind_null(int index) { sqlite3_bind_null(stmt, index); }

  // true while a row is available.
  bool step(const fs::path& path) {
    int rc = sqlite3_step(stmt);
    if (rc == SQLITE_ROW) return true;
    if (rc == SQLITE_DONE) return false;
    throw Error(path.string() + ": SQLite error: " + sqlite3_errmsg(db));
  }
  void reset() {
    sqlite3_reset(stmt);
    sqlite3_clear_bindings(stmt);
  }
  std::string text(int column) const {
    auto* p = reinterpret_cast<const char*>(sqlite3_column_text(stmt, column));
    return p ? std::string(p, std::size_t(sqlite3_column_bytes(stmt, column))) : std::string();
  }
  int64_t integer(int column) const { return sqlite3_column_int64(stmt, column); }
  double real(int column) const { return sqlite3_column_double(stmt, column); }
};

void exec(sqlite3* db, const char* sql, const fs::path& path) {
  char* message = nullptr;
  if (sqlite3_exec(db, sql, nullptr, nullptr, &message) != SQLITE_OK) {
    std::string text = message ? message : sqlite3_errmsg(db);
    sqlite3_free(message);
    throw Error(path.string() + ": SQLite error: " + text);
  }
}

constexpr const char* kDocumentColumns =
    "d.docid, d.id, d.title, d.text, d.parent_id, d.popularity";

Document read_document(const Statement& s, int first = 0) {
  Document doc;
  doc.rowid = s.integer(first);
  doc.id = s.text(first + 1);
  doc.title = s.text(first + 2);
  doc.text = s.text(first + 3);
  doc.parent_id = s.text(first + 4);
  doc.popularity = s.integer(first + 5);
  return doc;
}

std::string utc_now() {
  std::time_t now = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&now, &tm);
  char buffer[32];
  std::strftime(buffer, sizeof buffer, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buffer;
}

bool is_stopword(std::string_view word) {
  static const std::unordered_set<std::string_view> kStopwords = {
      "a",    "an",    "and",   "are",  "as",   "at",    "be",  "by",  "did",  "do",
      "does", "for",   "from",  "had",  "has",  "have",  "in",  "is",  "it",   "its",
      "of",   "on",    "or",    "that", "the",  "this",  "to",  "was", "were", "what",
      "when", "where", "which", "who",  "whom", "whose", "why", "how", "with"};
  return kStopwords.count(word) > 0;
}

// Free text -> lower-cased words; common English function words are dropped unless nothing
// else is left.
std::vector<std::string> query_words(std::string_view query) {
  std::vector<std::string> words;
  std::string current;
  auto flush = [&] {
    if (!current.empty()) words.push_back(std::move(current));
    current.clear();
  };
  for (char c : query) {
    auto u = static_cast<unsigned char>(c);
    if (std::isalnum(u) || u >= 0x80)
      current.push_back(u < 0x80 ? char(std::tolower(u)) : c);
    else
      flush();
  }
  flush();
  std::vector<std::string> content;
  for (const auto& w : words)
    if (!is_stopword(w)) content.push_back(w);
  if (content.empty()) content = words;
  std::sort(content.begin(), content.end());
  content.erase(std::unique(content.begin(), content.end()), content.end());
  return content;
}

// Words quoted (so FTS5 operators and punctuation are inert) and ORed.
std::string to_fts_query(const std::vector<std::string>& words) {
  std::string out;
  for (const auto& w : words) {
    if (!out.empty()) out += " OR ";
    out += '"';
    out += w;
    out += '"';
  }
  return out;
}

std::string json_strings(const std::vector<std::string>& values) {
  return nlohmann::json(values).dump();
}

// A list column as written by json_strings; a hand-edited or damaged store is an Error naming it.
std::vector<std::string> parse_json_strings(const std::string& text, const fs::path& store,
                                            const char* column) {
  if (text.empty()) return {};
  try {
    return nlohmann::json::parse(text).get<std::vector<std::string>>();
  } catch (const nlohmann::json::exception& e) {
    throw Error(store.string() + ": questions." + column +
                " is not a JSON list of strings (a damaged corpus?): " + e.what());
  }
}

// Builds the whole store in `temp`; throws on any problem (the caller deletes the file).
void write_store(const fs::path& temp, const fs::path& target, const CorpusData& data,
                 const ImportOptions& options) {
  sqlite3* db = nullptr;
  if (sqlite3_open_v2(temp.c_str(), &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, nullptr) !=
      SQLITE_OK) {
    std::string message = db ? sqlite3_errmsg(db) : "out of memory";
    sqlite3_close(db);
    throw Error(temp.string() + ": cannot create SQLite file: " + message);
  }
  struct Closer {
    sqlite3* db;
    ~Closer() { sqlite3_close(db); }
  } closer{db};
  // The file is private until the rename, so durability comes from one fsync at the end.
  exec(db, "PRAGMA journal_mode=OFF; PRAGMA synchronous=OFF; PRAGMA cache_size=-131072;", target);
  exec(db, "BEGIN", target);
  exec(db,
       "CREATE TABLE meta(key TEXT PRIMARY KEY, value TEXT NOT NULL);"
       "CREATE TABLE documents(docid INTEGER PRIMARY KEY, id TEXT NOT NULL UNIQUE, title TEXT NOT "
       "NULL,"
       " text TEXT NOT NULL, parent_id TEXT, word_count INTEGER NOT NULL,"
       " popularity INTEGER NOT NULL DEFAULT 0);"
       "CREATE TABLE questions(qid INTEGER PRIMARY KEY, id TEXT NOT NULL, question TEXT NOT NULL,"
       " answers TEXT NOT NULL, doc_ids TEXT NOT NULL, kind TEXT NOT NULL);"
       "CREATE VIRTUAL TABLE documents_fts USING fts5(title, text, content='documents',"
       " content_rowid='docid', tokenize='porter unicode61 remove_diacritics 2');",
       target);

  const double total = double(data.documents.size() + data.questions.size()) + 1.0;
  auto report = [&](double done, std::string_view what) {
    if (options.progress) options.progress(std::min(1.0, done / total), what);
  };
  report(0, "writing documents");
  {
    Statement insert(
        db,
        "INSERT INTO documents(docid, id, title, text, parent_id, word_count) VALUES(?,?,?,?,?,?)",
        target);
    Statement index(db, "INSERT INTO documents_fts(rowid, title, text) VALUES(?,?,?)", target);
    std::unordered_set<std::string_view> ids;
    ids.reserve(data.documents.size() * 2);
    for (std::size_t i = 0; i < data.documents.size(); ++i) {
      const Document& doc = data.documents[i];
      std::string where = std::string("document ").append(std::to_string(i + 1));
      if (doc.id.empty()) throw Error(target.string() + ": " + where + " has an empty id");
      if (!ids.insert(doc.id).second)
        throw Error(target.string() + ": " + where + ": duplicate document id \"" + doc.id + "\"");
      int64_t rowid = int64_t(i) + 1;
      insert.bind(1, rowid);
      insert.bind(2, doc.id);
      insert.bind(3, doc.title);
      insert.bind(4, doc.text);
      if (doc.parent_id.empty())
        insert.bind_null(5);
      else
        insert.bind(5, doc.parent_id);
      insert.bind(6, int64_t(count_words(doc.text)));
      insert.step(target);
      insert.reset();
      index.bind(1, rowid);
      index.bind(2, doc.title);
      index.bind(3, doc.text);
      index.step(target);
      index.reset();
      if (i % 2048 == 0) report(double(i), "writing documents");
    }
    Statement question(
        db, "INSERT INTO questions(id, question, answers, doc_ids, kind) VALUES(?,?,?,?,?)",
        target);
    for (std::size_t i = 0; i < data.questions.size(); ++i) {
      const Question& q = data.questions[i];
      for (const std::string& id : q.doc_ids)
        if (!ids.count(id))
          throw Error(target.string() + ": question " + std::to_string(i + 1) + " (" + q.id +
                      ") names unknown document id \"" + id + "\"");
      question.bind(1, q.id.empty() ? std::string("q").append(std::to_string(i + 1)) : q.id);
      question.bind(2, q.question);
      question.bind(3, json_strings(q.answers));
      question.bind(4, json_strings(q.doc_ids));
      question.bind(5, q.kind);
      question.step(target);
      question.reset();
      if (i % 2048 == 0) report(double(data.documents.size() + i), "writing questions");
    }
    Statement meta(db, "INSERT INTO meta(key, value) VALUES(?,?)", target);
    auto put = [&](std::string_view key, std::string_view value) {
      meta.bind(1, key);
      meta.bind(2, value);
      meta.step(target);
      meta.reset();
    };
    put("schema_version", kSchemaVersion);
    put("name", options.name.empty() ? target.stem().string() : options.name);
    put("source_format", options.source_format);
    put("source_path", options.source_path);
    put("source_hash", options.source_hash);
    put("created_at", utc_now());
  }
  report(total - 1, "optimizing index");
  exec(db, "INSERT INTO documents_fts(documents_fts) VALUES('optimize')", target);
  exec(db, "COMMIT", target);
}

}  // namespace

struct DocumentStore::Impl {
  sqlite3* db = nullptr;
  fs::path path;
  Mode mode = Mode::read_write;
  int64_t document_count = 0;  // at open; imports replace the file, never grow it in place
  mutable std::mutex mutex;
  ~Impl() { sqlite3_close(db); }
};

DocumentStore::DocumentStore(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
DocumentStore::DocumentStore(DocumentStore&&) noexcept = default;
DocumentStore& DocumentStore::operator=(DocumentStore&&) noexcept = default;
DocumentStore::~DocumentStore() = default;

DocumentStore DocumentStore::open(const fs::path& path, Mode mode) {
  std::error_code ec;
  if (!fs::is_regular_file(path, ec)) throw Error(path.string() + ": corpus file not found");
  auto impl = std::make_unique<Impl>();
  impl->path = path;
  impl->mode = mode;
  int flags = mode == Mode::read_only ? SQLITE_OPEN_READONLY : SQLITE_OPEN_READWRITE;
  if (sqlite3_open_v2(path.c_str(), &impl->db, flags, nullptr) != SQLITE_OK)
    throw Error(path.string() +
                ": cannot open: " + (impl->db ? sqlite3_errmsg(impl->db) : "out of memory"));
  sqlite3_busy_timeout(impl->db, 5000);
  std::string version;
  try {
    Statement s(impl->db, "SELECT value FROM meta WHERE key = 'schema_version'", path);
    if (s.step(path)) version = s.text(0);
  } catch (const Error&) {
    throw Error(path.string() + ": not a LazyScope corpus (no readable meta table)");
  }
  if (version != kSchemaVersion)
    throw Error(path.string() + ": unsupported corpus schema version \"" + version +
                "\" (expected " + kSchemaVersion + "; re-import the corpus)");
  // Per-term document frequencies for query pruning; a temp table, so read-only files work too.
  exec(impl->db,
       "CREATE VIRTUAL TABLE temp.documents_vocab USING fts5vocab(main, documents_fts, 'row')",
       path);
  {
    Statement s(impl->db, "SELECT COUNT(*) FROM documents", path);
    s.step(path);
    impl->document_count = s.integer(0);
  }
  return DocumentStore(std::move(impl));
}

DocumentStore DocumentStore::import(const fs::path& path, const CorpusData& data,
                                    const ImportOptions& options) {
  fs::path target = fs::absolute(path);
  std::error_code ec;
  if (!target.parent_path().empty()) fs::create_directories(target.parent_path(), ec);
  // Never clobber something that is not a corpus (a session report, a typo'd source file).
  if (fs::exists(target, ec)) {
    try {
      open(target, Mode::read_only);
    } catch (const Error&) {
      throw Error(target.string() +
                  ": exists and is not a LazyScope corpus; refusing to replace it");
    }
  }
  // Written beside the target, fsync'd and renamed over it; a killed import's temporary is
  // removed by the next import of the same target.
  AtomicFile file(target, "corpus store");
  try {
    write_store(file.temp_path(), target, data, options);
    file.commit();
  } catch (const fs::filesystem_error& e) {
    throw Error(target.string() + ": cannot replace the corpus file: " + e.what());
  }
  if (options.progress) options.progress(1.0, "done");
  return open(target, Mode::read_write);
}

std::vector<SearchHit> DocumentStore::search(std::string_view query, int k) const {
  SearchOptions options;
  options.k = k;
  return search(query, options);
}

std::vector<SearchHit> DocumentStore::search(std::string_view query,
                                             const SearchOptions& options) const {
  std::vector<std::string> words = query_words(query);
  if (words.empty() || options.k <= 0) return {};
  std::lock_guard lock(impl_->mutex);
  // FTS5's BM25 gives a term in more than half the documents an IDF of ~0, so it cannot change
  // the order of documents matching any rarer term; leaving it out spares scoring its long
  // posting list. The rarest word is always kept.
  if (words.size() > 1) {
    Statement frequency(impl_->db, "SELECT doc FROM temp.documents_vocab WHERE term = ?",
                        impl_->path);
    std::vector<std::pair<int64_t, std::string>> by_frequency;
    for (const auto& w : words) {
      frequency.bind(1, w);
      by_frequency.emplace_back(frequency.step(impl_->path) ? frequency.integer(0) : 0, w);
      frequency.reset();
    }
    std::sort(by_frequency.begin(), by_frequency.end());
    words.clear();
    for (const auto& [documents, w] : by_frequency)
      if (words.empty() || 2 * documents <= impl_->document_count) words.push_back(w);
  }
  std::string match = to_fts_query(words);
  std::string bm25 = "bm25(documents_fts, " + std::to_string(kTitleWeight) + ", " +
                     std::to_string(kTextWeight) + ")";
  // Rank first, touching only the index; documents and snippets are read for the top k alone.
  Statement rank(impl_->db,
                 "SELECT rowid, -" + bm25 +
                     " FROM documents_fts WHERE documents_fts MATCH ? ORDER BY " + bm25 +
                     " LIMIT ?",
                 impl_->path);
  rank.bind(1, match);
  rank.bind(2, int64_t(options.k));
  std::vector<SearchHit> hits;
  while (rank.step(impl_->path)) {
    SearchHit hit;
    hit.rank = int(hits.size()) + 1;
    hit.document.rowid = rank.integer(0);
    hit.score = rank.real(1);
    hits.push_back(std::move(hit));
  }
  Statement fetch(impl_->db,
                  std::string("SELECT ") + kDocumentColumns +
                      ", snippet(documents_fts, 1, ?, ?, '…', ?) FROM documents_fts"
                      " JOIN documents d ON d.docid = documents_fts.rowid"
                      " WHERE documents_fts MATCH ? AND documents_fts.rowid = ?",
                  impl_->path);
  for (SearchHit& hit : hits) {
    fetch.bind(1, options.highlight_open);
    fetch.bind(2, options.highlight_close);
    fetch.bind(3, int64_t(std::clamp(options.snippet_words, 1, 64)));
    fetch.bind(4, match);
    fetch.bind(5, hit.document.rowid);
    if (fetch.step(impl_->path)) {
      hit.document = read_document(fetch);
      hit.snippet = fetch.text(6);
    }
    fetch.reset();
  }
  return hits;
}

std::optional<Document> DocumentStore::find(std::string_view id) const {
  std::lock_guard lock(impl_->mutex);
  Statement s(impl_->db,
              std::string("SELECT ") + kDocumentColumns + " FROM documents d WHERE d.id = ?",
              impl_->path);
  s.bind(1, id);
  if (!s.step(impl_->path)) return std::nullopt;
  return read_document(s);
}

Document DocumentStore::get(std::string_view id) const {
  auto doc = find(id);
  if (!doc) throw Error(impl_->path.string() + ": no document with id \"" + std::string(id) + "\"");
  return *doc;
}

Document DocumentStore::get_by_rowid(int64_t rowid) const {
  std::lock_guard lock(impl_->mutex);
  Statement s(impl_->db,
              std::string("SELECT ") + kDocumentColumns + " FROM documents d WHERE d.docid = ?",
              impl_->path);
  s.bind(1, rowid);
  if (!s.step(impl_->path))
    throw Error(impl_->path.string() + ": no document with rowid " + std::to_string(rowid));
  return read_document(s);
}

std::vector<Document> DocumentStore::list(int64_t offset, int64_t limit) const {
  std::lock_guard lock(impl_->mutex);
  Statement s(impl_->db,
              std::string("SELECT ") + kDocumentColumns +
                  " FROM documents d ORDER BY d.docid LIMIT ? OFFSET ?",
              impl_->path);
  s.bind(1, std::max<int64_t>(0, limit));
  s.bind(2, std::max<int64_t>(0, offset));
  std::vector<Document> docs;
  while (s.step(impl_->path)) docs.push_back(read_document(s));
  return docs;
}

int64_t DocumentStore::count() const {
  std::lock_guard lock(impl_->mutex);
  Statement s(impl_->db, "SELECT COUNT(*) FROM documents", impl_->path);
  s.step(impl_->path);
  return s.integer(0);
}

std::vector<Question> DocumentStore::questions() const {
  std::lock_guard lock(impl_->mutex);
  Statement s(impl_->db, "SELECT id, question, answers, doc_ids, kind FROM questions ORDER BY qid",
              impl_->path);
  std::vector<Question> out;
  while (s.step(impl_->path)) {
    Question q;
    q.id = s.text(0);
    q.question = s.text(1);
    q.answers = parse_json_strings(s.text(2), impl_->path, "answers");
    q.doc_ids = parse_json_strings(s.text(3), impl_->path, "doc_ids");
    q.kind = s.text(4);
    out.push_back(std::move(q));
  }
  return out;
}

int64_t DocumentStore::question_count() const {
  std::lock_guard lock(impl_->mutex);
  Statement s(impl_->db, "SELECT COUNT(*) FROM questions", impl_->path);
  s.step(impl_->path);
  return s.integer(0);
}

void DocumentStore::bump_popularity(std::string_view id, int64_t delta) {
  std::lock_guard lock(impl_->mutex);
  if (impl_->mode == Mode::read_only)
    throw Error(impl_->path.string() + ": opened read-only, cannot count popularity");
  Statement s(impl_->db, "UPDATE documents SET popularity = popularity + ? WHERE id = ?",
              impl_->path);
  s.bind(1, delta);
  s.bind(2, id);
  s.step(impl_->path);
  if (sqlite3_changes(impl_->db) == 0)
    throw Error(impl_->path.string() + ": no document with id \"" + std::string(id) + "\"");
}

std::vector<Document> DocumentStore::most_popular(int64_t limit) const {
  std::lock_guard lock(impl_->mutex);
  Statement s(
      impl_->db,
      std::string("SELECT ") + kDocumentColumns +
          " FROM documents d WHERE d.popularity > 0 ORDER BY d.popularity DESC, d.docid LIMIT ?",
      impl_->path);
  s.bind(1, std::max<int64_t>(0, limit));
  std::vector<Document> docs;
  while (s.step(impl_->path)) docs.push_back(read_document(s));
  return docs;
}

void DocumentStore::reset_popularity() {
  std::lock_guard lock(impl_->mutex);
  if (impl_->mode == Mode::read_only)
    throw Error(impl_->path.string() + ": opened read-only, cannot reset popularity");
  exec(impl_->db, "UPDATE documents SET popularity = 0 WHERE popularity != 0", impl_->path);
}

std::string DocumentStore::metadata(std::string_view key) const {
  std::lock_guard lock(impl_->mutex);
  Statement s(impl_->db, "SELECT value FROM meta WHERE key = ?", impl_->path);
  s.bind(1, key);
  return s.step(impl_->path) ? s.text(0) : std::string();
}

CorpusStats DocumentStore::stats() const {
  CorpusStats stats;
  stats.name = metadata("name");
  stats.source_format = metadata("source_format");
  stats.source_path = metadata("source_path");
  stats.created_at = metadata("created_at");
  std::lock_guard lock(impl_->mutex);
  {
    Statement s(impl_->db,
                "SELECT COUNT(*), COALESCE(SUM(word_count), 0), COALESCE(MIN(word_count), 0),"
                " COALESCE(MAX(word_count), 0), COALESCE(AVG(word_count), 0) FROM documents",
                impl_->path);
    s.step(impl_->path);
    stats.documents = s.integer(0);
    stats.total_words = s.integer(1);
    stats.min_words = s.integer(2);
    stats.max_words = s.integer(3);
    stats.mean_words = s.real(4);
  }
  {
    Statement s(impl_->db,
                "SELECT COUNT(*), COALESCE(SUM(json_array_length(doc_ids) >= 2), 0) FROM questions",
                impl_->path);
    s.step(impl_->path);
    stats.questions = s.integer(0);
    stats.multi_hop_questions = s.integer(1);
  }
  std::error_code ec;
  auto size = fs::file_size(impl_->path, ec);
  stats.file_bytes = ec ? 0 : int64_t(size);
  return stats;
}

const fs::path& DocumentStore::path() const { return impl_->path; }

}  // namespace lazyscope::corpora

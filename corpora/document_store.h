#pragma once
// One corpus = one SQLite file: documents, questions, popularity counters and an FTS5 index
// ranked with BM25. Imports are all-or-nothing: written to a temporary file in one
// transaction, then renamed over the target, so a failed import leaves the old store intact.
#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "corpora/corpus.h"
#include "base/progress.h"

namespace lazyscope::corpora {

struct ImportOptions {
  std::string name;           // corpus name; empty: the target file's stem
  std::string source_format;  // recorded in the store's metadata ("jsonl", "hotpotqa", ...)
  std::string source_path;    // recorded in the store's metadata
  std::string source_hash;    // optional fingerprint of the source (the sample cache uses it)
  ProgressFn progress;        // fraction of documents + questions written; may throw to abort
};

struct SearchOptions {
  int k = 5;
  std::string highlight_open = "[";  // wraps each matched term in the snippet
  std::string highlight_close = "]";
  int snippet_words = 16;  // approximate snippet length
};

// Thread-safe: every method locks an internal mutex, so one store may be shared between
// threads with calls serialised; open the same file again for truly concurrent readers.
// Move-only.
class DocumentStore {
 public:
  enum class Mode { read_write, read_only };

  // Opens an existing store; throws lazyscope::Error naming the file when it is missing or
  // is not a LazyScope corpus.
  static DocumentStore open(const std::filesystem::path& path, Mode mode = Mode::read_write);

  // Writes `data` as a new store at `path` (replacing any existing file only when the whole
  // import succeeded) and returns it opened read-write. Duplicate document ids, empty ids and
  // questions naming unknown gold documents are errors.
  static DocumentStore import(const std::filesystem::path& path, const CorpusData& data,
                              const ImportOptions& options = {});

  DocumentStore(DocumentStore&&) noexcept;
  DocumentStore& operator=(DocumentStore&&) noexcept;
  ~DocumentStore();

  // BM25 top-k over title and text (title weighted 2x; Porter-stemmed, case- and
  // diacritic-insensitive). The query is free text: words are matched with OR, punctuation
  // and FTS5 operators are ignored, English function words and words present in over half
  // of the documents are dropped while rarer words remain. Returns fewer than k hits when
  // fewer documents match.
  std::vector<SearchHit> search(std::string_view query, int k = 5) const;
  std::vector<SearchHit> search(std::string_view query, const SearchOptions& options) const;

  // By stable source id; get() throws when absent, find() returns nullopt.
  Document get(std::string_view id) const;
  std::optional<Document> find(std::string_view id) const;
  Document get_by_rowid(int64_t rowid) const;

  // Documents in import order (rowid), for paging through the corpus in a view.
  std::vector<Document> list(int64_t offset, int64_t limit) const;
  int64_t count() const;

  std::vector<Question> questions() const;
  int64_t question_count() const;

  // Popularity counters for workloads (persisted; needs Mode::read_write).
  void bump_popularity(std::string_view id, int64_t delta = 1);
  std::vector<Document> most_popular(int64_t limit) const;  // ties broken by rowid
  void reset_popularity();

  CorpusStats stats() const;
  // A metadata value written at import ("name", "source_format", "source_hash", ...), or "".
  std::string metadata(std::string_view key) const;
  const std::filesystem::path& path() const;

 private:
  struct Impl;
  explicit DocumentStore(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace lazyscope::corpora

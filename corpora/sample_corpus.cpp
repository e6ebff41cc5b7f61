#include "corpora/sample_corpus.h"

#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <sstream>

#include "corpora/document_store.h"
#include "corpora/loaders.h"
#include "base/data_dir.h"
#include "base/error.h"

namespace lazyscope::corpora {
namespace fs = std::filesystem;
namespace {

// FNV-1a over the sample files: cheap, and any edit changes it.
void hash_file(const fs::path& path, uint64_t& hash) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error(path.string() + ": cannot read the sample corpus file");
  char buffer[1 << 16];
  while (in.read(buffer, sizeof buffer) || in.gcount() > 0) {
    for (std::streamsize i = 0; i < in.gcount(); ++i) {
      hash ^= static_cast<unsigned char>(buffer[i]);
      hash *= 1099511628211ull;
    }
  }
}

std::string sample_hash(const fs::path& dir) {
  uint64_t hash = 14695981039346656037ull;
  hash_file(dir / "passages.jsonl", hash);
  hash_file(dir / "questions.jsonl", hash);
  std::ostringstream out;
  out << std::hex << hash << "-v1";
  return out.str();
}

}  // namespace

fs::path sample_corpus_dir() { return data_path("corpus/sample", "LAZYSCOPE_SAMPLE_CORPUS_DIR"); }

CorpusData load_sample_corpus() { return load_jsonl(sample_corpus_dir()); }

fs::path user_cache_dir() {
  std::vector<fs::path> candidates;
  if (const char* xdg = std::getenv("XDG_CACHE_HOME"); xdg && *xdg)
    candidates.push_back(fs::path(xdg) / "lazyscope");
  if (const char* home = std::getenv("HOME"); home && *home)
    candidates.push_back(fs::path(home) / ".cache" / "lazyscope");
  std::error_code ec;
  candidates.push_back(fs::temp_directory_path(ec) / "lazyscope");
  for (const fs::path& dir : candidates) {
    fs::create_directories(dir, ec);
    if (fs::is_directory(dir, ec) && ::access(dir.c_str(), W_OK) == 0) return dir;
  }
  throw Error(
      "no writable cache directory (tried $XDG_CACHE_HOME, ~/.cache and the temp directory)");
}

fs::path default_sample_corpus_db(const ProgressFn& progress) {
  fs::path dir = sample_corpus_dir();
  std::string hash = sample_hash(dir);
  fs::path db = user_cache_dir() / "sample-corpus.db";
  std::error_code ec;
  if (fs::exists(db, ec)) {
    try {
      if (DocumentStore::open(db, DocumentStore::Mode::read_only).metadata("source_hash") == hash)
        return db;
    } catch (const Error&) {
      // Unreadable or an old schema: our own cache file, so drop it and rebuild below.
      fs::remove(db, ec);
    }
  }
  CorpusData data = load_jsonl(dir);
  ImportOptions options;
  options.name = "LazyScope sample corpus";
  options.source_format = "jsonl";
  options.source_path = dir.string();
  options.source_hash = hash;
  options.progress = progress;
  DocumentStore::import(db, data, options);
  return db;
}

}  // namespace lazyscope::corpora

#pragma once
// One call from a dataset file to a document store: load, optionally chunk, import.
#include <filesystem>

#include "corpora/chunking.h"
#include "corpora/document_store.h"
#include "corpora/loaders.h"

namespace lazyscope::corpora {

struct ImportCorpusOptions {
  LoadOptions load;     // loader options (questions file, evidence dir, summaries)
  ChunkOptions chunk;   // max_tokens = 0 keeps documents whole
  std::string name;     // corpus name; empty: the output file's stem
  ProgressFn progress;  // 0–0.4 loading, 0.4–1 writing
};

// Loads `source` in `format`, chunks, and imports atomically into `db`. Returns the stats of
// the new store. On any error the previous `db` (if any) is left untouched.
CorpusStats import_corpus(const std::filesystem::path& source, CorpusFormat format,
                          const std::filesystem::path& db, const ImportCorpusOptions& options = {});

}  // namespace lazyscope::corpora

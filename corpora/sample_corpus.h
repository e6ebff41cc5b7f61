#pragma once
// The sample corpus bundled with LazyScope (corpora/sample: passages.jsonl + questions.jsonl),
// and its ready-to-use SQLite store in the user's cache directory.
#include <filesystem>

#include "corpora/corpus.h"
#include "base/progress.h"

namespace lazyscope::corpora {

// The bundled sample's folder: $LAZYSCOPE_SAMPLE_CORPUS_DIR when set in the environment, else
// corpus/sample in LazyScope's data folder (base/data_dir.h). Throws Error when it is missing.
std::filesystem::path sample_corpus_dir();

// Loads the sample's passages and questions (no store involved).
CorpusData load_sample_corpus();

// $XDG_CACHE_HOME/lazyscope, else ~/.cache/lazyscope, else <temp>/lazyscope (created).
std::filesystem::path user_cache_dir();

// Path of the sample's SQLite store, building it on first use and rebuilding it when the
// sample files changed (a content hash is kept in the store). Safe against concurrent callers
// (atomic rename). Throws lazyscope::Error when the sample files cannot be read.
std::filesystem::path default_sample_corpus_db(const ProgressFn& progress = {});

}  // namespace lazyscope::corpora

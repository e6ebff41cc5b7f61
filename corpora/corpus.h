#pragma once
// Plain data types shared by the corpus loaders, the document store and the workbench.
#include <cstdint>
#include <string>
#include <vector>

namespace lazyscope::corpora {

// One retrievable passage. `id` is the stable source id string (kept across re-imports of the
// same source); `rowid` is the integer key inside one store (0 before the document is stored).
struct Document {
  int64_t rowid = 0;
  std::string id;  // e.g. "hotpot:Paris" or "p017"; chunks get "<parent id>#<n>"
  std::string title;
  std::string text;
  std::string parent_id;   // the source document this chunk was cut from; empty when not chunked
  int64_t popularity = 0;  // how often a workload picked it (DocumentStore::bump_popularity)
};

// One evaluation question. `answers` are alternative gold strings (scored with max over them);
// `doc_ids` name the gold passages (one for single-hop, two or more for multi-hop questions).
struct Question {
  std::string id;
  std::string question;
  std::vector<std::string> answers;
  std::vector<std::string> doc_ids;
  std::string kind;  // free-form label from the source: "single", "multi-hop", "bridge", ...
};

// What a loader returns and what DocumentStore::import writes.
struct CorpusData {
  std::vector<Document> documents;
  std::vector<Question> questions;
};

// One retrieval result. `score` is the BM25 relevance, higher is better (SQLite's bm25() negated).
struct SearchHit {
  int rank = 0;  // 1-based
  double score = 0.0;
  Document document;    // full document, text included
  std::string snippet;  // a short excerpt around the matched terms, matches wrapped in markers
};

// Summary shown by `lazyscope-cli corpus stats` and the workbench's corpus panel.
struct CorpusStats {
  std::string name;           // corpus name given at import (defaults to the source file stem)
  std::string source_format;  // "jsonl", "hotpotqa", ...
  std::string source_path;    // file imported from
  std::string created_at;     // UTC, ISO 8601
  int64_t documents = 0;
  int64_t questions = 0;
  int64_t multi_hop_questions = 0;  // questions with two or more gold documents
  int64_t total_words = 0;          // whitespace-separated words over all documents
  int64_t min_words = 0;
  int64_t max_words = 0;
  double mean_words = 0.0;
  int64_t file_bytes = 0;  // size of the SQLite file
};

}  // namespace lazyscope::corpora

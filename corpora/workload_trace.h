#pragma once
// Serving workloads made of a corpus: its passages as the document pool (each tokenized on its
// own, so every document has its real token length), drawn by Zipf popularity like the synthetic
// pool, or a retrieval trace: one request per question, holding the question and its BM25 top-k
// passages in retrieved order. The result is engine/workload's Workload, served as any other.
#include <filesystem>
#include <string>

#include "base/progress.h"
#include "corpora/document_store.h"
#include "corpora/question_set.h"
#include "engine/workload/workload.h"

namespace lazyscope {
class Tokenizer;
}

namespace lazyscope::corpora {

// questions: the retrieval trace; zipf: the store's passages drawn by WorkloadOptions' layout.
enum class TraceKind { Questions, Zipf };
// "questions" or "zipf"; throws Error naming --trace and both values otherwise.
TraceKind parse_trace_kind(const std::string& text);
const char* to_string(TraceKind kind);

struct CorpusWorkloadOptions {
  TraceKind trace = TraceKind::Questions;
  int top_k = 4;       // questions: BM25 passages per question, 1-64
  int questions = 0;   // questions: serve the first N questions (0: all of them)
  std::string source;  // how the corpus is named in messages and reports ("sample", a store path)
};

// Throws Error naming the option and its valid range.
void validate(const CorpusWorkloadOptions& options);

// The prompt of every request: the tokenizer's BOS (when it adds one) as the shared prefix, each
// passage's text tokenized alone (no BOS) as a document, the question (or, for the zipf trace,
// `base.query_tokens` seeded random ids) tokenized alone as the query; no chat template.
//
// zipf: the first `base.documents` passages in import order (all of them when the store holds
//   fewer) form the pool; `base` draws the requests (layout, alpha, k, order, count, arrivals).
// questions: the pool is every passage some question retrieved, in order of first use; request i
//   is question i with its top-k passages in BM25 rank order; `base` gives output tokens and
//   arrivals (closed loop of `base.concurrency` clients or Poisson `base.rate`, seeded).
// The Workload's options hold upper bounds of the realised sizes (longest passage, longest query,
// top-k) so budget estimates stay safe. Throws Error naming the source when the store or question
// set is empty or a passage tokenizes to nothing.
Workload make_corpus_workload(const DocumentStore& store, const QuestionSet& questions,
                              const Tokenizer& tokenizer, const WorkloadOptions& base,
                              const CorpusWorkloadOptions& corpus);

// A corpus as `workload --corpus` names it: "sample" is the bundled sample's store (built on first
// use) with its questions; anything else is a store path with the questions it kept. A
// `questions_file` (JSON Lines, corpora/question_set.h) replaces the questions when not empty.
// Questions are loaded only for the questions trace.
struct CorpusSource {
  DocumentStore store;
  QuestionSet questions;
  std::string name;  // "sample" or the store path
};
CorpusSource open_corpus_source(const std::string& corpus, TraceKind trace, const std::filesystem::path& questions_file = {},
                                const ProgressFn& progress = {});

}  // namespace lazyscope::corpora

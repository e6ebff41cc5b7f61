#include "corpora/workload_trace.h"

#include <algorithm>
#include <random>
#include <unordered_map>

#include "base/error.h"
#include "corpora/sample_corpus.h"
#include "engine/tokenizer/tokenizer.h"

namespace lazyscope::corpora {
namespace {

std::vector<int32_t> shared_prefix(const Tokenizer& tokenizer) {
  if (tokenizer.add_bos() && tokenizer.bos_id() >= 0) return {tokenizer.bos_id()};
  return {};
}

std::vector<int32_t> passage_tokens(const Tokenizer& tokenizer, const Document& d, const std::string& source) {
  std::vector<int32_t> ids = tokenizer.encode(d.text);
  if (ids.empty()) throw Error(source + ": passage '" + d.id + "' has no text to tokenize (an empty document)");
  return ids;
}

// The bounds the scheduler's unlimited-budget estimate reads, from what was realised.
void record_bounds(Workload& w) {
  WorkloadOptions& o = w.options;
  o.documents = int(w.documents.size());
  o.doc_tokens = 1;
  for (const auto& d : w.documents) o.doc_tokens = std::max(o.doc_tokens, int(d.size()));
  int k = 1, query = 1;
  for (const WorkloadRequest& r : w.requests) {
    k = std::max(k, int(r.documents.size()));
    query = std::max(query, int(r.query.size()));
  }
  o.docs_per_request = std::min(k, o.documents);
  o.query_tokens = query;
  o.prefix_tokens = int(w.prefix.size());
  o.requests = int(w.requests.size());
  validate(o);
}

}  // namespace

TraceKind parse_trace_kind(const std::string& text) {
  if (text == "questions") return TraceKind::Questions;
  if (text == "zipf") return TraceKind::Zipf;
  throw Error("unknown --trace '" + text +
              "' (expected questions: each question with its BM25 top-k passages, or zipf: the passages by "
              "Zipf popularity)");
}

const char* to_string(TraceKind kind) { return kind == TraceKind::Questions ? "questions" : "zipf"; }

void validate(const CorpusWorkloadOptions& o) {
  if (o.top_k < 1 || o.top_k > 64) {
    throw Error("--top-k must be between 1 and 64 (got " + std::to_string(o.top_k) + ")");
  }
  if (o.questions < 0 || o.questions > 1000000) {
    throw Error("--requests must be between 1 and 1000000 for a questions trace (got " + std::to_string(o.questions) + ")");
  }
}

Workload make_corpus_workload(const DocumentStore& store, const QuestionSet& questions, const Tokenizer& tokenizer,
                              const WorkloadOptions& base, const CorpusWorkloadOptions& corpus) {
  validate(corpus);
  const std::string source = corpus.source.empty() ? store.path().string() : corpus.source;
  const int64_t passages = store.count();
  if (passages == 0) throw Error(source + ": the corpus holds no passages");
  Workload w;
  if (corpus.trace == TraceKind::Zipf) {
    WorkloadOptions o = base;
    o.documents = int(std::min<int64_t>(base.documents, passages));
    if (o.docs_per_request > o.documents) {
      throw Error("--docs-per-request " + std::to_string(o.docs_per_request) + " exceeds the " +
                  std::to_string(o.documents) + " passages of " + source);
    }
    o.doc_tokens = 1;  // replaced by the passages below
    o.prefix_tokens = 0;
    o.vocab_size = tokenizer.vocab_size();
    w = make_workload(o);
    w.documents.clear();
    for (const Document& d : store.list(0, o.documents)) {
      w.documents.push_back(passage_tokens(tokenizer, d, source));
      w.document_ids.push_back(d.id);
      w.document_titles.push_back(d.title);
    }
    w.source = source + ", " + std::to_string(o.documents) + " passages by " +
               (o.layout == DocumentLayout::Zipf ? "Zipf popularity" : "cyclic window");
  } else {
    if (questions.questions.empty()) throw Error(questions.source + ": no questions for a questions trace");
    std::size_t n = questions.questions.size();
    if (corpus.questions > 0) n = std::min<std::size_t>(n, std::size_t(corpus.questions));
    w.options = base;
    w.options.vocab_size = tokenizer.vocab_size();
    w.options.order = DocumentOrder::Retrieved;
    std::unordered_map<std::string, int> pool;  // passage id -> pool index
    std::mt19937_64 rng(base.seed * 0x9E3779B97F4A7C15ull + 29);
    std::exponential_distribution<double> gap(base.rate > 0 ? base.rate : 1.0);
    double t = 0.0;
    for (std::size_t i = 0; i < n; ++i) {
      const Question& q = questions.questions[i];
      WorkloadRequest r;
      r.index = int(i);
      for (const SearchHit& hit : store.search(q.question, corpus.top_k)) {
        auto [it, added] = pool.emplace(hit.document.id, int(w.documents.size()));
        if (added) {
          w.documents.push_back(passage_tokens(tokenizer, hit.document, source));
          w.document_ids.push_back(hit.document.id);
          w.document_titles.push_back(hit.document.title);
        }
        r.documents.push_back(it->second);
      }
      r.query = tokenizer.encode(q.question);
      if (r.query.empty()) {
        throw Error(questions.source + ": question " + std::to_string(i + 1) + " has no text to tokenize");
      }
      r.output_tokens = base.output_tokens;
      if (base.open_loop()) {
        t += gap(rng);
        r.arrival_s = t;
      }
      w.requests.push_back(std::move(r));
    }
    if (w.documents.empty()) {
      throw Error(source + ": BM25 retrieved no passage for any of the " + std::to_string(n) + " questions");
    }
    w.source = source + ", " + std::to_string(n) + " questions of " + questions.source + " with their BM25 top-" +
               std::to_string(corpus.top_k);
  }
  w.prefix = shared_prefix(tokenizer);
  record_bounds(w);
  return w;
}

CorpusSource open_corpus_source(const std::string& corpus, TraceKind trace, const std::filesystem::path& questions_file,
                                const ProgressFn& progress) {
  if (corpus.empty()) throw Error("--corpus: empty (expected 'sample' or the path of a corpus store)");
  const bool sample = corpus == "sample";
  const std::filesystem::path db = sample ? default_sample_corpus_db(progress) : std::filesystem::path(corpus);
  if (!sample && !std::filesystem::exists(db)) {
    throw Error("--corpus: " + corpus + ": no such corpus store (expected 'sample' or a store made by corpus import)");
  }
  CorpusSource out{DocumentStore::open(db, DocumentStore::Mode::read_only), {}, sample ? "sample corpus" : corpus};
  if (trace != TraceKind::Questions) return out;
  out.questions = !questions_file.empty() ? load_question_file(questions_file)
                  : sample                ? sample_question_set()
                                          : store_question_set(out.store);
  return out;
}

}  // namespace lazyscope::corpora

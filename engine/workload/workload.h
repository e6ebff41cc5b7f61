#pragma once
// Seeded RAG serving workloads: a pool of documents, which of them each request retrieves
// (Zipf popularity or the contiguous cyclic window), its query, output length and arrival.
#include <cstdint>
#include <string>
#include <vector>

#include "engine/kv/prompt_layout.h"

namespace lazyscope {

// How a request picks its documents.
// zipf: k distinct documents drawn by Zipf(alpha) popularity over the whole pool, the popularity
//   ranks shuffled by the seed. window: k consecutive documents (mod D) from a uniformly drawn
//   start, alpha unused: the layout of the LazyAttention paper's own script.
enum class DocumentLayout { Zipf, Window };
// The documents' order in the prompt: shuffled per request, or as drawn (retrieval rank).
enum class DocumentOrder { Shuffled, Retrieved };

DocumentLayout parse_document_layout(const std::string& text);
DocumentOrder parse_document_order(const std::string& text);
const char* to_string(DocumentLayout layout);
const char* to_string(DocumentOrder order);

struct WorkloadOptions {
  int documents = 100;       // D, the pool
  int doc_tokens = 2048;     // L, tokens per synthetic document
  int docs_per_request = 5;  // k, distinct per request
  double zipf = 2.1;         // alpha
  int requests = 200;
  int concurrency = 16;      // closed loop: C clients, each sends its next request when one ends
  double rate = 0.0;         // > 0: open loop, Poisson arrivals of this many requests per second
  int query_tokens = 16;
  int output_tokens = 8;
  int prefix_tokens = 1;     // BOS (+ a fixed system text) shared by every request
  DocumentLayout layout = DocumentLayout::Zipf;
  DocumentOrder order = DocumentOrder::Shuffled;
  uint64_t seed = 1;
  int vocab_size = 128256;   // token ids are drawn below this
  bool open_loop() const { return rate > 0.0; }
};

// Bounds of a whole workload: token ids held for the document pool (and for all queries), prompt
// and output tokens
// served over all requests, and document weights visited while drawing Zipf requests.
inline constexpr long long kMaxPoolTokens = 1ll << 28;
inline constexpr long long kMaxServedTokens = 1ll << 34;
inline constexpr long long kMaxZipfDraws = 1ll << 34;

// Throws Error naming the option, the value and the valid range for the first bad field (and the
// workload-wide bounds above).
void validate(const WorkloadOptions& options);

struct WorkloadRequest {
  int index = 0;
  std::vector<int> documents;  // pool indices in prompt order
  std::vector<int32_t> query;
  int output_tokens = 0;
  double arrival_s = 0.0;      // open loop: seconds after the start; closed loop: unused (0)
};

struct Workload {
  WorkloadOptions options;
  std::vector<int32_t> prefix;
  std::vector<std::vector<int32_t>> documents;
  std::vector<WorkloadRequest> requests;
  // Corpus workloads (corpora/workload_trace.h): each pool document's source id and title, for
  // display; empty for synthetic documents. Prompts still label documents "doc <index>".
  std::vector<std::string> document_ids, document_titles;
  std::string source;  // what the documents and requests came from ("synthetic", "sample corpus, 177 questions")
  // The request's prompt as the KV cache sees it; documents labelled "doc <index>".
  PromptLayout layout(const WorkloadRequest& request) const;
};

// Deterministic for equal options (seed included).
Workload make_workload(const WorkloadOptions& options);

}  // namespace lazyscope

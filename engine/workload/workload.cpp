#include "engine/workload/workload.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>
#include <sstream>

#include "base/error.h"

namespace lazyscope {
namespace {

void check_int(const char* option, long long value, long long lo, long long hi) {
  if (value < lo || value > hi) {
    throw Error(std::string(option) + " must be between " + std::to_string(lo) + " and " + std::to_string(hi) +
                " (got " + std::to_string(value) + ")");
  }
}

void check_real(const char* option, double value, double lo, double hi) {
  if (!std::isfinite(value) || value < lo || value > hi) {
    std::ostringstream os;
    os << option << " must be a number between " << lo << " and " << hi << " (got " << value << ")";
    throw Error(os.str());
  }
}

// Token ids 3.. (0-2 are left to special tokens) below the vocabulary.
int32_t random_token(std::mt19937_64& rng, int vocab) { return int32_t(3 + rng() % uint64_t(vocab - 3)); }

}  // namespace

DocumentLayout parse_document_layout(const std::string& text) {
  if (text == "zipf") return DocumentLayout::Zipf;
  if (text == "window") return DocumentLayout::Window;
  throw Error("unknown --layout '" + text + "' (expected zipf or window)");
}

DocumentOrder parse_document_order(const std::string& text) {
  if (text == "shuffled") return DocumentOrder::Shuffled;
  if (text == "retrieved") return DocumentOrder::Retrieved;
  throw Error("unknown --doc-order '" + text + "' (expected shuffled or retrieved)");
}

const char* to_string(DocumentLayout layout) { return layout == DocumentLayout::Zipf ? "zipf" : "window"; }
const char* to_string(DocumentOrder order) { return order == DocumentOrder::Shuffled ? "shuffled" : "retrieved"; }

void validate(const WorkloadOptions& o) {
  check_int("--documents", o.documents, 1, 100000);
  check_int("--doc-tokens", o.doc_tokens, 1, 131072);
  check_int("--docs-per-request", o.docs_per_request, 1, std::min(o.documents, 64));
  check_real("--zipf", o.zipf, 0.0, 10.0);
  check_int("--requests", o.requests, 1, 1000000);
  check_int("--concurrency", o.concurrency, 1, 4096);
  check_real("--rate", o.rate, 0.0, 1e6);
  check_int("--query-tokens", o.query_tokens, 1, 131072);
  check_int("--output-tokens", o.output_tokens, 1, 65536);
  check_int("--prefix-tokens", o.prefix_tokens, 0, 131072);
  check_int("vocabulary size", o.vocab_size, 16, 1 << 30);
  const long long prompt = (long long)o.prefix_tokens + (long long)o.docs_per_request * o.doc_tokens +
                           o.query_tokens + o.output_tokens;
  if (prompt > (1ll << 30)) throw Error("a request would span " + std::to_string(prompt) + " tokens (at most 2^30)");
  // Sizes of the whole workload, so that memory and time stay bounded whatever the options.
  const long long pool = (long long)o.documents * o.doc_tokens;
  if (pool > kMaxPoolTokens) {
    throw Error("--documents x --doc-tokens: a pool of " + std::to_string(pool) + " tokens exceeds the limit of " +
                std::to_string(kMaxPoolTokens));
  }
  const long long queries = (long long)o.requests * o.query_tokens;
  if (queries > kMaxPoolTokens) {
    throw Error("--requests x --query-tokens: " + std::to_string(queries) + " query tokens exceed the limit of " +
                std::to_string(kMaxPoolTokens));
  }
  const long long served = (long long)o.requests * prompt;
  if (served > kMaxServedTokens) {
    throw Error("--requests x the request length: " + std::to_string(o.requests) + " requests of " +
                std::to_string(prompt) + " tokens (" + std::to_string(served) + ") exceed the limit of " +
                std::to_string(kMaxServedTokens) + " tokens");
  }
  const long long draws = (long long)o.requests * o.docs_per_request * o.documents;
  if (o.layout == DocumentLayout::Zipf && draws > kMaxZipfDraws) {
    throw Error("--requests x --docs-per-request x --documents: drawing " + std::to_string(draws) +
                " document weights exceeds the limit of " + std::to_string(kMaxZipfDraws) +
                " (use fewer requests or documents, or --layout window)");
  }
}

PromptLayout Workload::layout(const WorkloadRequest& request) const {
  PromptLayout l;
  l.prefix = prefix;
  for (int d : request.documents) {
    l.documents.push_back(documents.at(d));
    l.document_labels.push_back("doc " + std::to_string(d));
  }
  l.query = request.query;
  return l;
}

Workload make_workload(const WorkloadOptions& o) {
  validate(o);
  Workload w;
  w.options = o;
  w.source = "synthetic";
  std::mt19937_64 rng(o.seed * 0x9E3779B97F4A7C15ull + 17);
  if (o.prefix_tokens > 0) {
    w.prefix.push_back(1);  // BOS
    while (int(w.prefix.size()) < o.prefix_tokens) w.prefix.push_back(random_token(rng, o.vocab_size));
  }
  w.documents.resize(o.documents);
  for (auto& doc : w.documents) {
    doc.resize(o.doc_tokens);
    for (auto& t : doc) t = random_token(rng, o.vocab_size);
  }
  // Popularity rank r (1 = most popular) of each document, shuffled by the seed.
  std::vector<int> rank(o.documents);
  std::iota(rank.begin(), rank.end(), 1);
  std::shuffle(rank.begin(), rank.end(), rng);
  std::vector<double> weight(o.documents);
  for (int d = 0; d < o.documents; ++d) weight[d] = 1.0 / std::pow(double(rank[d]), o.zipf);
  std::exponential_distribution<double> gap(o.rate > 0 ? o.rate : 1.0);
  double t = 0.0;
  w.requests.resize(o.requests);
  for (int r = 0; r < o.requests; ++r) {
    WorkloadRequest& q = w.requests[r];
    q.index = r;
    if (o.layout == DocumentLayout::Window) {
      const int start = int(rng() % uint64_t(o.documents));
      for (int j = 0; j < o.docs_per_request; ++j) q.documents.push_back((start + j) % o.documents);
    } else {
      // k distinct documents: draw by weight, then remove the drawn one from the urn.
      std::vector<double> remaining = weight;
      for (int j = 0; j < o.docs_per_request; ++j) {
        const double total = std::accumulate(remaining.begin(), remaining.end(), 0.0);
        double x = std::uniform_real_distribution<double>(0.0, total)(rng);
        int d = 0;
        for (; d + 1 < o.documents; ++d) {
          if (remaining[d] > 0.0 && x < remaining[d]) break;
          x -= remaining[d];
        }
        while (remaining[d] == 0.0) d = (d + o.documents - 1) % o.documents;  // rounding at the end
        remaining[d] = 0.0;
        q.documents.push_back(d);
      }
    }
    if (o.order == DocumentOrder::Shuffled) std::shuffle(q.documents.begin(), q.documents.end(), rng);
    q.query.resize(o.query_tokens);
    for (auto& tok : q.query) tok = random_token(rng, o.vocab_size);
    q.output_tokens = o.output_tokens;
    if (o.open_loop()) {
      t += gap(rng);
      q.arrival_s = t;
    }
  }
  return w;
}

}  // namespace lazyscope

// Workload generation: seeded, distinct documents, Zipf skew over shuffled ranks, the cyclic
// window, Poisson arrivals, and clear errors for bad options.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <set>

#include "base/error.h"
#include "engine/workload/workload.h"

namespace lazyscope {
namespace {

WorkloadOptions small() {
  WorkloadOptions o;
  o.documents = 20;
  o.doc_tokens = 30;
  o.docs_per_request = 4;
  o.requests = 500;
  o.zipf = 1.5;
  o.vocab_size = 1000;
  return o;
}

TEST(Workload, SameSeedSameWorkloadOtherSeedOther) {
  const Workload a = make_workload(small()), b = make_workload(small());
  ASSERT_EQ(a.requests.size(), 500u);
  for (std::size_t i = 0; i < a.requests.size(); ++i) {
    EXPECT_EQ(a.requests[i].documents, b.requests[i].documents);
    EXPECT_EQ(a.requests[i].query, b.requests[i].query);
  }
  EXPECT_EQ(a.documents, b.documents);
  WorkloadOptions o = small();
  o.seed = 2;
  const Workload c = make_workload(o);
  EXPECT_NE(a.documents, c.documents);
}

TEST(Workload, DistinctDocumentsAndTokensInRange) {
  const Workload w = make_workload(small());
  for (const auto& r : w.requests) {
    ASSERT_EQ(r.documents.size(), 4u);
    EXPECT_EQ(std::set<int>(r.documents.begin(), r.documents.end()).size(), 4u);
    EXPECT_EQ(int(r.query.size()), 16);
    for (int32_t t : r.query) EXPECT_TRUE(t >= 3 && t < 1000);
  }
  for (const auto& d : w.documents) {
    ASSERT_EQ(d.size(), 30u);
    for (int32_t t : d) EXPECT_TRUE(t >= 3 && t < 1000);
  }
  ASSERT_EQ(w.prefix.size(), 1u);
  EXPECT_EQ(w.prefix[0], 1);
  const PromptLayout l = w.layout(w.requests[0]);
  EXPECT_EQ(l.documents.size(), 4u);
  EXPECT_EQ(l.document_labels[0], "doc " + std::to_string(w.requests[0].documents[0]));
}

TEST(Workload, ZipfSkewsPopularityOverShuffledRanks) {
  WorkloadOptions o = small();
  o.docs_per_request = 1;
  o.requests = 4000;
  o.zipf = 2.0;
  std::set<int> top_docs;
  for (uint64_t seed = 1; seed <= 4; ++seed) {
    o.seed = seed;
    const Workload w = make_workload(o);
    std::map<int, int> count;
    for (const auto& r : w.requests) ++count[r.documents[0]];
    std::vector<std::pair<int, int>> by(count.begin(), count.end());
    std::sort(by.begin(), by.end(), [](auto a, auto b) { return a.second > b.second; });
    // alpha 2: the top document takes 1/zeta(2) ~ 61 % of single draws (20 documents: 63 %), the second a quarter of that.
    EXPECT_GT(by[0].second, 4000 * 0.55);
    EXPECT_LT(by[0].second, 4000 * 0.70);
    EXPECT_NEAR(double(by[1].second) / by[0].second, 0.25, 0.06);
    top_docs.insert(by[0].first);
  }
  EXPECT_GT(top_docs.size(), 1u) << "popularity ranks are not shuffled by the seed";
}

TEST(Workload, WindowLayoutIsContiguousAndCyclic) {
  WorkloadOptions o = small();
  o.layout = DocumentLayout::Window;
  o.order = DocumentOrder::Retrieved;
  const Workload w = make_workload(o);
  bool wrapped = false;
  for (const auto& r : w.requests) {
    for (int j = 1; j < 4; ++j) EXPECT_EQ(r.documents[j], (r.documents[0] + j) % 20);
    wrapped |= r.documents[0] > 16;
  }
  EXPECT_TRUE(wrapped);
}

TEST(Workload, OpenLoopArrivalsArePoisson) {
  WorkloadOptions o = small();
  o.rate = 50.0;
  o.requests = 5000;
  const Workload w = make_workload(o);
  double prev = 0.0;
  for (const auto& r : w.requests) {
    EXPECT_GT(r.arrival_s, prev);
    prev = r.arrival_s;
  }
  EXPECT_NEAR(prev / 5000, 1.0 / 50.0, 0.05 / 50.0 * 3);
}

TEST(Workload, BadOptionsNameTheOptionAndTheRange) {
  auto message = [](WorkloadOptions o) {
    try {
      validate(o);
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  WorkloadOptions o = small();
  o.docs_per_request = 21;
  EXPECT_EQ(message(o), "--docs-per-request must be between 1 and 20 (got 21)");
  o = small();
  o.zipf = -1;
  EXPECT_NE(message(o).find("--zipf must be a number between 0 and 10"), std::string::npos);
  o = small();
  o.requests = 0;
  EXPECT_NE(message(o).find("--requests must be between 1 and"), std::string::npos);
  o = small();
  o.rate = -3;
  EXPECT_NE(message(o).find("--rate"), std::string::npos);
  o = small();
  o.output_tokens = 0;
  EXPECT_NE(message(o).find("--output-tokens"), std::string::npos);
  EXPECT_THROW(parse_document_layout("ring"), Error);
  EXPECT_THROW(make_workload(o), Error);
}

// Each option in range, but the workload they make together would not fit in memory or time: the
// error names the options and the limit, before anything is allocated.
TEST(Workload, WholeWorkloadSizesAreBounded) {
  auto message = [](WorkloadOptions o) {
    try {
      validate(o);
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  WorkloadOptions o = small();
  o.documents = 100000;
  o.doc_tokens = 131072;  // 52 GB of token ids
  EXPECT_NE(message(o).find("--documents x --doc-tokens"), std::string::npos) << message(o);
  EXPECT_NE(message(o).find(std::to_string(kMaxPoolTokens)), std::string::npos);
  o = small();
  o.requests = 1000000;
  o.query_tokens = 131072;
  EXPECT_NE(message(o).find("--requests x --query-tokens"), std::string::npos) << message(o);
  o = small();
  o.requests = 1000000;
  o.output_tokens = 65536;
  EXPECT_NE(message(o).find("exceed the limit of " + std::to_string(kMaxServedTokens)), std::string::npos)
      << message(o);
  o = small();
  o.documents = 100000;
  o.doc_tokens = 16;
  o.docs_per_request = 64;
  o.requests = 1000000;
  o.output_tokens = 1;
  EXPECT_NE(message(o).find("--requests x --docs-per-request x --documents"), std::string::npos) << message(o);
  o.layout = DocumentLayout::Window;  // a window draws one start per request
  EXPECT_EQ(message(o), "no error");
}

}  // namespace
}  // namespace lazyscope

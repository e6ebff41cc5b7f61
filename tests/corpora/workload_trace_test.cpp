// Corpus workloads: the sample's retrieval trace (one request per question, its BM25 top-k in rank
// order), the passage pool with real token lengths, determinism in accounting mode, bad options.
#include "corpora/workload_trace.h"

#include <gtest/gtest.h>

#include <functional>
#include <set>

#include "base/error.h"
#include "corpora/sample_corpus.h"
#include "corpora/temp_dir.h"
#include "engine/model/tokenizer_loader.h"
#include "engine/serving/serving_engine.h"
#include "support/tiny_model.h"

namespace lazyscope::corpora {
namespace {

const Tokenizer& tiny_tokenizer() {
  static const Tokenizer t = load_tokenizer_only(lazyscope::testing::tiny_model_dir());
  return t;
}

const CorpusSource& sample_source() {
  static const CorpusSource s = open_corpus_source("sample", TraceKind::Questions);
  return s;
}

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(WorkloadTrace, SampleTraceHasOneRequestPerQuestionWithItsBm25TopKInOrder) {
  const CorpusSource& s = sample_source();
  ASSERT_EQ(s.questions.questions.size(), 177u);
  CorpusWorkloadOptions o;
  o.top_k = 3;
  const Workload w = make_corpus_workload(s.store, s.questions, tiny_tokenizer(), WorkloadOptions{}, o);
  ASSERT_EQ(w.requests.size(), 177u);
  ASSERT_EQ(w.document_ids.size(), w.documents.size());
  std::size_t with_three = 0;
  for (std::size_t i = 0; i < w.requests.size(); ++i) {
    const Question& q = s.questions.questions[i];
    const std::vector<SearchHit> hits = s.store.search(q.question, 3);
    const WorkloadRequest& r = w.requests[i];
    ASSERT_EQ(r.documents.size(), hits.size()) << q.question;
    with_three += hits.size() == 3;
    for (std::size_t j = 0; j < hits.size(); ++j) {
      EXPECT_EQ(w.document_ids[std::size_t(r.documents[j])], hits[j].document.id) << "question " << i << " rank " << j;
      // Each passage tokenized alone: its real length.
      EXPECT_EQ(w.documents[std::size_t(r.documents[j])], tiny_tokenizer().encode(hits[j].document.text));
    }
    EXPECT_EQ(r.query, tiny_tokenizer().encode(q.question));
    EXPECT_EQ(r.output_tokens, 8);
    EXPECT_EQ(r.arrival_s, 0.0);  // closed loop
  }
  EXPECT_GT(with_three, 150u);  // BM25 finds three passages for almost every sample question
  // The pool holds each retrieved passage once.
  std::set<std::string> ids(w.document_ids.begin(), w.document_ids.end());
  EXPECT_EQ(ids.size(), w.document_ids.size());
  EXPECT_EQ(w.options.order, DocumentOrder::Retrieved);
  EXPECT_EQ(w.options.requests, 177);
  EXPECT_EQ(w.options.docs_per_request, 3);
}

TEST(WorkloadTrace, QuestionLimitAndPoissonArrivals) {
  const CorpusSource& s = sample_source();
  CorpusWorkloadOptions o;
  o.questions = 10;
  WorkloadOptions base;
  base.rate = 5.0;
  base.output_tokens = 3;
  const Workload w = make_corpus_workload(s.store, s.questions, tiny_tokenizer(), base, o);
  ASSERT_EQ(w.requests.size(), 10u);
  for (std::size_t i = 1; i < w.requests.size(); ++i) EXPECT_GT(w.requests[i].arrival_s, w.requests[i - 1].arrival_s);
  EXPECT_GT(w.requests[0].arrival_s, 0.0);
  EXPECT_EQ(w.requests[9].output_tokens, 3);
}

TEST(WorkloadTrace, ZipfTraceUsesTheFirstPassagesWithTheirTokenLengths) {
  const CorpusSource& s = sample_source();
  CorpusWorkloadOptions o;
  o.trace = TraceKind::Zipf;
  WorkloadOptions base;
  base.documents = 20;
  base.docs_per_request = 3;
  base.requests = 50;
  base.zipf = 1.1;
  const Workload w = make_corpus_workload(s.store, s.questions, tiny_tokenizer(), base, o);
  const std::vector<Document> first = s.store.list(0, 20);
  ASSERT_EQ(w.documents.size(), 20u);
  for (std::size_t d = 0; d < 20; ++d) {
    EXPECT_EQ(w.document_ids[d], first[d].id);
    EXPECT_EQ(w.documents[d], tiny_tokenizer().encode(first[d].text));
  }
  ASSERT_EQ(w.requests.size(), 50u);
  for (const WorkloadRequest& r : w.requests) {
    EXPECT_EQ(r.documents.size(), 3u);
    EXPECT_EQ(std::set<int>(r.documents.begin(), r.documents.end()).size(), 3u);
    EXPECT_EQ(int(r.query.size()), base.query_tokens);
  }
  // More documents than the store holds: all of them.
  base.documents = 100000;
  EXPECT_EQ(make_corpus_workload(s.store, s.questions, tiny_tokenizer(), base, o).documents.size(),
            std::size_t(s.store.count()));
}

TEST(WorkloadTrace, AccountingModeOnTheTraceIsDeterministic) {
  const CorpusSource& s = sample_source();
  CorpusWorkloadOptions o;
  o.top_k = 4;
  WorkloadOptions base;
  base.concurrency = 8;
  const Workload a = make_corpus_workload(s.store, s.questions, tiny_tokenizer(), base, o);
  const Workload b = make_corpus_workload(s.store, s.questions, tiny_tokenizer(), base, o);
  ServingConfig config;
  config.synthetic = "llama-3.2-1b";
  ServingEngine engine(config);
  for (Policy policy : {Policy::Materialized, Policy::Lazy}) {
    const ServingResult x = engine.run(a, 160ll << 20, policy, {});
    const ServingResult y = engine.run(b, 160ll << 20, policy, {});
    EXPECT_EQ(x.requests, 177);
    EXPECT_GT(x.hit_ratio_tokens, 0.0);
    EXPECT_EQ(x.hit_ratio_tokens, y.hit_ratio_tokens);
    EXPECT_EQ(x.hit_ratio_documents, y.hit_ratio_documents);
    EXPECT_EQ(x.evictions, y.evictions);
    EXPECT_EQ(x.bytes_copied, y.bytes_copied);
    EXPECT_EQ(x.ttft_ms.p50, y.ttft_ms.p50);
    EXPECT_EQ(x.makespan_s, y.makespan_s);
    ASSERT_EQ(x.records.size(), y.records.size());
    for (std::size_t i = 0; i < x.records.size(); ++i) {
      EXPECT_EQ(x.records[i].document_hits, y.records[i].document_hits);
      EXPECT_EQ(x.records[i].first_token_s, y.records[i].first_token_s);
      // The scheduler saw the request's own prompt: its passages and its question.
      EXPECT_EQ(x.records[i].prompt_tokens, int(a.layout(a.requests[i]).total_tokens()));
    }
  }
}

TEST(WorkloadTrace, RealCpuRunOfTheTraceMatchesAccountingMode) {
  // The checkpoint's weights stay alive for the CPU backend, which reads them in place.
  const CorpusSource& s = sample_source();
  CorpusWorkloadOptions o;
  o.top_k = 2;
  o.questions = 6;
  WorkloadOptions base;
  base.concurrency = 2;
  base.output_tokens = 2;
  const Workload w = make_corpus_workload(s.store, s.questions, tiny_tokenizer(), base, o);
  ServingConfig cpu;
  cpu.backend = "cpu";
  cpu.model = lazyscope::testing::tiny_model_dir();
  cpu.cpu_threads = 1;
  ServingEngine real(cpu);
  ServingConfig accounting;
  accounting.synthetic = "llama-3.2-1b";
  ServingEngine model(accounting);
  const int64_t budget = 96 * int64_t(real.bytes_per_block());
  const int64_t same_blocks = 96 * int64_t(model.bytes_per_block());
  for (Policy policy : {Policy::Materialized, Policy::Lazy}) {
    const ServingResult a = real.run(w, budget, policy, {});
    const ServingResult b = model.run(w, same_blocks, policy, {});
    EXPECT_EQ(a.backend, "cpu");
    EXPECT_EQ(a.requests, 6);
    EXPECT_EQ(a.num_blocks, b.num_blocks);
    EXPECT_EQ(a.hit_ratio_tokens, b.hit_ratio_tokens) << to_string(policy);
    EXPECT_EQ(a.hit_ratio_documents, b.hit_ratio_documents) << to_string(policy);
    for (const RequestRecord& r : a.records) EXPECT_EQ(r.output_tokens, 2);
  }
}

TEST(WorkloadTrace, BadOptionsAreClearErrors) {
  const CorpusSource& s = sample_source();
  CorpusWorkloadOptions o;
  o.top_k = 0;
  EXPECT_NE(error_of([&] { make_corpus_workload(s.store, s.questions, tiny_tokenizer(), {}, o); })
                .find("--top-k must be between 1 and 64 (got 0)"),
            std::string::npos);
  o.top_k = 65;
  EXPECT_NE(error_of([&] { validate(o); }).find("got 65"), std::string::npos);
  EXPECT_NE(error_of([] { parse_trace_kind("bm25"); }).find("unknown --trace 'bm25'"), std::string::npos);
  EXPECT_EQ(parse_trace_kind("zipf"), TraceKind::Zipf);
  o.top_k = 4;
  QuestionSet empty;
  empty.source = "empty.jsonl";
  EXPECT_NE(error_of([&] { make_corpus_workload(s.store, empty, tiny_tokenizer(), {}, o); })
                .find("empty.jsonl: no questions"),
            std::string::npos);
  o.trace = TraceKind::Zipf;
  WorkloadOptions base;
  base.documents = 2;
  base.docs_per_request = 3;
  EXPECT_NE(error_of([&] { make_corpus_workload(s.store, s.questions, tiny_tokenizer(), base, o); })
                .find("--docs-per-request 3 exceeds the 2 passages"),
            std::string::npos);
  EXPECT_NE(error_of([] { open_corpus_source("/no/such/store.db", TraceKind::Questions); }).find("no such corpus store"),
            std::string::npos);
  EXPECT_NE(error_of([] { open_corpus_source("", TraceKind::Questions); }).find("--corpus: empty"), std::string::npos);
}

}  // namespace
}  // namespace lazyscope::corpora

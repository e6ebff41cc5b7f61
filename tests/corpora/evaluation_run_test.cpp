#include "corpora/evaluation_run.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "corpora/document_store.h"
#include "corpora/sample_corpus.h"
#include "corpora/temp_dir.h"
#include "engine/runtime/session.h"
#include "support/tiny_model.h"

namespace lazyscope::corpora {
namespace {

using testing::error_of;

std::vector<EvalConfig> three_configs() {
  return {
      {Mode::Full, Policy::None}, {Mode::Block, Policy::Lazy}, {Mode::Block, Policy::Materialized}};
}

EvalReport run_tiny(const DocumentStore& store, int questions) {
  QuestionSet set = sample_question_set();
  limit_questions(set, questions);
  EvalOptions options;
  options.max_new_tokens = 6;
  // Through the serving scheduler, two in flight: later questions find the passages earlier
  // ones encoded (five at once would all encode them side by side).
  options.concurrency = 2;
  EvaluationRunner runner(store, set, three_configs(), options);
  SessionOptions so;
  so.model = lazyscope::testing::tiny_model_dir();
  so.backend = BackendKind::Cpu;
  so.policies = runner.policies();
  Session session(so);  // a fresh session: its pools start empty
  return runner.run(session);
}

TEST(EvaluationRun, FiveSampleQuestionsGiveTheJsonShapeAndTheSameFiguresTwice) {
  DocumentStore store =
      DocumentStore::open(default_sample_corpus_db(), DocumentStore::Mode::read_only);
  const EvalReport first = run_tiny(store, 5);
  const EvalReport second = run_tiny(store, 5);
  ASSERT_EQ(first.questions.size(), 5u);
  EXPECT_FALSE(first.cancelled);

  const nlohmann::json j = report_json(first);
  for (const char* key :
       {"question_source", "corpus", "model", "backend", "chat_template", "retrieval", "k",
        "max_new_tokens", "planned_questions", "finished_questions", "cancelled", "metrics",
        "configurations", "lazy_vs_materialized", "questions"}) {
    EXPECT_TRUE(j.contains(key)) << key;
  }
  EXPECT_EQ(j["finished_questions"], 5);
  ASSERT_EQ(j["configurations"].size(), 3u);
  EXPECT_EQ(j["configurations"][0]["key"], "full/none");
  EXPECT_EQ(j["configurations"][1]["key"], "block/lazy");
  for (const auto& c : j["configurations"]) {
    for (const char* key :
         {"questions", "exact_match", "contains", "f1", "recall_at_k", "token_hit_ratio",
          "document_hit_ratio", "ttft_p50_ms", "output_tokens_per_s", "all_tokens_per_s"}) {
      EXPECT_TRUE(c.contains(key)) << key;
    }
    EXPECT_EQ(c["questions"], 5);
    EXPECT_GT(c["ttft_p50_ms"].get<double>(), 0.0);
    EXPECT_GT(c["output_tokens_per_s"].get<double>(), 0.0);
  }
  ASSERT_EQ(j["questions"].size(), 5u);
  const auto& q0 = j["questions"][0];
  EXPECT_EQ(q0["id"], "q001");
  EXPECT_EQ(q0["gold_answers"][0], "Brannock");
  EXPECT_EQ(q0["passages"].size(), 4u);  // k = 4
  for (const char* key : {"full/none", "block/lazy", "block/materialized"}) {
    ASSERT_TRUE(q0["answers"].contains(key)) << key;
    EXPECT_TRUE(q0["answers"][key].contains("answer"));
    EXPECT_EQ(q0["answers"][key]["generated_tokens"].get<int>(),
              int(q0["answers"][key]["ids"].size()));
  }
  EXPECT_TRUE(j["lazy_vs_materialized"]["checked"].get<bool>());
  EXPECT_TRUE(j["lazy_vs_materialized"]["identical"].get<bool>());  // exact fp32 on the CPU

  // Everything but the clocks is the same on a second run with a fresh session.
  const auto a = first.summaries();
  const auto b = second.summaries();
  ASSERT_EQ(a.size(), b.size());
  for (std::size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(a[i].exact_match, b[i].exact_match);
    EXPECT_EQ(a[i].contains, b[i].contains);
    EXPECT_EQ(a[i].f1, b[i].f1);
    EXPECT_EQ(a[i].recall, b[i].recall);
    EXPECT_EQ(a[i].token_hit_ratio, b[i].token_hit_ratio);
    EXPECT_EQ(a[i].document_hit_ratio, b[i].document_hit_ratio);
  }
  for (std::size_t q = 0; q < first.questions.size(); ++q) {
    EXPECT_EQ(first.questions[q].passage_ids, second.questions[q].passage_ids);
    for (std::size_t c = 0; c < first.configs.size(); ++c) {
      EXPECT_EQ(first.questions[q].answers[c].ids, second.questions[q].answers[c].ids);
      EXPECT_EQ(first.questions[q].answers[c].text, second.questions[q].answers[c].text);
    }
  }
  // The JSON reads back into the same figures (the workbench opens such files).
  const EvalReport reread = report_from_json(j, "test");
  ASSERT_EQ(reread.questions.size(), first.questions.size());
  const auto c = reread.summaries();
  for (std::size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(c[i].key, a[i].key);
    EXPECT_DOUBLE_EQ(c[i].exact_match, a[i].exact_match);
    EXPECT_DOUBLE_EQ(c[i].contains, a[i].contains);
    EXPECT_DOUBLE_EQ(c[i].f1, a[i].f1);
    EXPECT_DOUBLE_EQ(c[i].token_hit_ratio, a[i].token_hit_ratio);
  }
  EXPECT_TRUE(reread.identity().ok());
  EXPECT_EQ(reread.identity().compared, 5);
  EXPECT_NE(error_of([] {
              report_from_json(nlohmann::json::object(), "x.json");
            }).find("x.json: not an evaluation JSON"),
            std::string::npos);

  // Lazy reuses passages the earlier questions encoded; full/none never hits.
  EXPECT_EQ(a[0].token_hit_ratio, 0.0);
  EXPECT_GT(a[1].token_hit_ratio, 0.0);
}

TEST(EvaluationRun, TheSessionMustServeEveryPolicy) {
  DocumentStore store =
      DocumentStore::open(default_sample_corpus_db(), DocumentStore::Mode::read_only);
  QuestionSet set = sample_question_set();
  limit_questions(set, 1);
  EvaluationRunner runner(store, set, three_configs(), EvalOptions{});
  EXPECT_EQ(runner.policies(),
            (std::vector<Policy>{Policy::None, Policy::Lazy, Policy::Materialized}));
  SessionOptions so;
  so.model = lazyscope::testing::tiny_model_dir();
  so.backend = BackendKind::Cpu;
  so.policies = {Policy::Lazy, Policy::Materialized};
  Session session(so);
  EXPECT_NE(error_of([&] { runner.run(session); }).find("no KV pool for policy none"),
            std::string::npos);
}

TEST(EvaluationRun, CancelKeepsOnlyFinishedQuestions) {
  DocumentStore store =
      DocumentStore::open(default_sample_corpus_db(), DocumentStore::Mode::read_only);
  QuestionSet set = sample_question_set();
  limit_questions(set, 4);
  EvalOptions options;
  options.max_new_tokens = 4;
  options.concurrency = 1;  // one request at a time: progress after every question
  EvaluationRunner runner(store, set, {{Mode::Block, Policy::Lazy}}, options);
  SessionOptions so;
  so.model = lazyscope::testing::tiny_model_dir();
  so.backend = BackendKind::Cpu;
  Session session(so);
  std::atomic<bool> cancel{false};
  const EvalReport report = runner.run(
      session,
      [&](const EvalProgress& p) {
        EXPECT_EQ(p.total, 4);
        EXPECT_GE(p.remaining_s, 0.0);
        if (p.done == 2) cancel.store(true);
      },
      &cancel);
  EXPECT_TRUE(report.cancelled);
  EXPECT_EQ(report.questions.size(), 2u);
  EXPECT_EQ(report_json(report)["finished_questions"], 2);
}

// The serving scheduler's path (several questions in flight, batched decode, rounds of
// 4 x concurrency questions) gives every configuration the same tokens as one request at a time
// on the exact CPU, each policy on its own pool and history.
TEST(EvaluationRun, BatchedAnswersEqualSequentialOnTheExactCpu) {
  DocumentStore store =
      DocumentStore::open(default_sample_corpus_db(), DocumentStore::Mode::read_only);
  QuestionSet set = sample_question_set();
  limit_questions(set, 10);
  const std::vector<EvalConfig> configs = {{Mode::Full, Policy::None},
                                           {Mode::Block, Policy::Lazy},
                                           {Mode::Block, Policy::Materialized},
                                           {Mode::Block, Policy::Positional}};
  auto run = [&](int concurrency) {
    EvalOptions options;
    options.max_new_tokens = 8;
    options.concurrency = concurrency;
    EvaluationRunner runner(store, set, configs, options);
    SessionOptions so;
    so.model = lazyscope::testing::tiny_model_dir();
    so.backend = BackendKind::Cpu;
    so.cpu_precision = CpuPrecision::Exact;
    so.policies = runner.policies();
    Session session(so);
    return runner.run(session);
  };
  const EvalReport one = run(1);
  const EvalReport batched = run(2);  // rounds of 8: 8 + 2 questions
  ASSERT_EQ(one.questions.size(), 10u);
  ASSERT_EQ(batched.questions.size(), 10u);
  EXPECT_FALSE(batched.cancelled);
  EXPECT_EQ(report_json(batched)["concurrency"], 2);
  int generated = 0;
  for (std::size_t q = 0; q < one.questions.size(); ++q) {
    const QuestionResult& a = one.questions[q];
    const QuestionResult& b = batched.questions[q];
    EXPECT_EQ(a.question.id, b.question.id);
    EXPECT_EQ(a.passage_ids, b.passage_ids);
    for (std::size_t c = 0; c < configs.size(); ++c) {
      ASSERT_TRUE(b.answers[c].ran);
      EXPECT_EQ(a.answers[c].ids, b.answers[c].ids) << a.question.id << " " << configs[c].key();
      EXPECT_EQ(a.answers[c].text, b.answers[c].text);
      EXPECT_EQ(a.answers[c].prompt_tokens, b.answers[c].prompt_tokens);
      EXPECT_GT(b.answers[c].ttft_ms, 0.0);
      EXPECT_GE(b.answers[c].request_ms, b.answers[c].ttft_ms);
      generated += b.answers[c].generated_tokens;
    }
    ASSERT_TRUE(b.identity.has_value());
    EXPECT_TRUE(b.identity->acceptable());
  }
  EXPECT_GT(generated, 0);
  EXPECT_TRUE(batched.identity().ok());
  const auto s = batched.summaries();
  ASSERT_EQ(s.size(), configs.size());
  EXPECT_EQ(s[0].token_hit_ratio, 0.0);  // full/none keeps nothing
  EXPECT_GT(s[1].token_hit_ratio, 0.0);  // lazy reuses the passages earlier questions encoded
  for (const ConfigSummary& c : s) {
    EXPECT_GT(c.seconds, 0.0);
    EXPECT_GT(c.output_tokens_per_s, 0.0);
  }
}

TEST(EvaluationRun, CancelInBatchedModeDropsTheUnfinishedRound) {
  DocumentStore store =
      DocumentStore::open(default_sample_corpus_db(), DocumentStore::Mode::read_only);
  QuestionSet set = sample_question_set();
  limit_questions(set, 12);
  EvalOptions options;
  options.max_new_tokens = 4;
  options.concurrency = 2;  // rounds of 8 questions
  EvaluationRunner runner(store, set, {{Mode::Block, Policy::Lazy}}, options);
  SessionOptions so;
  so.model = lazyscope::testing::tiny_model_dir();
  so.backend = BackendKind::Cpu;
  Session session(so);
  std::atomic<bool> cancel{false};
  const EvalReport report = runner.run(
      session,
      [&](const EvalProgress& p) {
        if (p.done == 8) cancel.store(true);
      },
      &cancel);
  EXPECT_TRUE(report.cancelled);
  EXPECT_EQ(report.questions.size(), 8u);

  std::atomic<bool> at_once{true};
  const EvalReport none = runner.run(session, {}, &at_once);
  EXPECT_TRUE(none.cancelled);
  EXPECT_TRUE(none.questions.empty());
}

TEST(EvaluationRun, OptionsAndConfigurationsAreChecked) {
  EXPECT_EQ(
      eval_configs({Mode::Full, Mode::Block}, {Policy::Lazy, Policy::Materialized, Policy::None})
          .size(),
      4u);
  EXPECT_EQ(eval_configs({Mode::Full}, {Policy::Lazy, Policy::None}).front().key(), "full/none");
  EXPECT_NE(error_of([] {
              eval_configs({Mode::Full}, {Policy::Lazy});
            }).find("no valid mode/policy pair"),
            std::string::npos);
  EXPECT_NE(error_of([] { parse_retrieval("dense"); }).find("bm25 or gold"), std::string::npos);
  DocumentStore store =
      DocumentStore::open(default_sample_corpus_db(), DocumentStore::Mode::read_only);
  EvalOptions bad_k;
  bad_k.k = 0;
  EXPECT_NE(error_of([&] {
              EvaluationRunner(store, sample_question_set(), three_configs(), bad_k);
            }).find("-k must be"),
            std::string::npos);
  EvalOptions bad_concurrency;
  bad_concurrency.concurrency = 0;
  EXPECT_NE(error_of([&] {
              EvaluationRunner(store, sample_question_set(), three_configs(), bad_concurrency);
            }).find("--concurrency must be between 1 and 256 (got 0)"),
            std::string::npos);
}

TEST(EvaluationRun, GoldRetrievalPutsTheGoldPassagesInThePrompt) {
  DocumentStore store =
      DocumentStore::open(default_sample_corpus_db(), DocumentStore::Mode::read_only);
  QuestionSet set = sample_question_set();
  EvalOptions options;
  options.retrieval = Retrieval::gold;
  EvaluationRunner runner(store, set, three_configs(), options);
  const Question& q = set.questions.front();
  const std::vector<Document> passages = runner.retrieve(q);
  ASSERT_EQ(passages.size(), q.doc_ids.size());
  EXPECT_EQ(passages.front().id, q.doc_ids.front());
}

QuestionResult answered(const std::string& id, std::vector<int32_t> lazy_ids,
                        std::vector<int32_t> materialized_ids) {
  QuestionResult q;
  q.question.id = id;
  q.answers.resize(2);
  q.answers[0].ran = q.answers[1].ran = true;
  q.answers[0].ids = std::move(lazy_ids);
  q.answers[1].ids = std::move(materialized_ids);
  return q;
}

TEST(IdentityCheck, FailsAndNamesTheQuestionWhenAnswerListsDiffer) {
  std::vector<QuestionResult> same = {answered("q1", {5, 6, 7}, {5, 6, 7}),
                                      answered("q2", {1}, {1})};
  IdentityVerdict ok = check_identical_answers(same, 0, 1);
  EXPECT_TRUE(ok.ok());
  EXPECT_EQ(ok.compared, 2);

  std::vector<QuestionResult> different = {answered("q1", {5, 6, 7}, {5, 6, 7}),
                                           answered("q2", {1, 2}, {1, 3})};
  IdentityVerdict bad = check_identical_answers(different, 0, 1);
  EXPECT_FALSE(bad.ok());
  EXPECT_EQ(bad.differing, std::vector<std::string>{"q2"});
  EXPECT_NE(bad.describe().find("q2"), std::string::npos);

  // A flip recorded as a near-tie (both margins within the step's |dlogit|) is reported apart.
  TokenAgreement near_tie;
  near_tie.identical = false;
  near_tie.near_tie = true;
  near_tie.step = 1;
  different[1].identity = near_tie;
  IdentityVerdict tie = check_identical_answers(different, 0, 1);
  EXPECT_TRUE(tie.ok());
  EXPECT_EQ(tie.near_ties, std::vector<std::string>{"q2"});
}

// A report of block/lazy and block/materialized over two questions, q2's answers as given.
EvalReport identity_report(const std::string& backend, const std::string& device,
                           std::vector<int32_t> q2_lazy, std::vector<int32_t> q2_materialized) {
  EvalReport r;
  r.backend = backend;
  r.device = device;
  r.configs = {{Mode::Block, Policy::Lazy}, {Mode::Block, Policy::Materialized}};
  r.questions = {answered("q1", {5, 6, 7}, {5, 6, 7}),
                 answered("q2", std::move(q2_lazy), std::move(q2_materialized))};
  return r;
}

TEST(IdentityCheck, TheCommandFailsOnTheExactCpuAndNamesTheQuestion) {
  // Two different answer lists on the exact fp32 CPU: the failure names q2, not q1.
  const EvalReport exact = identity_report("cpu", "CPU, 16 threads", {1, 2}, {1, 3});
  EXPECT_TRUE(exact.exact_cpu());
  const std::string failure = exact.identity_failure();
  EXPECT_NE(failure.find("differ beyond a near-tie"), std::string::npos) << failure;
  EXPECT_NE(failure.find(" q2"), std::string::npos) << failure;
  EXPECT_EQ(failure.find("q1"), std::string::npos) << failure;
  // The same answers agreeing: no failure.
  EXPECT_EQ(identity_report("cpu", "CPU, 16 threads", {1, 2}, {1, 2}).identity_failure(), "");
  // A flip recorded as a near-tie is within rounding: no failure.
  EvalReport tie = identity_report("cpu", "CPU, 1 thread", {1, 2}, {1, 3});
  TokenAgreement near_tie;
  near_tie.identical = false;
  near_tie.near_tie = true;
  near_tie.step = 1;
  tie.questions[1].identity = near_tie;
  EXPECT_EQ(tie.identity_failure(), "");
  // The fast CPU kernels and the GPU report a difference; it does not fail the command.
  const EvalReport fast =
      identity_report("cpu", "CPU fast (AVX-512 VNNI), 1 thread", {1, 2}, {1, 3});
  EXPECT_FALSE(fast.exact_cpu());
  EXPECT_FALSE(fast.identity().ok());
  EXPECT_EQ(fast.identity_failure(), "");
  EXPECT_EQ(identity_report("cuda", "NVIDIA H200", {1, 2}, {1, 3}).identity_failure(), "");
  // Without both policies there is nothing to check.
  EvalReport one = identity_report("cpu", "CPU, 1 thread", {1, 2}, {1, 3});
  one.configs[1] = {Mode::Block, Policy::Positional};
  EXPECT_EQ(one.identity_failure(), "");
}

TEST(IdentityCheck, AgreementFollowsTheEnginesEquivalenceRule) {
  RunResult a, b;
  a.generated_ids = {3, 1};
  b.generated_ids = {3, 1};
  a.step_logits = {{0, 0, 0, 9}, {0, 5.0f, 4.0f, 0}};
  b.step_logits = a.step_logits;
  EXPECT_TRUE(agreement_of(a, b, "cpu").identical);
  // A flip by a full logit on the CPU (fp32: 1e-4): a real difference.
  b.generated_ids = {3, 2};
  b.step_logits[1] = {0, 4.0f, 5.0f, 0};
  const TokenAgreement real = agreement_of(a, b, "cpu");
  EXPECT_FALSE(real.identical);
  EXPECT_FALSE(real.near_tie);
  EXPECT_EQ(real.step, 1);
  EXPECT_FALSE(real.acceptable());
  EXPECT_FALSE(real.describe().empty());
  // Two tokens within rounding of each other in both runs: a near-tie.
  a.step_logits[1] = {0, 5.0f, 4.99995f, 0};
  b.step_logits[1] = {0, 4.99995f, 5.0f, 0};
  const TokenAgreement tie = agreement_of(a, b, "cpu");
  EXPECT_FALSE(tie.identical);
  EXPECT_TRUE(tie.near_tie) << tie.describe();
  EXPECT_TRUE(tie.acceptable());
  // One run stops (end of turn) where the other goes on: the same logits over the compared
  // steps, different answers.
  a.step_logits[1] = b.step_logits[1] = {0, 5.0f, 4.0f, 0};
  b.generated_ids = {3, 1, 2};
  b.step_logits.push_back({0, 0, 9, 0});
  const TokenAgreement longer = agreement_of(a, b, "cpu");
  EXPECT_FALSE(longer.identical);
  EXPECT_FALSE(longer.acceptable());
  EXPECT_EQ(longer.step, 2);
}

}  // namespace
}  // namespace lazyscope::corpora

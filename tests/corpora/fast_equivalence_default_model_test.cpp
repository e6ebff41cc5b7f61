// The default model (SmolLM2, Q4_1) on the fast CPU kernels: lazy vs materialized on two sample
// questions with their BM25 passages, judged by the engine's rule with the fast CPU's bound.
// The int8 activations make the two differ by whole logits (docs/cpu_backend.md); the rule
// must still call them identical or a near-tie, every compared step within the bound, and the
// exact CPU's 1e-4 must still call the same pair different (the bound is what lets it pass).
// Skipped when the default model is not installed.
#include <gtest/gtest.h>

#include "corpora/document_store.h"
#include "corpora/sample_corpus.h"
#include "engine/model/model_registry.h"
#include "engine/runtime/equivalence.h"
#include "engine/runtime/session.h"

namespace lazyscope {
namespace {

TEST(FastEquivalenceDefaultModel, SampleQuestionsAreIdenticalOrANearTieUnderTheFastBound) {
  const auto path = default_model_path();
  if (!path) GTEST_SKIP() << "SmolLM2 is not installed (scripts/install_default_model.sh)";
  SessionOptions options;
  options.model = *path;
  options.backend = BackendKind::Cpu;
  options.cpu_precision = CpuPrecision::Fast;
  options.cpu_threads = 2;
  options.kv_budget_bytes = 128ull << 20;
  options.policies = {Policy::Lazy, Policy::Materialized};
  Session session(options);
  const corpora::DocumentStore store = corpora::DocumentStore::open(corpora::default_sample_corpus_db(),
                                                                    corpora::DocumentStore::Mode::read_only);
  std::vector<corpora::Question> questions = store.questions();
  ASSERT_GE(questions.size(), 2u);
  questions.resize(2);
  double worst = 0.0;
  for (const corpora::Question& q : questions) {
    Request request;
    for (const corpora::SearchHit& hit : store.search(q.question, 4)) request.documents.push_back(hit.document.text);
    request.query = q.question;
    request.max_new_tokens = 8;
    RunOptions lazy, materialized;
    lazy.policy = Policy::Lazy;
    materialized.policy = Policy::Materialized;
    const RunResult a = session.submit(request, lazy);
    const RunResult b = session.submit(request, materialized);
    ASSERT_EQ(a.cpu_precision, CpuPrecision::Fast);
    EXPECT_GT(b.stats.bytes_copied, 0) << q.id << ": no document was shifted";
    const EquivalenceResult fast = compare_greedy_runs(a.step_logits, a.generated_ids, b.step_logits, b.generated_ids,
                                                       logit_tolerance_for(a.backend, a.cpu_precision));
    EXPECT_NE(fast.verdict, EquivalenceVerdict::Different) << q.id << ": " << fast.explanation;
    for (const StepComparison& s : fast.steps) EXPECT_LE(s.max_abs_diff, s.tolerance) << q.id << " step " << s.step;
    worst = std::max(worst, fast.max_abs_diff);
    std::printf("%s: %s (%s)\n", q.id.c_str(), to_string(fast.verdict), fast.explanation.c_str());
  }
  // The fast kernels' int8 rounding really is in play here: beyond the exact CPU's bound.
  EXPECT_GT(worst, 1e-4);
}

}  // namespace
}  // namespace lazyscope

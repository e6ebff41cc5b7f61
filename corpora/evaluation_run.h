#pragma once
// Answer quality over a question set: retrieval (BM25 top-k or the gold passages) -> the model
// under each (mode, policy) configuration -> exact match, containment, token F1, recall@k, hit
// ratio, TTFT and throughput per configuration, the answers side by side per question, and the
// lazy-vs-materialized identity check. Shared by `lazyscope-cli eval` and the workbench.
#include <atomic>
#include <filesystem>
#include <functional>
#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "corpora/evaluation.h"
#include "corpora/question_set.h"
#include "engine/events/events.h"
#include "engine/kv/policy.h"
#include "engine/runtime/request.h"
#include "engine/runtime/request_preparation.h"

namespace lazyscope {
class Session;
struct RunResult;
}  // namespace lazyscope

namespace lazyscope::corpora {

class DocumentStore;

enum class Retrieval { bm25, gold };
Retrieval parse_retrieval(std::string_view text);  // "bm25" or "gold"; throws naming both
const char* to_string(Retrieval retrieval);

struct EvalConfig {
  Mode mode = Mode::Block;
  Policy policy = Policy::Lazy;
  std::string key() const;  // "full/none", "block/lazy", ...
};

// Every valid (mode, policy) pair of the two lists, modes outer, in the order given (full runs
// with none/prefix, block with none/positional/materialized/lazy). Throws when no pair is valid
// or a list is empty.
std::vector<EvalConfig> eval_configs(const std::vector<Mode>& modes,
                                     const std::vector<Policy>& policies);

struct EvalOptions {
  Retrieval retrieval = Retrieval::bm25;
  int k = 4;                // passages per question (BM25 top-k; gold uses all gold passages)
  int max_new_tokens = 24;  // answers are short
  std::string system;       // system text; empty: the chat template's default (none when plain)
  ChatMode chat = ChatMode::Auto;  // the model's chat template: auto (when it has one), on, off
  // Questions in flight per configuration. > 1: through the serving scheduler (continuous
  // batching, batched decode; Session::serve); 1: one request at a time (Session::submit).
  int concurrency = 8;
};
inline constexpr int kMaxEvalConcurrency = 256;

// The engine's equivalence verdict (engine/runtime/equivalence.h) for block/lazy vs
// block/materialized on one question, as the report keeps it.
struct TokenAgreement {
  bool identical = true;
  bool near_tie = false;      // the first flip is within rounding (both margins within tolerance)
  int step = -1;              // first differing step, -1 when identical
  double max_abs_diff = 0.0;  // max |delta logit| over the compared steps
  double margin_a = 0.0, margin_b = 0.0;
  std::string explanation;  // the engine's one-sentence verdict
  bool acceptable() const { return identical || near_tie; }
  std::string describe() const;
};
// Judges two runs of the same prompt by the engine's rule (needs both runs' step_logits),
// with the rounding tolerance of `backend`.
TokenAgreement agreement_of(const RunResult& a, const RunResult& b, const std::string& backend);

struct ConfigAnswer {
  bool ran = false;
  std::string text;
  std::vector<int32_t> ids;
  AnswerScore score;
  int prompt_tokens = 0;
  int generated_tokens = 0;
  double ttft_ms = 0.0;
  double request_ms = 0.0;  // submit to the last token, everything the user waits for
  CacheStats stats;
};

struct QuestionResult {
  Question question;
  std::vector<std::string> passage_ids;  // what was put in the prompt, in prompt order
  std::vector<std::string> passage_titles;
  std::vector<std::string> passage_texts;  // for loading the question back into a prompt
  double recall = 0.0;                     // recall@k of the gold passages (1 for gold retrieval)
  std::vector<ConfigAnswer> answers;       // one per configuration, in configuration order
  std::optional<TokenAgreement> identity;  // block/lazy vs block/materialized when both ran
  // True when the configurations' normalised answers are not all the same.
  bool configurations_disagree() const;
};

struct ConfigSummary {
  std::string key;
  int questions = 0;                // answered under this configuration
  double exact_match = 0.0;         // mean, 0..1: normalised answer equals a gold answer
  double contains = 0.0;            // mean, 0..1: a gold answer occurs in the normalised answer
  double f1 = 0.0;                  // mean token F1
  double recall = 0.0;              // mean recall@k of the gold passages
  double token_hit_ratio = 0.0;     // prompt tokens served from cache / prompt tokens
  double document_hit_ratio = 0.0;  // placed documents found cached / placed documents
  double ttft_p50_ms = 0.0;
  double output_tokens_per_s = 0.0;  // generated tokens / the configuration's seconds
  double all_tokens_per_s = 0.0;     // (prompt + generated tokens) / the configuration's seconds
  double seconds = 0.0;              // EvalReport::config_seconds (0 when unknown)
};

// Questions whose lazy and materialized answers differ beyond a near-tie, and the near-ties.
struct IdentityVerdict {
  bool checked = false;  // both configurations ran
  int compared = 0;
  std::vector<std::string> differing;  // question ids
  std::vector<std::string> near_ties;
  double max_abs_diff = 0.0;  // max |delta logit| over the compared questions' steps
  bool ok() const { return differing.empty(); }
  std::string describe() const;
};

struct EvalReport {
  std::string question_source;
  std::string corpus;
  std::string model;
  std::string backend;
  std::string device;         // Session::device(), e.g. "CPU fast (AVX2), 8 threads"
  std::string chat_template;  // "chatml", "plain", ... or "off"
  EvalOptions options;
  std::vector<EvalConfig> configs;
  std::vector<QuestionResult> questions;  // those finished, in question-set order
  // Per configuration: seconds its requests took (sequential: the sum of request times;
  // batched: the serving runs' wall time). Output tokens/s divide by this.
  std::vector<double> config_seconds;
  int planned_questions = 0;
  bool cancelled = false;
  double wall_seconds = 0.0;

  std::vector<ConfigSummary> summaries() const;
  int config_index(Mode mode, Policy policy) const;  // -1 when absent
  IdentityVerdict identity() const;
  // True when the run used the CPU's exact fp32 reference, where lazy and materialized must
  // agree within 1e-4 (the fast CPU kernels quantize activations to int8, so the two policies'
  // rounding differences grow to whole-logit differences there; the GPU computes in bf16).
  bool exact_cpu() const;
  // The command's failure when lazy and materialized differ beyond a near-tie on the exact CPU:
  // a sentence naming the questions; "" when they agree, when they were not both run, or on a
  // backend where a difference is reported, not fatal (the fast CPU kernels, the GPU).
  std::string identity_failure() const;
  // Exact match (containment) of full attention minus that of block attention, in points
  // (0..100), when both ran: full/none (else full/prefix) against block/lazy (else the first
  // block configuration).
  std::optional<double> block_em_loss_points() const;
  std::optional<double> block_contains_loss_points() const;
  // A plain warning when block attention loses more than 3 points of exact match or of
  // containment against full attention; "" otherwise.
  std::string block_quality_note() const;
  // Indexes of the full and block configurations compared above.
  std::optional<std::pair<int, int>> full_and_block() const;
};

// The identity rule on answer lists: question i of `a` and of `b` (same question ids) must have
// the same generated ids, or a recorded near-tie (QuestionResult::identity) at the first flip.
IdentityVerdict check_identical_answers(const std::vector<QuestionResult>& questions,
                                        std::size_t config_a, std::size_t config_b);

nlohmann::json report_json(const EvalReport& report);
// Reads back what report_json wrote (a `--json` file): configurations, questions, answers and
// scores; the lazy-vs-materialized agreement of each question as its recorded verdict. Passage
// texts are not in the file (QuestionResult::passage_texts stays empty). Throws naming `source`.
EvalReport report_from_json(const nlohmann::json& json, const std::string& source);
EvalReport load_report_json(const std::filesystem::path& path);

// The request one question runs with: system text as the prefix, one document per passage (its
// title as the label), the question; Session::prepare then applies the chat setting, exactly as
// `generate` and the workbench do.
Request eval_request(const Question& question, const std::vector<Document>& passages,
                     const EvalOptions& options);

struct EvalProgress {
  int done = 0;   // questions finished
  int total = 0;  // questions planned
  double elapsed_s = 0.0;
  double remaining_s = -1.0;  // estimate from the mean time per finished question; -1 before one
  const QuestionResult* last = nullptr;
};
using EvalProgressFn = std::function<void(const EvalProgress&)>;

class EvaluationRunner {
 public:
  // `store` serves BM25 retrieval and the gold passages; it must outlive the runner.
  EvaluationRunner(const DocumentStore& store, QuestionSet questions,
                   std::vector<EvalConfig> configs, EvalOptions options);

  // Runs every question under every configuration on `session`, whose per-policy KV pools give
  // each policy its own pool and history (the session must serve every configuration's
  // policy). With options.concurrency 1 the questions run one by one, each under every
  // configuration. Above 1 they run in rounds of up to 4 x concurrency questions: each
  // configuration serves the round's questions through the serving scheduler with
  // `concurrency` of them in flight (Session::serve); a question whose lazy and materialized
  // tokens differ is run again one at a time, logits kept, for the near-tie verdict. `cancel`
  // stops the current request (the round) and keeps the finished questions.
  EvalReport run(Session& session, const EvalProgressFn& progress = {},
                 const std::atomic<bool>* cancel = nullptr);
  // The distinct policies of the configurations (what the session must serve).
  std::vector<Policy> policies() const;

  const QuestionSet& questions() const { return questions_; }
  const std::vector<EvalConfig>& configs() const { return configs_; }

  // The passages retrieval gives one question (BM25 top-k over the question text, or its gold
  // passages in their listed order).
  std::vector<Document> retrieve(const Question& question) const;

 private:
  void run_sequential(Session& session, EvalReport& report, const EvalProgressFn& progress,
                      const std::atomic<bool>* cancel);
  void run_batched(Session& session, EvalReport& report, const EvalProgressFn& progress,
                   const std::atomic<bool>* cancel);
  // A QuestionResult with its passages and recall, answers not yet run.
  QuestionResult start_question(const Question& question) const;

  const DocumentStore& store_;
  QuestionSet questions_;
  std::vector<EvalConfig> configs_;
  EvalOptions options_;
};

}  // namespace lazyscope::corpora

// lazyscope-cli eval: answer quality of a question set under each mode and policy (exact match,
// containment, token F1, recall@k, hit ratio, TTFT, tokens/s), the answers side by side, and the
// lazy-vs-materialized identity check.
#include <unistd.h>

#include <atomic>
#include <csignal>
#include <cstdio>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <sstream>

#include "app/cli/commands.h"
#include "app/cli/option_checks.h"
#include "app/cli/output_kinds.h"
#include "app/cli/progress_bar.h"
#include "base/atomic_file.h"
#include "base/byte_size.h"
#include "base/error.h"
#include "base/limits.h"
#include "base/output_guard.h"
#include "corpora/document_store.h"
#include "corpora/evaluation_run.h"
#include "engine/runtime/equivalence.h"
#include "corpora/sample_corpus.h"
#include "engine/model/model_loader.h"
#include "engine/runtime/default_model.h"
#include "engine/runtime/session.h"
#include "profiler/session_recorder.h"

namespace lazyscope::cli {
namespace {

using namespace lazyscope::corpora;

// The system text chosen by measuring the sample's questions (docs/evaluation.md).
constexpr const char* kDefaultSystem = "Answer the question using the documents. Be brief.";

struct EvalArgs {
  std::string model = "default";
  std::string corpus;
  std::string questions;
  std::string retrieval = "bm25";
  int k = 4;
  std::string modes = "full,block";
  std::string policies = "lazy,materialized,none";
  std::string configs;
  int max_new_tokens = 24;
  std::string system = kDefaultSystem;
  std::string chat = "auto";
  int limit = 0;
  std::string json;
  std::string record;
  std::string backend = "auto";
  std::string kv_budget = "256MiB";
  int block_size = 16;
  int threads = 0;
  int concurrency = 8;
  std::string cpu_precision = "fast";
  bool quiet = false;
};

std::atomic<bool> g_interrupted{false};

void on_sigint(int) { g_interrupted.store(true); }

// Restores the previous SIGINT disposition on scope exit.
class SigintGuard {
 public:
  SigintGuard() { previous_ = std::signal(SIGINT, on_sigint); }
  ~SigintGuard() { std::signal(SIGINT, previous_); }
  SigintGuard(const SigintGuard&) = delete;
  SigintGuard& operator=(const SigintGuard&) = delete;

 private:
  void (*previous_)(int) = SIG_DFL;
};

std::vector<std::string> split_list(const std::string& text) {
  std::vector<std::string> out;
  std::stringstream ss(text);
  std::string item;
  while (std::getline(ss, item, ',')) {
    if (!item.empty()) out.push_back(item);
  }
  return out;
}

std::vector<EvalConfig> configs_from(const EvalArgs& args) {
  if (!args.configs.empty()) {
    std::vector<EvalConfig> out;
    for (const std::string& item : split_list(args.configs)) {
      const auto slash = item.find('/');
      if (slash == std::string::npos)
        throw Error("--configs: \"" + item + "\" is not MODE/POLICY, e.g. block/lazy");
      EvalConfig c{parse_mode(item.substr(0, slash)), parse_policy(item.substr(slash + 1))};
      check_mode_policy(c.mode, c.policy);
      out.push_back(c);
    }
    if (out.empty())
      throw Error("--configs: name at least one MODE/POLICY pair, e.g. full/none,block/lazy");
    return out;
  }
  std::vector<Mode> modes;
  for (const std::string& m : split_list(args.modes)) modes.push_back(parse_mode(m));
  std::vector<Policy> policies;
  for (const std::string& p : split_list(args.policies)) policies.push_back(parse_policy(p));
  return eval_configs(modes, policies);
}

std::string format_duration(double seconds) {
  if (seconds < 0) return "?";
  const long s = long(seconds + 0.5);
  char text[32];
  if (s >= 3600)
    std::snprintf(text, sizeof text, "%ldh%02ldm", s / 3600, (s / 60) % 60);
  else if (s >= 60)
    std::snprintf(text, sizeof text, "%ldm%02lds", s / 60, s % 60);
  else
    std::snprintf(text, sizeof text, "%lds", s);
  return text;
}

// One line, at most `width` bytes, not cut inside a UTF-8 sequence.
std::string cell(std::string_view text, std::size_t width) {
  std::string out;
  for (char c : text) out.push_back(c == '\n' || c == '\r' || c == '\t' ? ' ' : c);
  if (out.size() <= width) return out + std::string(width - out.size(), ' ');
  std::size_t cut = width - 1;
  while (cut > 0 && (static_cast<unsigned char>(out[cut]) & 0xC0) == 0x80) --cut;
  out.resize(cut);
  out += "~";
  return out + std::string(width - std::min(width, cut + 1), ' ');
}

void print_answers(const EvalReport& report) {
  constexpr std::size_t kWidth = 22;
  std::printf("\nAnswers side by side (* = exact match, + = contains a gold answer):\n%-8s %s",
              "question", cell("gold", kWidth).c_str());
  for (const EvalConfig& c : report.configs) std::printf(" | %s", cell(c.key(), kWidth).c_str());
  std::printf("\n");
  for (const QuestionResult& q : report.questions) {
    std::printf("%-8s %s", q.question.id.c_str(), cell(q.question.answers.front(), kWidth).c_str());
    for (const ConfigAnswer& a : q.answers) {
      const char mark = a.score.exact_match > 0 ? '*' : a.score.contains > 0 ? '+' : ' ';
      std::printf(" |%c%s", mark, cell(a.text, kWidth - 1).c_str());
      std::printf(" ");
    }
    std::printf("\n");
  }
}

void print_summary(const EvalReport& report) {
  std::printf(
      "\n%d of %d questions from %s, %s retrieval, k=%d, max %d new tokens, chat template %s, "
      "model %s on %s\n",
      int(report.questions.size()), report.planned_questions, report.question_source.c_str(),
      to_string(report.options.retrieval), report.options.k, report.options.max_new_tokens,
      report.chat_template.c_str(), report.model.c_str(), report.backend.c_str());
  std::printf(
      "EM = exact match after SQuAD normalisation; contains = a gold answer inside the answer; "
      "tokens/s = generated tokens / %s\n\n",
      (report.options.concurrency > 1
           ? "wall time (serving scheduler, up to " + std::to_string(report.options.concurrency) +
                 " in flight)"
           : std::string("the sum of request times (one at a time)"))
          .c_str());
  std::printf("%-18s %5s %7s %9s %7s %9s %9s %10s %10s\n", "configuration", "n", "EM %",
              "contains%", "F1 %", "recall@k", "hit %", "TTFT p50", "tokens/s");
  for (const ConfigSummary& s : report.summaries()) {
    std::printf("%-18s %5d %7.1f %9.1f %7.1f %9.3f %9.1f %8.1fms %10.1f\n", s.key.c_str(),
                s.questions, 100 * s.exact_match, 100 * s.contains, 100 * s.f1, s.recall,
                100 * s.token_hit_ratio, s.ttft_p50_ms, s.output_tokens_per_s);
  }
  int disagree = 0;
  for (const QuestionResult& q : report.questions) disagree += q.configurations_disagree() ? 1 : 0;
  std::printf("\nconfigurations disagree (normalised answers) on %d of %d questions\n", disagree,
              int(report.questions.size()));
  std::printf("%s\n", report.identity().describe().c_str());
  const std::string note = report.block_quality_note();
  if (!note.empty()) std::printf("\nNOTE: %s\n", note.c_str());
}

void write_json(const std::string& path, const EvalReport& report) {
  write_file_atomically(path, report_json(report).dump(2) + "\n", "evaluation JSON");
}

// Before any work: no output over an input or over a file of another kind.
void check_files(const EvalArgs& args) {
  OutputGuard guard;
  if (!args.questions.empty()) guard.input(args.questions, "--questions");
  if (!args.corpus.empty()) guard.input(args.corpus, "--corpus");
  if (!args.model.empty() && std::filesystem::exists(args.model))
    guard.input(args.model, "--model");
  if (!args.json.empty()) {
    guard.output(args.json, "--json", "evaluation JSON", [](const std::filesystem::path& p) {
      return is_json_object_with_keys(p, {"configurations", "questions"});
    });
  }
  if (!args.record.empty()) guard.output(args.record, "--record", "session report", is_session_report);
  guard.check();
}

void run_eval(const EvalArgs& args) {
  // The numeric options were range-checked while the command line was parsed.
  check_files(args);
  g_interrupted.store(false);
  SigintGuard guard;  // Ctrl-C from here on stops after the current request, keeping what finished
  EvalOptions options;
  options.retrieval = parse_retrieval(args.retrieval);
  options.k = args.k;
  options.max_new_tokens = args.max_new_tokens;
  options.system = args.system;
  options.chat = parse_chat_mode(args.chat);
  options.concurrency = args.concurrency;
  const std::vector<EvalConfig> configs = configs_from(args);

  ProgressBar bar;
  const std::filesystem::path db = args.corpus.empty() ? default_sample_corpus_db(bar.callback())
                                                       : std::filesystem::path(args.corpus);
  DocumentStore store = DocumentStore::open(db, DocumentStore::Mode::read_only);
  QuestionSet questions = !args.questions.empty() ? load_question_file(args.questions)
                          : args.corpus.empty()   ? sample_question_set()
                                                  : store_question_set(store);
  limit_questions(questions, args.limit);
  EvaluationRunner runner(store, std::move(questions), configs, options);

  SessionOptions session_options;
  ResolvedModel resolved = resolve_model(args.model, bar.callback());
  if (!resolved.note.empty()) std::fprintf(stderr, "note: %s\n", resolved.note.c_str());
  session_options.model = resolved.path;
  session_options.backend = parse_backend_kind(args.backend);
  session_options.kv_budget_bytes = parse_byte_size(args.kv_budget);
  session_options.block_size = args.block_size;
  session_options.cpu_threads = args.threads;
  session_options.cpu_precision = parse_cpu_precision(args.cpu_precision);
  session_options.policies = runner.policies();  // one KV pool (and history) per policy
  SessionRecorder recorder;
  bar.update(0.0, "loading the model");
  Session session(session_options, args.record.empty() ? nullptr : &recorder, bar.callback());
  bar.finish();
  if (!session.backend_note().empty()) {
    std::fprintf(stderr, "note: %s\n", session.backend_note().c_str());
  }
  std::fprintf(stderr, "model %s on %s (%s); %zu questions x %zu configurations, %s\n",
               session.config().name.c_str(), session.backend_name().c_str(),
               session.device().c_str(), runner.questions().questions.size(), configs.size(),
               args.concurrency > 1
                   ? ("up to " + std::to_string(args.concurrency) +
                      " in flight through the serving scheduler")
                         .c_str()
                   : "one request at a time");

  const bool tty = isatty(fileno(stderr)) != 0;
  int printed = 0;  // questions done at the last progress line
  auto progress = [&](const EvalProgress& p) {
    const std::string what = "question " + std::to_string(p.done) + "/" + std::to_string(p.total) +
                             ", " + format_duration(p.remaining_s) + " left";
    if (tty) {
      bar.update(double(p.done) / p.total, what);
    } else if (!args.quiet && (p.done / 10 > printed / 10 || p.done == p.total)) {
      printed = p.done;
      std::fprintf(stderr, "eval: %s (%s elapsed)\n", what.c_str(),
                   format_duration(p.elapsed_s).c_str());
    }
  };
  const EvalReport report = runner.run(session, progress, &g_interrupted);
  bar.finish();

  if (!args.quiet) print_answers(report);
  print_summary(report);
  if (!args.json.empty()) {
    write_json(args.json, report);
    std::printf("evaluation JSON: %s\n", args.json.c_str());
  }
  if (!args.record.empty()) {
    recorder.set_metadata("model", report.model);
    recorder.set_metadata("backend", report.backend);
    recorder.set_metadata("device", session.device());
    recorder.set_metadata("kv_budget_bytes", std::to_string(session_options.kv_budget_bytes));
    recorder.set_metadata("tool", "lazyscope-cli eval");
    recorder.set_metadata("evaluation", report_json(report).dump());
    save_session_sqlite(recorder.snapshot(), args.record);
    std::printf("session report: %s\n", args.record.c_str());
  }
  if (const std::string failure = report.identity_failure(); !failure.empty()) throw Error(failure);
  const IdentityVerdict identity = report.identity();
  if (identity.checked && !identity.ok()) {
    const LogitTolerance rule =
        logit_tolerance_for(report.backend, report.exact_cpu() ? CpuPrecision::Exact : CpuPrecision::Fast);
    std::fprintf(stderr, "note: on %s lazy and materialized differ beyond the equivalence rule (%s): %s; %s\n",
                 report.device.c_str(), rule.rule.c_str(), identity.describe().c_str(),
                 report.backend == "cpu"
                     ? "beyond even the fast kernels' int8 rounding bound: run with --cpu-precision exact for the "
                       "strict identity check"
                     : "the GPU computes in bf16");
  }
  if (report.cancelled) {
    throw Error("interrupted: " + std::to_string(report.questions.size()) + " of " +
                std::to_string(report.planned_questions) + " questions finished" +
                (args.json.empty() ? std::string() : "; their results are in " + args.json));
  }
}

}  // namespace

void add_eval_command(CLI::App& app) {
  auto args = std::make_shared<EvalArgs>();
  CLI::App* cmd = app.add_subcommand("eval",
                                     "Answer quality of a question set under each mode and policy: "
                                     "EM, containment, F1, recall@k, hit ratio, "
                                     "TTFT, tokens/s; lazy vs materialized identity");
  cmd->add_option("--model", args->model,
                  "HF checkpoint directory, .gguf file, 'tiny', 'small' or 'default'")
      ->capture_default_str();
  cmd->add_option("--corpus", args->corpus,
                  "Corpus store from `corpus import` (default: the bundled sample); its questions "
                  "are used unless "
                  "--questions is given");
  cmd->add_option(
      "--questions", args->questions,
      "Questions JSONL: {\"question\", \"answers\": [..], \"doc_ids\": [..]?, \"id\"?} per line");
  cmd->add_option("--retrieval", args->retrieval,
                  "bm25 (top-k over the question) or gold (the gold passages)")
      ->capture_default_str();
  cmd->add_option("-k", args->k, "Passages per question for bm25 retrieval")
      ->capture_default_str()
      ->check(in_range(1, 64));
  cmd->add_option("--modes", args->modes, "Attention modes: full, block (comma-separated)")
      ->capture_default_str();
  cmd->add_option("--policies", args->policies,
                  "Cache policies: none, prefix, positional, materialized, lazy (valid pairs with "
                  "--modes only)")
      ->capture_default_str();
  cmd->add_option("--configs", args->configs,
                  "Explicit MODE/POLICY pairs instead of --modes x --policies, e.g. "
                  "full/none,block/lazy,block/materialized");
  cmd->add_option("--max-new-tokens", args->max_new_tokens, "Tokens generated per answer")
      ->capture_default_str()
      ->check(in_range(1, 4096));
  cmd->add_option("--system", args->system, "System text put before the documents ('' for none)")
      ->capture_default_str();
  cmd->add_option("--chat", args->chat, "Wrap prompts in the model's chat template: auto, on, off")
      ->capture_default_str();
  cmd->add_option("--limit", args->limit, "Evaluate the first N questions only (0 = all)")
      ->check(in_range(0, 1'000'000'000));
  cmd->add_option("--json", args->json,
                  "Write every figure and answer as JSON here (also after Ctrl-C)");
  cmd->add_option("--record", args->record,
                  "Save the session (requests, blocks, tokens, the evaluation) as a SQLite report");
  cmd->add_option("--backend", args->backend, "auto, cpu or cuda")->capture_default_str();
  cmd->add_option("--kv-budget", args->kv_budget, "KV pool size of each policy, e.g. 256MiB")
      ->capture_default_str();
  cmd->add_option("--block-size", args->block_size, "Tokens per KV block")
      ->capture_default_str()
      ->check(in_range(1, limits::kMaxBlockSize));
  cmd->add_option("--threads", args->threads, "CPU threads (0 = all cores)")
      ->check(in_range(0, limits::kMaxThreads));
  cmd->add_option("--concurrency", args->concurrency,
                  "Questions in flight per configuration through the serving scheduler "
                  "(continuous batching); 1 = one request at a time")
      ->capture_default_str()
      ->check(in_range(1, kMaxEvalConcurrency));
  cmd->add_option("--cpu-precision", args->cpu_precision,
                  "CPU backend: fast (quantized SIMD kernels) or exact (the fp32 reference, "
                  "where lazy vs materialized must agree within 1e-4)")
      ->capture_default_str()
      ->check(CLI::IsMember({"fast", "exact"}));
  cmd->add_flag("--quiet", args->quiet, "Only the summary table (no per-question answers)");
  cmd->callback([args] { run_eval(*args); });
}

}  // namespace lazyscope::cli

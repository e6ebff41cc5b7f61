// lazyscope-cli workload: a seeded RAG serving workload under every cache policy, each on its own
// KV pool of the budget, through the continuous-batching scheduler (real backend or accounting).
#include <cmath>
#include <cstdio>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <sstream>

#include "app/cli/commands.h"
#include "app/cli/option_checks.h"
#include "app/cli/output_kinds.h"
#include "base/atomic_file.h"
#include "base/output_guard.h"
#include "app/cli/progress_bar.h"
#include "base/byte_size.h"
#include "base/error.h"
#include "corpora/workload_trace.h"
#include "engine/model/tokenizer_loader.h"
#include "engine/runtime/default_model.h"
#include "engine/serving/serving_engine.h"
#include "profiler/workload_tables.h"

namespace lazyscope::cli {
namespace {

struct WorkloadArgs {
  std::string backend = "accounting";
  std::string model, synthetic, shape;
  std::string preset;
  std::string kv_budget = "1GiB";
  std::string sweep;
  std::string policies = "none,prefix,positional,materialized,lazy";
  std::string layout = "zipf";
  std::string doc_order = "shuffled";
  std::string json, record;
  WorkloadOptions w;
  std::string corpus, trace = "questions", questions;
  int top_k = 4;
  int block_size = 16;
  int step_tokens = 2048;
  int max_running = 256;
  int threads = 0;
  int tensor_parallel = 0;
  uint64_t weight_seed = 1;
};

// "unlimited" -> 0; sizes as parse_byte_size reads them.
int64_t parse_budget(const std::string& text, const char* option) {
  if (text == "unlimited" || text == "inf") return 0;
  try {
    const std::size_t v = parse_byte_size(text);
    if (v == 0) throw Error("zero");
    return int64_t(v);
  } catch (const Error& e) {
    throw Error(std::string(option) + ": '" + text + "' is not a KV budget (a positive size such as 512MiB, 1GiB, " +
                "8GB, or 'unlimited'): " + e.what());
  }
}

std::vector<int64_t> parse_budget_list(const std::string& text) {
  std::vector<int64_t> out;
  std::stringstream ss(text);
  std::string item;
  while (std::getline(ss, item, ',')) {
    if (!item.empty()) out.push_back(parse_budget(item, "--sweep-kv-budget"));
  }
  if (out.empty()) throw Error("--sweep-kv-budget: empty list (expected e.g. 512MiB,1GiB,unlimited)");
  return out;
}

std::string budget_text(int64_t bytes) {
  if (bytes == 0) return "unlimited";
  char buf[32];
  auto in = [&](int64_t unit, const char* name) {
    if (bytes % unit == 0) {
      std::snprintf(buf, sizeof buf, "%lld%s", (long long)(bytes / unit), name);
    } else {
      std::snprintf(buf, sizeof buf, "%.2f%s", double(bytes) / double(unit), name);
    }
  };
  if (bytes >= (1ll << 30)) {
    in(1ll << 30, "GiB");
  } else if (bytes >= (1ll << 20)) {
    in(1ll << 20, "MiB");
  } else {
    in(1ll << 10, "KiB");
  }
  return buf;
}

nlohmann::json percentiles_json(const Percentiles& p) {
  return {{"p50", p.p50}, {"p90", p.p90}, {"p99", p.p99}, {"mean", p.mean}};
}

class ProgressObserver final : public ServingObserver {
 public:
  ProgressObserver(ProgressBar& bar, int run, int runs, int requests, std::string what)
      : bar_(bar), run_(run), runs_(runs), requests_(requests), what_(std::move(what)) {}
  void on_request_finished(const RequestRecord&) override {
    ++done_;
    bar_.update((run_ + double(done_) / requests_) / runs_, what_);
  }

 private:
  ProgressBar& bar_;
  int run_, runs_, requests_, done_ = 0;
  std::string what_;
};

void apply_paper_preset(WorkloadArgs& a, const CLI::App& cmd) {
  // The LazyAttention paper's serving setup.
  auto unset = [&](const char* option) { return cmd.count(option) == 0; };
  if (unset("--shape") && unset("--synthetic") && unset("--model")) {
    (a.backend == "accounting" ? a.shape : a.synthetic) = "llama-3.2-1b";
  }
  if (unset("--documents")) a.w.documents = 100;
  if (unset("--doc-tokens")) a.w.doc_tokens = 2048;
  if (unset("--docs-per-request")) a.w.docs_per_request = 5;
  if (unset("--zipf")) a.w.zipf = 2.1;
  if (unset("--requests")) a.w.requests = 200;
  if (unset("--concurrency") && unset("--rate")) a.w.concurrency = 16;
  if (unset("--kv-budget")) a.kv_budget = "1GiB";
  if (unset("--query-tokens")) a.w.query_tokens = 16;
  if (unset("--output-tokens")) a.w.output_tokens = 8;
}

void run_workload_command(WorkloadArgs a, const CLI::App& cmd) {
  if (!a.preset.empty()) {
    if (a.preset != "paper") throw Error("--preset: unknown preset '" + a.preset + "' (expected paper)");
    apply_paper_preset(a, cmd);
  }
  if (a.backend != "cpu" && a.backend != "cuda" && a.backend != "accounting") {
    throw Error("--backend: unknown backend '" + a.backend + "' (expected cpu, cuda or accounting)");
  }
  if (cmd.count("--concurrency") && cmd.count("--rate")) {
    throw Error("give --concurrency (closed loop) or --rate (open loop), not both");
  }
  a.w.layout = parse_document_layout(a.layout);
  a.w.order = parse_document_order(a.doc_order);
  const bool from_corpus = !a.corpus.empty();
  corpora::CorpusWorkloadOptions corpus_options;
  if (from_corpus) {
    if (!a.preset.empty()) throw Error("--preset paper is a synthetic workload: give --preset or --corpus, not both");
    corpus_options.trace = corpora::parse_trace_kind(a.trace);
    corpus_options.top_k = a.top_k;
    corpus_options.questions = cmd.count("--requests") ? a.w.requests : 0;
    corpus_options.source = a.corpus == "sample" ? "sample corpus" : a.corpus;
    corpora::validate(corpus_options);
    const bool questions = corpus_options.trace == corpora::TraceKind::Questions;
    // What a corpus decides itself: passage lengths always; for the questions trace also which
    // passages (BM25), how many and in what order, and the query.
    std::vector<const char*> fixed = {"--doc-tokens"};
    if (questions) fixed.insert(fixed.end(), {"--documents", "--docs-per-request", "--zipf", "--layout", "--doc-order",
                                              "--query-tokens", "--prefix-tokens"});
    else fixed.insert(fixed.end(), {"--top-k", "--questions", "--prefix-tokens"});
    for (const char* option : fixed) {
      if (cmd.count(option)) {
        throw Error(std::string(option) + " does not apply to --corpus with --trace " + a.trace +
                    (std::string(option) == "--doc-tokens" ? " (each passage has its own token length)"
                     : questions ? " (each question brings its BM25 top-k passages in rank order)"
                                 : " (it belongs to --trace questions)"));
      }
    }
  } else {
    for (const char* option : {"--trace", "--top-k", "--questions"}) {
      if (cmd.count(option)) throw Error(std::string(option) + " needs --corpus STORE|sample");
    }
  }
  const std::vector<Policy> policies = parse_policy_list(a.policies);
  const std::vector<int64_t> budgets =
      a.sweep.empty() ? std::vector<int64_t>{parse_budget(a.kv_budget, "--kv-budget")} : parse_budget_list(a.sweep);
  validate(a.w);  // before any model loads
  OutputGuard guard;
  if (!a.model.empty()) guard.input(a.model, "--model");
  if (!a.questions.empty()) guard.input(a.questions, "--questions");
  if (from_corpus && a.corpus != "sample") guard.input(a.corpus, "--corpus");
  if (!a.json.empty()) {
    guard.output(a.json, "--json", "workload results JSON",
                 [](const std::filesystem::path& p) { return is_json_object_with_keys(p, {"config", "results"}); });
  }
  if (!a.record.empty()) guard.output(a.record, "--record", "session report", is_session_report);
  guard.check();

  ServingConfig config;
  config.backend = a.backend;
  config.model = a.model;
  config.synthetic = a.backend == "accounting" ? (a.shape.empty() ? a.synthetic : a.shape) : a.synthetic;
  if (a.backend == "accounting" && config.synthetic.empty()) config.synthetic = "llama-3.2-1b";
  if (a.backend != "accounting" && a.model.empty() && config.synthetic.empty()) config.synthetic = a.shape;
  config.block_size = a.block_size;
  config.cpu_threads = a.threads;
  config.tensor_parallel = a.tensor_parallel;
  config.weight_seed = a.weight_seed;
  ProgressBar bar;
  ServingEngine engine(config, bar.callback());
  a.w.vocab_size = engine.shape().vocab_size;
  std::string tokenizer_source;
  Workload workload;
  if (from_corpus) {
    // The model's own tokenizer; with a synthetic shape or the accounting model, the default model's.
    const ResolvedModel tok = a.model.empty() ? resolve_model("", bar.callback()) : ResolvedModel{a.model, ""};
    if (!tok.note.empty()) std::fprintf(stderr, "note: %s\n", tok.note.c_str());
    tokenizer_source = tok.path.string();
    const Tokenizer tokenizer = load_tokenizer_only(tok.path);
    corpora::CorpusSource source = corpora::open_corpus_source(a.corpus, corpus_options.trace, a.questions, bar.callback());
    bar.finish();
    workload = corpora::make_corpus_workload(source.store, source.questions, tokenizer, a.w, corpus_options);
    if (workload.options.vocab_size > engine.shape().vocab_size) {
      throw Error("--corpus: the tokenizer of " + tokenizer_source + " has " + std::to_string(workload.options.vocab_size) +
                  " token ids but the model shape's vocabulary has " + std::to_string(engine.shape().vocab_size) +
                  "; use a shape or --model with a vocabulary at least that large");
    }
  } else {
    workload = make_workload(a.w);
  }
  SchedulerOptions so;
  so.step_tokens = a.step_tokens;
  so.max_running = a.max_running;
  so.keep_samples = !a.record.empty();

  const WorkloadOptions& w = from_corpus ? workload.options : a.w;
  if (from_corpus) {
    std::printf("workload: %s, %s; %d passages in the pool (longest %d tokens), %d requests, %s, %d output tokens, "
                "seed %llu; tokenizer %s\n",
                a.backend == "accounting" ? ("accounting model of " + config.synthetic + " on an H200").c_str()
                                          : (engine.backend_name() + " " + (a.model.empty() ? config.synthetic : a.model)).c_str(),
                workload.source.c_str(), w.documents, w.doc_tokens, w.requests,
                w.open_loop() ? ("open loop, Poisson " + std::to_string(w.rate) + " req/s").c_str()
                              : ("closed loop, concurrency " + std::to_string(w.concurrency)).c_str(),
                w.output_tokens, (unsigned long long)w.seed, tokenizer_source.c_str());
  } else {
    std::printf("workload: %s, %s layout (%s), %d documents x %d tokens, %d per request (%s order), %d requests, %s, "
                "%d-token prefix, %d-token queries, %d output tokens, seed %llu\n",
                a.backend == "accounting" ? ("accounting model of " + config.synthetic + " on an H200").c_str()
                                          : (engine.backend_name() + " " + (a.model.empty() ? config.synthetic : a.model)).c_str(),
                to_string(w.layout), w.layout == DocumentLayout::Zipf ? ("alpha " + std::to_string(w.zipf).substr(0, 4)).c_str()
                                                                       : "contiguous cyclic window, alpha unused",
                w.documents, w.doc_tokens, w.docs_per_request, to_string(w.order), w.requests,
                w.open_loop() ? ("open loop, Poisson " + std::to_string(w.rate) + " req/s").c_str()
                              : ("closed loop, concurrency " + std::to_string(w.concurrency)).c_str(),
                w.prefix_tokens, w.query_tokens, w.output_tokens, (unsigned long long)w.seed);
  }
  std::printf("KV: %.2f MiB per %d-token block; every policy on its own pool of the budget; %d tokens per step\n\n",
              engine.bytes_per_block() / 1048576.0, a.block_size, a.step_tokens);
  std::printf("%-10s %-13s %8s %8s %8s %10s %10s %9s %10s %10s %10s %8s %8s %7s %7s\n", "budget", "policy", "tok-hit%",
              "doc-hit%", "pfx-hit%", "TTFT p50", "TTFT p99", "TPOT p50", "out tok/s", "all tok/s", "copied MiB",
              "evicted", "preempt", "peak", "wall s");

  std::vector<ServingResult> results;
  struct Failure {
    int64_t budget;
    std::string policy, error;
  };
  std::vector<Failure> failures;
  const int runs = int(budgets.size() * policies.size());
  int run = 0;
  for (int64_t budget : budgets) {
    for (Policy policy : policies) {
      ProgressObserver progress(bar, run, runs, w.requests,
                                std::string(to_string(policy)) + " at " + budget_text(budget));
      ServingResult r;
      try {
        r = engine.run(workload, budget, policy, so, &progress);
      } catch (const Error& e) {
        // One budget too small for one policy: the row says so, the other rows still run.
        if (runs == 1) throw;
        bar.finish();
        std::printf("%-10s %-13s cannot serve this workload: %s\n", budget_text(budget).c_str(), to_string(policy), e.what());
        failures.push_back({budget, to_string(policy), e.what()});
        ++run;
        continue;
      }
      ++run;
      bar.finish();
      std::printf("%-10s %-13s %7.2f%% %7.2f%% %7.1f%% %8.1fms %8.1fms %7.2fms %10.1f %10.0f %10.1f %8lld %8lld %7d %7.2f\n",
                  budget_text(budget).c_str(), r.policy.c_str(), 100 * r.hit_ratio_tokens, 100 * r.hit_ratio_documents,
                  100 * r.prefix_hit_ratio, r.ttft_ms.p50, r.ttft_ms.p99, r.tpot_ms.p50, r.output_tok_s,
                  r.throughput_tok_s, r.bytes_copied / 1048576.0, (long long)r.evictions, (long long)r.preemptions,
                  r.peak_blocks, r.wall_s);
      std::fflush(stdout);
      results.push_back(std::move(r));
    }
  }
  // Lazy against the others at each budget, from the same run.
  for (int64_t budget : budgets) {
    const ServingResult* lazy = nullptr;
    for (const auto& r : results) {
      if (r.kv_budget_bytes == budget && r.policy == "lazy") lazy = &r;
    }
    if (!lazy) continue;
    for (const auto& r : results) {
      if (r.kv_budget_bytes != budget || r.policy == "lazy") continue;
      std::printf("%s: lazy vs %-12s hit ratio (tokens) %.2fx, TTFT p50 %.2fx lower, output throughput %.2fx\n",
                  budget_text(budget).c_str(), r.policy.c_str(),
                  r.hit_ratio_tokens > 0 ? lazy->hit_ratio_tokens / r.hit_ratio_tokens : INFINITY,
                  lazy->ttft_ms.p50 > 0 ? r.ttft_ms.p50 / lazy->ttft_ms.p50 : 0.0,
                  r.output_tok_s > 0 ? lazy->output_tok_s / r.output_tok_s : 0.0);
    }
  }
  if (a.backend != "accounting") {
    for (const auto& r : results) {
      std::printf("scheduler host time, %s at %s: %.2f %% of the backend's step time\n", r.policy.c_str(),
                  budget_text(r.kv_budget_bytes).c_str(), 100 * r.host_fraction);
    }
  }

  nlohmann::json config_json = {{"backend", a.backend},
                                {"model", a.model.empty() ? config.synthetic : a.model},
                                {"preset", a.preset},
                                {"documents", w.documents},
                                {"doc_tokens", w.doc_tokens},
                                {"docs_per_request", w.docs_per_request},
                                {"zipf", w.zipf},
                                {"layout", to_string(w.layout)},
                                {"doc_order", to_string(w.order)},
                                {"requests", w.requests},
                                {"concurrency", w.open_loop() ? nlohmann::json() : nlohmann::json(w.concurrency)},
                                {"rate", w.open_loop() ? nlohmann::json(w.rate) : nlohmann::json()},
                                {"prefix_tokens", w.prefix_tokens},
                                {"query_tokens", w.query_tokens},
                                {"output_tokens", w.output_tokens},
                                {"seed", w.seed},
                                {"block_size", a.block_size},
                                {"step_tokens", a.step_tokens},
                                {"bytes_per_block", engine.bytes_per_block()}};
  if (from_corpus) {
    config_json["corpus"] = a.corpus;
    config_json["trace"] = a.trace;
    config_json["top_k"] = corpus_options.trace == corpora::TraceKind::Questions ? nlohmann::json(a.top_k) : nlohmann::json();
    config_json["questions"] = a.questions;
    config_json["tokenizer"] = tokenizer_source;
    config_json["source"] = workload.source;
  }
  if (!a.json.empty()) {
    nlohmann::json j;
    j["config"] = config_json;
    j["results"] = nlohmann::json::array();
    for (const auto& r : results) {
      j["results"].push_back({{"policy", r.policy},
                              {"mode", r.mode},
                              {"backend", r.backend},
                              {"kv_budget_bytes", r.kv_budget_bytes == 0 ? nlohmann::json() : nlohmann::json(r.kv_budget_bytes)},
                              {"num_blocks", r.num_blocks},
                              {"requests", r.requests},
                              {"hit_ratio_tokens", r.hit_ratio_tokens},
                              {"hit_ratio_documents", r.hit_ratio_documents},
                              {"prefix_hit_ratio", r.prefix_hit_ratio},
                              {"in_flight_hit_ratio_documents", r.in_flight_hit_ratio_documents},
                              {"ttft_ms", percentiles_json(r.ttft_ms)},
                              {"tpot_ms", percentiles_json(r.tpot_ms)},
                              {"e2e_ms", percentiles_json(r.e2e_ms)},
                              {"throughput_tok_s", r.throughput_tok_s},
                              {"output_tok_s", r.output_tok_s},
                              {"makespan_s", r.makespan_s},
                              {"bytes_copied", r.bytes_copied},
                              {"bytes_stored", r.bytes_stored},
                              {"evictions", r.evictions},
                              {"preemptions", r.preemptions},
                              {"peak_blocks", r.peak_blocks},
                              {"steps", r.steps},
                              {"host_fraction", r.host_fraction},
                              {"wall_s", r.wall_s}});
    }
    for (const Failure& f : failures) {
      j["results"].push_back({{"policy", f.policy},
                              {"kv_budget_bytes", f.budget == 0 ? nlohmann::json() : nlohmann::json(f.budget)},
                              {"error", f.error}});
    }
    write_file_atomically(a.json, j.dump(2) + "\n", "workload results");
  }
  if (!a.record.empty()) {
    std::map<std::string, std::string> meta;
    for (auto it = config_json.begin(); it != config_json.end(); ++it) {
      meta["workload." + it.key()] = it.value().is_string() ? it.value().get<std::string>() : it.value().dump();
    }
    const WorkloadPrompts prompts = workload_prompts(workload);
    save_workload_sqlite(meta, results, a.record, &prompts);
  }
  if (!failures.empty()) {
    throw Error(std::to_string(failures.size()) + " of " + std::to_string(runs) +
                " runs could not serve the workload (their rows say why)");
  }
}

}  // namespace

void add_workload_command(CLI::App& app) {
  auto a = std::make_shared<WorkloadArgs>();
  CLI::App* cmd = app.add_subcommand(
      "workload", "Serve a seeded RAG workload under every cache policy (continuous batching, own pool per policy)");
  cmd->add_option("--backend", a->backend, "cpu, cuda or accounting (the scheduler without tensors, H200 step-time model)")
      ->capture_default_str();
  cmd->add_option("--model", a->model, "Real backends: HF checkpoint directory or .gguf file");
  cmd->add_option("--synthetic", a->synthetic, "Real backends: random weights of this shape instead of --model");
  cmd->add_option("--shape", a->shape,
                  "Model shape (accounting; real backends without --model): tiny, small, smollm2-135m, llama-3.2-1b, "
                  "llama-3.1-8b, llama-3.1-70b");
  cmd->add_option("--preset", a->preset, "paper: Llama-3.2-1B shape, 100 docs x 2048 tokens, 5 per request, alpha 2.1, "
                                         "200 requests, concurrency 16, 1GiB, 16-token queries, 8 output tokens");
  cmd->add_option("--documents", a->w.documents, "Documents in the pool (1-100000)")->capture_default_str()
      ->check(in_range(1, 100000));
  cmd->add_option("--doc-tokens", a->w.doc_tokens, "Tokens per document (1-131072)")->capture_default_str()
      ->check(in_range(1, 131072));
  cmd->add_option("--docs-per-request", a->w.docs_per_request, "Distinct documents per request")->capture_default_str()
      ->check(in_range(1, 64));
  cmd->add_option("--zipf", a->w.zipf, "Zipf exponent alpha of document popularity (zipf layout)")
      ->capture_default_str()
      ->check(in_range(0.0, 10.0));
  cmd->add_option("--requests", a->w.requests, "Requests (1-1000000)")->capture_default_str()
      ->check(in_range(1, 1000000));
  cmd->add_option("--concurrency", a->w.concurrency, "Closed loop: concurrent clients (1-4096)")->capture_default_str()
      ->check(in_range(1, 4096));
  cmd->add_option("--rate", a->w.rate, "Open loop: Poisson arrivals per second (instead of --concurrency)")
      ->check(in_range(0.0, 1e6));
  cmd->add_option("--query-tokens", a->w.query_tokens, "Query tokens per request")->capture_default_str()
      ->check(in_range(1, 131072));
  cmd->add_option("--output-tokens", a->w.output_tokens, "Generated tokens per request")->capture_default_str()
      ->check(in_range(1, 65536));
  cmd->add_option("--prefix-tokens", a->w.prefix_tokens, "Shared prefix tokens (BOS first)")
      ->capture_default_str()
      ->check(in_range(0, 131072));
  cmd->add_option("--kv-budget", a->kv_budget, "KV pool per policy (e.g. 1GiB, or unlimited with accounting)")->capture_default_str();
  cmd->add_option("--sweep-kv-budget", a->sweep, "Comma-separated budgets: a row per budget and policy");
  cmd->add_option("--policies", a->policies, "Comma-separated policies")->capture_default_str();
  cmd->add_option("--layout", a->layout, "zipf (Zipf over the pool) or window (the paper script's contiguous cyclic window)")
      ->capture_default_str();
  cmd->add_option("--doc-order", a->doc_order, "shuffled or retrieved (as drawn)")->capture_default_str();
  cmd->add_option("--seed", a->w.seed, "Workload seed")->capture_default_str();
  cmd->add_option("--corpus", a->corpus,
                  "Documents from a corpus store (or 'sample', the bundled one): its passages, each tokenized "
                  "alone by the model's tokenizer (the default model's with --shape/--synthetic)");
  cmd->add_option("--trace", a->trace,
                  "With --corpus: questions (each question with its BM25 top-k passages in rank order; "
                  "--requests takes the first N) or zipf (the passages drawn as --layout/--zipf say)")
      ->capture_default_str();
  cmd->add_option("--top-k", a->top_k, "With --trace questions: BM25 passages per question (1-64)")->capture_default_str();
  cmd->add_option("--questions", a->questions,
                  "With --trace questions: a JSON Lines question set instead of the corpus's own questions");
  cmd->add_option("--block-size", a->block_size, "Tokens per KV block (1-1024)")->capture_default_str()
      ->check(in_range(1, 1024));
  cmd->add_option("--step-tokens", a->step_tokens, "Tokens per scheduler step (decode + prefill chunks)")->capture_default_str()
      ->check(in_range(1, 1 << 20));
  cmd->add_option("--max-running", a->max_running, "Sequences admitted at once (1-65536)")->capture_default_str()
      ->check(in_range(1, 65536));
  cmd->add_option("--threads", a->threads, "CPU backend threads (0 = all cores)")->capture_default_str()
      ->check(in_range(0, 4096));
  cmd->add_option("--tp", a->tensor_parallel,
                  "With --backend cuda: split the backend over this many GPUs (1..the GPUs on this machine; "
                  "docs/tensor_parallel.md)")
      ->check(tensor_parallel_range());
  cmd->add_option("--weight-seed", a->weight_seed, "Seed of synthetic weights")->capture_default_str();
  cmd->add_option("--json", a->json, "Write the results as JSON to FILE");
  cmd->add_option("--record", a->record, "Save requests, scheduler steps and pool occupancy as a SQLite session report");
  cmd->callback([a, cmd] { run_workload_command(*a, *cmd); });
}

}  // namespace lazyscope::cli

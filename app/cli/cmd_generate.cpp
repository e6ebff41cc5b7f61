// lazyscope-cli generate: run a request under a mode and policy, or compare two policies (each
// on its own KV pool) by the engine's equivalence rule, and write logits dumps (docs/formats.md).
#include <cmath>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <sstream>

#include "app/cli/commands.h"
#include "app/cli/option_checks.h"
#include "app/cli/output_kinds.h"
#include "app/cli/progress_bar.h"
#include "engine/model/model_loader.h"
#include "engine/runtime/default_model.h"
#include "engine/runtime/equivalence.h"
#include "engine/runtime/request_preparation.h"
#include "engine/runtime/session.h"
#include "base/atomic_file.h"
#include "base/error.h"
#include "base/limits.h"
#include "base/output_guard.h"
#include "profiler/session_recorder.h"

namespace lazyscope::cli {
namespace {

struct GenerateArgs {
  std::string model;
  std::string synthetic;
  std::vector<std::string> request_files;
  std::string mode;
  std::string policy;
  std::string compare;
  std::string dump_logits;
  std::string backend = "auto";
  std::string cpu_precision = "fast";
  std::string kv_budget = "256MiB";
  std::string chat = "auto";
  std::string record;
  bool trace_gpu = false;
  std::string trace_kernel_steps = "1";
  int block_size = 16;
  int max_new_tokens = -1;
  int threads = 0;
  int tensor_parallel = 0;
};

void write_dump(const std::string& path, const RunResult& r) {
  nlohmann::json j;
  j["mode"] = r.mode;
  j["policy"] = r.policy;
  j["backend"] = r.backend;
  j["prompt_tokens"] = r.prompt_tokens;
  j["prompt_ids"] = r.prompt_ids;
  j["prompt_last_logits"] = r.prompt_last_logits;
  j["step_logits"] = r.step_logits;
  j["generated_ids"] = r.generated_ids;
  j["generated_text"] = r.generated_text;
  // Generated text may end inside a UTF-8 sequence: replace broken bytes rather than fail.
  const std::string text = j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  write_file_atomically(path, text, "logits dump");
}

// FILE.json, FILE.<policy>.json with two policies, FILE.<n>.<policy>.json with several requests.
std::string dump_path_for(const std::string& base, const std::string& policy, bool several_policies,
                          std::size_t request_index, bool several_requests) {
  std::string tag;
  if (several_requests) tag += "." + std::to_string(request_index + 1);
  if (several_policies) tag += "." + policy;
  if (tag.empty()) return base;
  const auto dot = base.rfind('.');
  if (dot == std::string::npos || base.find('/', dot) != std::string::npos) return base + tag;
  return base.substr(0, dot) + tag + base.substr(dot);
}

// The policy names the dump files will carry, known before anything runs (to check the paths).
std::vector<std::string> dump_policy_names(const GenerateArgs& args) {
  if (args.compare.empty()) return {args.policy.empty() ? (args.mode == "full" ? "none" : "lazy") : to_string(parse_policy(args.policy))};
  std::vector<std::string> names;
  std::stringstream ss(args.compare);
  std::string item;
  while (std::getline(ss, item, ',')) names.push_back(to_string(parse_policy(item)));
  return names;
}

Mode default_mode_for(Policy p) { return p == Policy::Prefix ? Mode::Full : Mode::Block; }

ChatMode parse_chat_mode_option(const std::string& text) {
  try {
    return parse_chat_mode(text);
  } catch (const Error&) {
    throw Error("--chat " + text + ": must be auto, on or off");
  }
}

void print_result(const RunResult& r) {
  std::printf("[%s/%s on %s] %d prompt tokens, %zu generated, TTFT %.1f ms, %.1f ms/token\n", r.mode.c_str(),
              r.policy.c_str(), r.backend.c_str(), r.prompt_tokens, r.generated_ids.size(), r.ttft_ms,
              r.decode_ms_per_token);
  std::printf("  cache: %lld/%lld prompt tokens from cache (%.1f%%), %lld/%lld documents from cache (%.1f%%)",
              (long long)r.stats.cached_tokens, (long long)r.stats.prompt_tokens, 100.0 * r.stats.token_hit_ratio(),
              (long long)r.stats.document_hits, (long long)(r.stats.documents - r.stats.document_repeats),
              100.0 * r.stats.document_hit_ratio());
  if (r.stats.document_repeats > 0) {
    std::printf(", %lld repeated in the request", (long long)r.stats.document_repeats);
  }
  std::printf(", %.2f MiB copied (%lld bytes)\n", r.stats.bytes_copied / 1048576.0, (long long)r.stats.bytes_copied);
  std::printf("  output: %s\n", r.generated_text.c_str());
}

// The engine's equivalence rule: per step max |Δlogit| while the greedy tokens agree; at the
// first flip, a near-tie (both runs had the two tokens within rounding) or a real difference;
// nothing after it. Returns true when the runs are different.
bool print_comparison(const RunResult& a, const RunResult& b) {
  const EquivalenceResult eq = compare_greedy_runs(a.step_logits, a.generated_ids, b.step_logits, b.generated_ids,
                                                   logit_tolerance_for(a.backend, a.cpu_precision));
  std::printf("\nstep  %-14s %-14s  max|dlogit|  argmax\n", a.policy.c_str(), b.policy.c_str());
  for (const StepComparison& s : eq.steps) {
    if (!s.tokens_differ()) {
      std::printf("%4d  %-14d %-14d  %.3e    same\n", s.step, s.token_a, s.token_b, s.max_abs_diff);
    } else {
      std::printf("%4d  %-14d %-14d  %.3e    DIFFERS: each prefers its token by %.3e / %.3e (rounding bound %.3e)\n",
                  s.step, s.token_a, s.token_b, s.max_abs_diff, s.margin_a, s.margin_b, s.tolerance);
    }
  }
  if (eq.uncompared_steps > 0) {
    std::printf("      %d later step(s) not compared: the runs continue from different tokens\n", eq.uncompared_steps);
  }
  const char* verdict = eq.verdict == EquivalenceVerdict::Identical ? "identical"
                        : eq.verdict == EquivalenceVerdict::NearTie ? "equivalent up to a near-tie"
                                                                    : "DIFFERENT";
  std::printf("\n%s: %s\n", verdict, eq.explanation.c_str());
  std::printf("rule: %s%s\n", eq.rule.c_str(),
              a.backend == "cpu" && a.cpu_precision == CpuPrecision::Fast
                  ? " (peak = the step's largest |logit|; --cpu-precision exact checks the strict 1e-4)"
                  : "");
  return eq.verdict == EquivalenceVerdict::Different;
}

void run_generate(const GenerateArgs& args) {
  ProgressBar bar;
  SessionOptions options;
  if (!args.synthetic.empty()) {
    options.synthetic = args.synthetic;
  } else {
    ResolvedModel resolved = resolve_model(args.model, bar.callback());
    if (!resolved.note.empty()) std::fprintf(stderr, "note: %s\n", resolved.note.c_str());
    options.model = resolved.path;
  }
  // Before any work: no output lands on an input, on another output, or on a file of another kind.
  {
    OutputGuard guard;
    guard.input(options.model, "--model");
    for (const std::string& file : args.request_files) guard.input(file, "--request");
    guard.output(args.record, "--record", "session report", is_session_report);
    const std::vector<std::string> names = dump_policy_names(args);
    for (std::size_t r = 0; !args.dump_logits.empty() && r < args.request_files.size(); ++r) {
      for (const std::string& name : names) {
        guard.output(dump_path_for(args.dump_logits, name, names.size() > 1, r, args.request_files.size() > 1),
                     "--dump-logits", "logits dump", is_logits_dump);
      }
    }
    guard.check();
  }
  options.backend = parse_backend_kind(args.backend);
  options.kv_budget_bytes = parse_byte_size(args.kv_budget);
  options.block_size = args.block_size;
  options.cpu_threads = args.threads;
  options.tensor_parallel = args.tensor_parallel;
  options.cpu_precision = parse_cpu_precision(args.cpu_precision);
  options.trace_device = args.trace_gpu;
  if (args.trace_gpu && args.record.empty()) throw Error("--trace-gpu needs --record FILE (the trace is saved in the report)");
  if (args.trace_kernel_steps == "all") {
    options.trace_options.kernel_steps = -1;
  } else {
    const std::string& v = args.trace_kernel_steps;
    if (v.empty() || v.size() > 6 || v.find_first_not_of("0123456789") != std::string::npos) {
      throw Error("--trace-kernel-steps '" + v + "': expected 'all' or a number of decode steps from 0 to 999999");
    }
    options.trace_options.kernel_steps = std::stoi(v);
  }
  std::vector<Request> requests;
  for (const std::string& file : args.request_files) requests.push_back(load_request_file(file));
  std::vector<Policy> policies;
  std::vector<Mode> modes;
  if (!args.compare.empty()) {
    std::stringstream ss(args.compare);
    std::string item;
    while (std::getline(ss, item, ',')) policies.push_back(parse_policy(item));
    if (policies.size() != 2) throw Error("--compare takes two policies, e.g. lazy,materialized");
    for (Policy p : policies) modes.push_back(args.mode.empty() ? default_mode_for(p) : parse_mode(args.mode));
  } else {
    Mode mode = args.mode.empty() ? Mode::Block : parse_mode(args.mode);
    Policy policy = args.policy.empty() ? (mode == Mode::Full ? Policy::None : Policy::Lazy) : parse_policy(args.policy);
    if (args.mode.empty()) mode = default_mode_for(policy);
    policies.push_back(policy);
    modes.push_back(mode);
  }
  for (std::size_t i = 0; i < policies.size(); ++i) check_mode_policy(modes[i], policies[i]);
  if (policies.size() == 2 && policies[0] == policies[1]) {
    throw Error("--compare needs two different policies (each runs on its own KV pool), got " + args.compare);
  }
  const PreparationOptions preparation{parse_chat_mode_option(args.chat)};
  options.policies = policies;

  SessionRecorder recorder;
  Session session(options, args.record.empty() ? nullptr : &recorder, bar.callback());
  bar.finish();
  if (!session.backend_note().empty()) std::fprintf(stderr, "note: %s\n", session.backend_note().c_str());
  if (!session.device_trace_note().empty()) {
    std::fprintf(stderr, "note: no GPU kernel trace: %s\n", session.device_trace_note().c_str());
  }
  std::fprintf(stderr, "model %s on %s (%s)\n", session.config().name.c_str(), session.backend_name().c_str(),
               session.device().c_str());
  // Several requests run in order on the one session: each policy keeps its own pool and history
  // from one request to the next (a warm re-run after a reorder, say).
  const bool several = requests.size() > 1;
  int different = 0;
  for (std::size_t r = 0; r < requests.size(); ++r) {
    if (several) std::printf("%srequest %zu of %zu: %s\n", r ? "\n" : "", r + 1, requests.size(), args.request_files[r].c_str());
    const PreparedRequest prepared = session.prepare(requests[r], preparation);
    std::vector<RunResult> results;
    for (std::size_t i = 0; i < policies.size(); ++i) {
      RunOptions run;
      run.mode = modes[i];
      run.policy = policies[i];
      run.max_new_tokens = args.max_new_tokens;
      // Logits only for a dump or a comparison; otherwise decode greedily on the device.
      run.keep_logits = !args.dump_logits.empty() || policies.size() > 1;
      results.push_back(session.submit(prepared, run));
      print_result(results.back());
      if (!args.dump_logits.empty()) {
        const std::string path =
            dump_path_for(args.dump_logits, results.back().policy, policies.size() > 1, r, several);
        write_dump(path, results.back());
        std::printf("  logits dump: %s\n", path.c_str());
      }
    }
    if (results.size() == 2 && print_comparison(results[0], results[1])) ++different;
  }
  if (!args.record.empty()) {
    recorder.set_metadata("model", session.config().name);
    recorder.set_metadata("backend", session.backend_name());
    recorder.set_metadata("device", session.device());
    recorder.set_metadata("kv_budget_bytes", std::to_string(options.kv_budget_bytes));
    std::string files;
    for (const std::string& file : args.request_files) files += (files.empty() ? "" : ",") + file;
    recorder.set_metadata("request_file", files);
    if (args.trace_gpu) {
      const std::string& why = session.device_trace_note();
      recorder.set_metadata("device_trace", why.empty() ? "cupti" : "off: " + why);
    }
    save_session_sqlite(recorder.snapshot(), args.record);
    std::printf("session report: %s\n", args.record.c_str());
  }
  if (different != 0) throw Error("the two policies are not equivalent (beyond rounding): see the comparison above");
}

}  // namespace

void add_generate_command(CLI::App& app) {
  auto args = std::make_shared<GenerateArgs>();
  CLI::App* cmd = app.add_subcommand("generate", "Run a request file through the engine (request and dump formats: docs/formats.md)");
  cmd->add_option("--model", args->model, "HF checkpoint directory, .gguf file, 'tiny', 'small' or 'default'");
  cmd->add_option("--synthetic", args->synthetic, "Random weights of a shape instead of a model: tiny, small, smollm2-135m, llama-3.2-1b, llama-3.1-8b (requests must use token ids)");
  cmd->add_option("--request", args->request_files,
                  "Request JSON: {prefix?, documents, titles?, order?, query, max_new_tokens?} or the *_ids form; "
                  "give several to run them in order on one session (each policy keeps its own cache)")
      ->required()
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
  cmd->add_option("--mode", args->mode, "Attention semantics: full or block (default: block, full for policy prefix)");
  cmd->add_option("--policy", args->policy, "Cache policy: none, prefix, positional, materialized, lazy (default lazy)");
  cmd->add_option("--compare", args->compare,
                  "Run two policies on the same prompt, each on its own KV pool, and compare logits step by step, "
                  "e.g. lazy,materialized");
  cmd->add_option("--dump-logits", args->dump_logits, "Write the logits dump JSON here (FILE.<policy>.json for each policy with --compare)");
  cmd->add_option("--backend", args->backend, "auto, cpu or cuda")->capture_default_str();
  cmd->add_option("--kv-budget", args->kv_budget,
                  "KV pool size per policy, e.g. 64MiB, 1GiB: every policy runs on its own pool of this size, so "
                  "--compare takes twice the memory")
      ->capture_default_str();
  cmd->add_option("--block-size", args->block_size, "Tokens per KV block")
      ->capture_default_str()
      ->check(in_range(1, limits::kMaxBlockSize));
  cmd->add_option("--max-new-tokens", args->max_new_tokens,
                  "Override the request's max_new_tokens (generation also stops at the model's context)")
      ->check(in_range<int>(0, int(limits::kMaxNewTokens)));
  cmd->add_option("--threads", args->threads, "CPU threads (0 = all cores)")->check(in_range(0, limits::kMaxThreads));
  cmd->add_option("--tp", args->tensor_parallel,
                  "Tensor parallelism: split the CUDA backend over this many GPUs (1..the GPUs on this machine; "
                  "docs/tensor_parallel.md)")
      ->check(tensor_parallel_range());
  cmd->add_option("--cpu-precision", args->cpu_precision,
                  "CPU backend: fast (weights in their file's format, int8/SIMD kernels) or exact (the fp32 reference)")
      ->capture_default_str()
      ->check(CLI::IsMember({"fast", "exact"}));
  cmd->add_option("--chat", args->chat,
                  "Wrap text requests in the model's chat template: auto (when the model has one), on (a plain "
                  "Document/Question wording when it has none), off")
      ->capture_default_str();
  cmd->add_option("--record", args->record, "Save the session (requests, segments, block events, tokens, spans) as a SQLite report");
  cmd->add_flag("--trace-gpu", args->trace_gpu,
                "With --record and the CUDA backend: add every GPU kernel, copy and CUDA API call (CUPTI) to the report "
                "(the engine's NVTX ranges are always on; docs/profiling.md)");
  cmd->add_option("--trace-kernel-steps", args->trace_kernel_steps,
                  "With --trace-gpu: decode steps per request with a record for every kernel (the encodes, copies and "
                  "prefill always have them); later steps get one record per CUDA graph launch, which keeps the trace's "
                  "cost within a few percent. 'all': every kernel of every step")
      ->capture_default_str();
  cmd->callback([args] { run_generate(*args); });
}

}  // namespace lazyscope::cli

// lazyscope-cli overhead: the lazy-overhead probe. Plain vs lazy decode attention at a grid of
// shapes, timed ABBA, as a table and a text plot; --record adds the rows to a session report.
#include <cstdio>
#include <memory>
#include <sstream>

#include "app/cli/commands.h"
#include "app/cli/option_checks.h"
#include "base/error.h"
#include "base/limits.h"
#include "kernels/synthetic_shapes.h"
#include "profiler/overhead_probe.h"
#include "profiler/session_recorder.h"

namespace lazyscope::cli {
namespace {

struct OverheadArgs {
  std::string shapes = "smollm2-135m";
  std::string contexts = "1024,4096,16384";
  std::string batches = "1";
  std::string backend = "auto";
  std::string record;
  int block_size = 16;
  int document_tokens = 512;
  int repeats = 11;
  double timing_ms = 0.0;
  int threads = 0;
};

std::vector<std::string> split(const std::string& list) {
  std::vector<std::string> out;
  std::stringstream ss(list);
  std::string item;
  while (std::getline(ss, item, ',')) {
    if (!item.empty()) out.push_back(item);
  }
  return out;
}

// Every value of the list in lo..hi, checked before anything is measured.
std::vector<int> int_list(const std::string& option, const std::string& list, int lo, int hi) {
  std::vector<int> out;
  for (const std::string& item : split(list)) {
    std::size_t used = 0;
    int value = 0;
    try {
      value = std::stoi(item, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (used != item.size()) throw Error(option + ": '" + item + "' is not a whole number (give a list such as 1024,4096)");
    out.push_back(check_range(option, value, lo, hi));
  }
  if (out.empty()) throw Error(option + ": give at least one value");
  return out;
}

void run_overhead(const OverheadArgs& a) {
  OverheadProbeOptions o;
  o.shapes = split(a.shapes);
  o.contexts = int_list("--contexts", a.contexts, 1, 1 << 20);
  o.batches = int_list("--batches", a.batches, 1, 1024);
  o.block_size = a.block_size;
  o.document_tokens = a.document_tokens;
  o.repeats = a.repeats;
  o.timing_ms = a.timing_ms;
  o.backend = parse_backend_kind(a.backend);
  o.cpu_threads = a.threads;
  SessionRecording existing;
  const bool append = !a.record.empty() && std::filesystem::exists(a.record);
  if (append) existing = load_session_sqlite(a.record);  // refuses a file that is not a report, before measuring
  std::fprintf(stderr, "timing plain and lazy decode attention (ABBA, %d repeats per shape)\n", o.repeats);
  const std::vector<OverheadProbeRow> rows = run_overhead_probe(o, [](const OverheadProbeRow& r) {
    std::fprintf(stderr, "  %s batch %d context %d: %+.2f %%\n", r.shape.c_str(), r.batch, r.context, 100.0 * r.overhead);
  });
  if (!rows.empty() && rows.front().backend == "cpu") {
    std::printf("CPU backend: these are the CPU reference kernels, not GPU kernels.\n");
  }
  std::printf("%s\n%s", overhead_table(rows).c_str(), overhead_plot(rows).c_str());
  if (a.record.empty()) return;
  if (!append) {
    SessionRecorder recorder;
    existing = recorder.snapshot();
    existing.metadata["source"] = "lazyscope-cli overhead";
  }
  existing.overhead.insert(existing.overhead.end(), rows.begin(), rows.end());
  save_session_sqlite(existing, a.record);
  std::printf("%s %s: table overhead_probe (%zu rows)\n", append ? "added to" : "wrote", a.record.c_str(), rows.size());
}

}  // namespace

void add_overhead_command(CLI::App& app) {
  auto a = std::make_shared<OverheadArgs>();
  CLI::App* cmd = app.add_subcommand(
      "overhead", "Lazy-overhead probe: plain vs lazy decode attention at a grid of shapes, timed ABBA (docs/profiling.md)");
  std::string names;
  for (const std::string& n : synthetic_shape_names()) names += (names.empty() ? "" : ", ") + n;
  cmd->add_option("--shapes", a->shapes,
                  "Comma-separated attention shapes: model shape names (" + names + ") or HEADS/KV_HEADS/HEAD_DIM")
      ->capture_default_str();
  cmd->add_option("--contexts", a->contexts, "Comma-separated keys per sequence, each in 1..1048576")->capture_default_str();
  cmd->add_option("--batches", a->batches, "Comma-separated sequences per call (one query each), each in 1..1024")
      ->capture_default_str();
  cmd->add_option("--block-size", a->block_size, "Tokens per KV block")
      ->capture_default_str()
      ->check(in_range(1, limits::kMaxBlockSize));
  cmd->add_option("--document-tokens", a->document_tokens,
                  "Lazy tables change shift every this many keys (one cached document each); 0 = one document")
      ->capture_default_str()
      ->check(in_range(0, 1 << 20));
  cmd->add_option("--repeats", a->repeats, "ABBA repeats per shape")->capture_default_str()->check(in_range(2, 1000));
  cmd->add_option("--timing-ms", a->timing_ms, "Length of one timing (0 = 2 ms on the GPU, 20 ms on the CPU)")
      ->capture_default_str()
      ->check(in_range(0.0, 10000.0));
  cmd->add_option("--backend", a->backend, "auto, cpu or cuda (cpu measures the CPU reference kernels)")
      ->capture_default_str();
  cmd->add_option("--threads", a->threads, "CPU threads (0 = all cores)")->check(in_range(0, limits::kMaxThreads));
  cmd->add_option("--record", a->record,
                  "Add the rows to this session report (table overhead_probe); a new report when the file does not exist");
  cmd->callback([a] { run_overhead(*a); });
}

}  // namespace lazyscope::cli

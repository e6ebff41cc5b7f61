// lazyscope-cli session: read a saved session report (summary) or turn it into a Perfetto trace.
#include <cstdio>

#include "app/cli/commands.h"
#include "app/cli/output_kinds.h"
#include "base/atomic_file.h"
#include "base/error.h"
#include "profiler/session_recorder.h"

namespace lazyscope::cli {
namespace {

void print_summary(const std::string& path) {
  SessionRecording r = load_session_sqlite(path);
  std::printf("%s\n", path.c_str());
  for (const auto& [k, v] : r.metadata) std::printf("  %-16s %s\n", k.c_str(), v.c_str());
  std::printf("\n  %3s %-13s %-6s %7s %6s %9s %9s %9s %11s\n", "id", "policy", "mode", "prompt", "gen", "TTFT ms",
              "tok-hit%", "doc-hit%", "copied MiB");
  for (const RecordedRequest& q : r.requests) {
    const auto& e = q.event;
    std::printf("  %3d %-13s %-6s %7d %6d %9.1f %8.1f%% %8.1f%% %11.2f\n", q.id, e.policy.c_str(), e.mode.c_str(),
                e.prompt_tokens, e.generated_tokens, e.ttft_ms, 100.0 * e.stats.token_hit_ratio(),
                100.0 * e.stats.document_hit_ratio(), e.stats.bytes_copied / 1048576.0);
  }
  std::printf("\n  %zu segment events, %zu block events, %zu tokens, %zu spans\n", r.segments.size(), r.blocks.size(),
              r.tokens.size(), r.spans.size());
  uint64_t dropped = 0;
  for (const RecordedTraceSummary& t : r.traces) dropped += t.dropped_records;
  std::printf("  %zu NVTX ranges, %zu kernels, %zu CUDA graph launches, %zu memcpys, %zu memsets, %zu CUDA API calls, "
              "%llu CUPTI records dropped\n",
              r.ranges.size(), r.kernels.size(), r.graphs.size(), r.memcpys.size(), r.memsets.size(), r.api_calls.size(),
              static_cast<unsigned long long>(dropped));
  for (const RecordedTraceSummary& t : r.traces) {
    if (!t.device_traced) continue;
    if (t.kernel_detail_steps < 0) {
      std::printf("  request %d: every kernel recorded\n", t.request);
    } else {
      const std::string detailed = t.kernel_detail_steps == 0 ? std::string("no decode step")
                                                                : "decode steps 1-" + std::to_string(t.kernel_detail_steps);
      std::printf("  request %d: kernel records for the encodes, the prefill and %s; %d later decode steps as %lld "
                  "graph launches\n",
                  t.request, detailed.c_str(), t.graph_level_steps, static_cast<long long>(t.graphs));
    }
  }
  if (!r.overhead.empty()) std::printf("\n%s", overhead_table(r.overhead).c_str());
}

void write_trace(const std::string& path, const std::string& out) {
  OutputGuard guard;
  guard.input(path, "FILE");
  guard.output(out, "--out", "Chrome trace", is_chrome_trace);
  guard.check();
  const std::string json = chrome_trace_json(load_session_sqlite(path));
  write_file_atomically(out, json, "trace");
  std::printf("wrote %s (open it in Perfetto or chrome://tracing)\n", out.c_str());
}

}  // namespace

void add_session_command(CLI::App& app) {
  CLI::App* cmd = app.add_subcommand("session", "Read saved session reports (SQLite): summary, Perfetto trace");
  cmd->require_subcommand(1);
  auto file = std::make_shared<std::string>();
  auto out = std::make_shared<std::string>("trace.json");
  CLI::App* show = cmd->add_subcommand("show", "Print a session report's metadata and requests");
  show->add_option("FILE", *file, "Session report written by generate --record or the workbench")->required();
  show->callback([file] { print_summary(*file); });
  CLI::App* trace = cmd->add_subcommand("trace", "Write a session's spans and block events as Chrome trace JSON");
  trace->add_option("FILE", *file, "Session report")->required();
  trace->add_option("--out", *out, "Trace JSON to write")->capture_default_str();
  trace->callback([file, out] { write_trace(*file, *out); });
}

}  // namespace lazyscope::cli

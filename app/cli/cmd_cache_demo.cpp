// lazyscope-cli cache-demo: a small view over the serving engine. One seeded RAG workload is
// served under every policy in accounting mode (the real scheduler and cache manager, no
// tensors), each on its own pool; it prints the hit/copy table and each pool's block map while
// the last requests run. `lazyscope-cli workload` is the full command.
#include <cstdio>
#include <string>

#include "app/cli/commands.h"
#include "app/cli/option_checks.h"
#include "base/byte_size.h"
#include "base/error.h"
#include "base/limits.h"
#include "engine/serving/scheduler.h"
#include "engine/serving/serving_engine.h"
#include "engine/serving/step_time_model.h"
#include "kernels/synthetic_shapes.h"

namespace lazyscope::cli {
namespace {

struct DemoArgs {
  std::string shape = "llama-3.1-8b";
  std::string kv_budget = "256MiB";
  int documents = 10;
  int requests = 16;
  int docs_per_request = 3;
  int doc_tokens = 300;
  int concurrency = 2;
  int block_size = 16;
  double zipf = 1.1;
  uint64_t seed = 1;
  int map_width = 64;
};

// '#' prefix, 'A'.. document i at its encoding position, 'a'.. a rotated copy, '?' query, '.' free.
char block_char(const BlockState& b, const std::vector<CachedSegment>& segments) {
  if (b.segment < 0) return '.';
  for (const CachedSegment& s : segments) {
    if (s.id != b.segment) continue;
    if (s.kind == SegmentKind::Prefix) return '#';
    if (s.kind == SegmentKind::Query) return '?';
    if (s.label.rfind("doc ", 0) == 0) {
      const int d = std::atoi(s.label.c_str() + 4);
      return char((s.kind == SegmentKind::Copy || s.shift != 0 ? 'a' : 'A') + d % 26);
    }
    return '*';
  }
  return '!';
}

// Keeps the block map of the latest step that still had requests running.
class MapObserver final : public ServingObserver {
 public:
  MapObserver(const KvCacheManager& cache, int width) : cache_(cache), width_(width) {}
  void on_step(const StepSample& s) override {
    if (s.running == 0) return;
    const auto states = cache_.blocks();
    const auto segments = cache_.segments();
    map.clear();
    for (std::size_t b = 0; b < states.size(); ++b) {
      if (b % width_ == 0) map += "\n    ";
      map += block_char(states[b], segments);
    }
  }
  std::string map;

 private:
  const KvCacheManager& cache_;
  int width_;
};

void run_demo(const DemoArgs& a) {
  const ModelShape shape = synthetic_shape(a.shape);
  const std::size_t bytes_per_block = shape.kv_bytes_per_block(a.block_size, 2);  // bf16 pool
  const std::size_t budget_blocks = parse_byte_size(a.kv_budget) / bytes_per_block;
  if (budget_blocks < 1 || budget_blocks > std::size_t(limits::kMaxPoolBlocks)) {
    throw Error("--kv-budget " + a.kv_budget + " holds " + std::to_string(budget_blocks) + " blocks of " +
                std::to_string(bytes_per_block) + " bytes; the valid range is 1.." +
                std::to_string(limits::kMaxPoolBlocks) + " blocks");
  }
  const int blocks = int(budget_blocks);
  WorkloadOptions o;
  o.documents = a.documents;
  o.doc_tokens = a.doc_tokens;
  o.docs_per_request = a.docs_per_request;
  o.zipf = a.zipf;
  o.requests = a.requests;
  o.concurrency = a.concurrency;
  o.prefix_tokens = 20;
  o.query_tokens = 16;
  o.output_tokens = 8;
  o.seed = a.seed;
  o.vocab_size = shape.vocab_size;
  const Workload w = make_workload(o);
  const StepTimeModel model(shape, 2, StepTimeConstants::h200());
  std::printf("cache-demo: %s-shaped KV (%.2f MiB per %d-token block, bf16), budget %s = %d blocks per policy\n",
              a.shape.c_str(), bytes_per_block / 1048576.0, a.block_size, a.kv_budget.c_str(), blocks);
  std::printf("workload: %d requests from %d clients, %d of %d documents (%d tokens) each, Zipf %.2f, shuffled, "
              "20-token prefix, 16-token query, 8 generated tokens (accounting mode; see `workload` for more)\n\n",
              a.requests, a.concurrency, a.docs_per_request, a.documents, a.doc_tokens, a.zipf);
  std::printf("%-13s %-6s %9s %9s %6s %9s %11s %11s %11s\n", "policy", "mode", "tok-hit%", "doc-hit%", "hits",
              "evicted", "copied MiB", "TTFT p50", "peak blocks");
  std::vector<std::string> maps;
  for (Policy p : all_policies()) {
    KvCacheManager cache(blocks, a.block_size, bytes_per_block, "demo");
    MapObserver observer(cache, a.map_width);
    SchedulerOptions so;
    so.mode = mode_for(p);
    so.policy = p;
    auto exec = make_accounting_executor(model);
    const ServingResult r = run_scheduler(w, cache, *exec, so, &observer);
    int hits = 0;
    for (const RequestRecord& q : r.records) hits += q.document_hits;
    std::printf("%-13s %-6s %8.1f%% %8.1f%% %6d %9lld %11.1f %9.1fms %11d\n", r.policy.c_str(), r.mode.c_str(),
                100 * r.hit_ratio_tokens, 100 * r.hit_ratio_documents, hits, (long long)r.evictions,
                r.bytes_copied / 1048576.0, r.ttft_ms.p50, r.peak_blocks);
    maps.push_back(r.policy + " (while the last requests run):" + observer.map);
  }
  std::printf("\nblock maps: '#' prefix, 'A'.. a document at its encoding position, 'a'.. a rotated copy of it,\n"
              "'?' query + generated tokens, '.' free\n");
  for (const auto& m : maps) std::printf("\n  %s\n", m.c_str());
}

}  // namespace

void add_cache_demo_command(CLI::App& app) {
  auto a = std::make_shared<DemoArgs>();
  CLI::App* cmd = app.add_subcommand(
      "cache-demo", "A small RAG workload under every cache policy: hits, copies and the block map (see workload)");
  cmd->add_option("--shape", a->shape, "Model shape for KV sizes: tiny, small, smollm2-135m, llama-3.2-1b, llama-3.1-8b, llama-3.1-70b")->capture_default_str();
  cmd->add_option("--kv-budget", a->kv_budget, "KV pool size per policy")->capture_default_str();
  cmd->add_option("--documents", a->documents, "Distinct documents in the corpus")
      ->capture_default_str()
      ->check(in_range(1, 20000));
  cmd->add_option("--doc-tokens", a->doc_tokens, "Tokens per document")->capture_default_str()->check(in_range(1, 131072));
  cmd->add_option("--requests", a->requests, "Requests to serve")->capture_default_str()->check(in_range(1, 10000));
  cmd->add_option("--docs-per-request", a->docs_per_request, "Documents retrieved per request")
      ->capture_default_str()
      ->check(in_range(1, 64));
  cmd->add_option("--concurrency", a->concurrency, "Concurrent clients")->capture_default_str()->check(in_range(1, 4096));
  cmd->add_option("--block-size", a->block_size, "Tokens per KV block")
      ->capture_default_str()
      ->check(in_range(1, limits::kMaxBlockSize));
  cmd->add_option("--zipf", a->zipf, "Zipf exponent of document popularity")
      ->capture_default_str()
      ->check(in_range(0.0, 10.0));
  cmd->add_option("--seed", a->seed, "Workload seed")->capture_default_str();
  cmd->add_option("--map-width", a->map_width, "Blocks per block-map line")->capture_default_str()->check(in_range(8, 512));
  cmd->callback([a] { run_demo(*a); });
}

}  // namespace lazyscope::cli

// lazyscope-cli cache-demo: the same shuffled RAG workload under every policy, in accounting
// mode (the real cache manager, no tensors), with a block map of the pool after each policy.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <functional>
#include <random>

#include "app/cli/commands.h"
#include "app/cli/option_checks.h"
#include "engine/kv/cache_manager.h"
#include "engine/runtime/session.h"
#include "kernels/synthetic_shapes.h"
#include "base/error.h"
#include "base/limits.h"

namespace lazyscope::cli {
namespace {

struct DemoArgs {
  std::string shape = "llama-3.1-8b";
  std::string kv_budget = "256MiB";
  int documents = 10;
  int requests = 16;
  int docs_per_request = 3;
  int block_size = 16;
  double zipf = 1.1;
  uint32_t seed = 1;
  int map_width = 64;
};

struct Workload {
  std::vector<std::vector<int32_t>> docs;
  std::vector<std::vector<int>> orders;
};

Workload make_workload(const DemoArgs& a) {
  std::mt19937 rng(a.seed);
  Workload w;
  for (int d = 0; d < a.documents; ++d) {
    std::vector<int32_t> doc(100 + rng() % 300);
    for (auto& t : doc) t = int32_t(1000 + rng() % 30000);
    w.docs.push_back(doc);
  }
  // Zipf popularity: a few passages are retrieved again and again, in varying order.
  std::vector<double> weights(a.documents);
  for (int d = 0; d < a.documents; ++d) weights[d] = 1.0 / std::pow(d + 1.0, a.zipf);
  std::discrete_distribution<int> pick(weights.begin(), weights.end());
  const int wanted = std::min(a.docs_per_request, a.documents);
  for (int r = 0; r < a.requests; ++r) {
    std::vector<int> order;
    int misses = 0;
    while (int(order.size()) < wanted) {
      int d = pick(rng);
      if (std::find(order.begin(), order.end(), d) == order.end()) {
        order.push_back(d);
        misses = 0;
      } else if (++misses == 32) {
        // A steep Zipf leaves the unpicked documents nearly no weight, so drawing again may never
        // end: pick the rest in one pass by weighted sampling without replacement (keys
        // log(u) / w, largest first), linear in the number of documents.
        std::uniform_real_distribution<double> unit(std::nextafter(0.0, 1.0), 1.0);
        std::vector<std::pair<double, int>> keys;
        for (int e = 0; e < a.documents; ++e) {
          if (std::find(order.begin(), order.end(), e) == order.end()) {
            keys.push_back({std::log(unit(rng)) / std::max(weights[e], 1e-300), e});
          }
        }
        const std::size_t rest = std::size_t(wanted) - order.size();
        std::partial_sort(keys.begin(), keys.begin() + long(rest), keys.end(), std::greater<>());
        for (std::size_t i = 0; i < rest; ++i) order.push_back(keys[i].second);
      }
    }
    std::shuffle(order.begin(), order.end(), rng);
    w.orders.push_back(order);
  }
  return w;
}

char block_char(const BlockState& b, const std::vector<CachedSegment>& segments, const Workload& w) {
  if (b.segment < 0) return '.';
  for (const CachedSegment& s : segments) {
    if (s.id != b.segment) continue;
    if (s.kind == SegmentKind::Prefix) return '#';
    if (s.kind == SegmentKind::Query) return '?';
    for (std::size_t d = 0; d < w.docs.size(); ++d) {
      if (w.docs[d] == s.tokens) {
        return char((s.kind == SegmentKind::Copy ? 'a' : 'A') + d % 26);
      }
    }
    return '*';
  }
  return '!';
}

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
  const Workload w = make_workload(a);
  std::printf("cache-demo: %s-shaped KV (%.2f MiB per %d-token block, bf16), budget %s = %d blocks\n", a.shape.c_str(),
              bytes_per_block / 1048576.0, a.block_size, a.kv_budget.c_str(), blocks);
  std::printf("workload: %d requests, %d of %d documents each (Zipf %.2f), shuffled orders, 20-token prefix, "
              "16-token query, 8 generated tokens\n\n",
              a.requests, a.docs_per_request, a.documents, a.zipf);
  std::printf("%-13s %-6s %9s %9s %6s %6s %9s %9s %11s %11s %8s\n", "policy", "mode", "tok-hit%", "doc-hit%", "hits",
              "misses", "allocated", "evicted", "stored MiB", "copied MiB", "refused");
  const std::pair<Mode, Policy> runs[] = {{Mode::Block, Policy::None}, {Mode::Full, Policy::Prefix},
                                          {Mode::Block, Policy::Positional}, {Mode::Block, Policy::Materialized},
                                          {Mode::Block, Policy::Lazy}};
  std::vector<std::string> maps;
  for (auto [mode, policy] : runs) {
    // Every policy on its own pool of the full budget, from empty: no policy sees another's encodes.
    KvCacheManager cache(blocks, a.block_size, bytes_per_block, "demo");
    CacheStats total;
    std::string map;
    int refused = 0;
    for (std::size_t r = 0; r < w.orders.size(); ++r) {
      PromptLayout layout;
      layout.prefix.assign(20, 7);
      for (int d : w.orders[r]) {
        layout.documents.push_back(w.docs[d]);
        layout.document_labels.push_back(std::string(1, char('A' + d % 26)));
      }
      layout.query.assign(16, int32_t(9 + r));
      RequestPlan plan;
      try {
        plan = cache.plan(layout, mode, policy);
        for (int t = 0; t < 8; ++t) cache.next_decode_step(plan, 5);
      } catch (const Error&) {
        cache.finish(plan, false);
        ++refused;  // this policy needs more KV than the budget for this request
        continue;
      }
      if (r + 1 == w.orders.size()) {
        // The pool while the last request runs: what it holds and what it copied.
        const auto states = cache.blocks();
        const auto segments = cache.segments();
        for (std::size_t b = 0; b < states.size(); ++b) {
          if (b % a.map_width == 0) map += "\n    ";
          map += block_char(states[b], segments, w);
        }
      }
      cache.finish(plan, true);
      total += plan.stats;
    }
    std::printf("%-13s %-6s %8.1f%% %8.1f%% %6lld %6lld %9lld %9lld %11.1f %11.1f %8d\n", to_string(policy),
                to_string(mode), 100.0 * total.token_hit_ratio(), 100.0 * total.document_hit_ratio(),
                (long long)total.document_hits, (long long)(total.documents - total.document_hits - total.document_repeats),
                (long long)total.blocks_allocated, (long long)total.blocks_evicted, total.bytes_stored / 1048576.0,
                total.bytes_copied / 1048576.0, refused);
    maps.push_back(std::string(to_string(policy)) + " (during the last request):" + map);
  }
  std::printf("\nblock maps: '#' prefix, 'A'.. a document at its encoding position, 'a'.. a rotated copy of it,\n"
              "'?' query + generated tokens, '.' free\n");
  for (const auto& m : maps) std::printf("\n  %s\n", m.c_str());
}

}  // namespace

void add_cache_demo_command(CLI::App& app) {
  auto a = std::make_shared<DemoArgs>();
  CLI::App* cmd = app.add_subcommand(
      "cache-demo", "Replay one shuffled RAG workload under every cache policy and show hits, copies and the block map");
  cmd->add_option("--shape", a->shape, "Model shape for KV sizes: tiny, small, smollm2-135m, llama-3.2-1b, llama-3.1-8b")->capture_default_str();
  cmd->add_option("--kv-budget", a->kv_budget, "KV pool size")->capture_default_str();
  cmd->add_option("--documents", a->documents, "Distinct documents in the corpus")
      ->capture_default_str()
      ->check(in_range(1, 20000));
  cmd->add_option("--requests", a->requests, "Requests to replay")->capture_default_str()->check(in_range(1, 10000));
  cmd->add_option("--docs-per-request", a->docs_per_request, "Documents retrieved per request")
      ->capture_default_str()
      ->check(in_range(1, 64));
  cmd->add_option("--block-size", a->block_size, "Tokens per KV block")
      ->capture_default_str()
      ->check(in_range(1, limits::kMaxBlockSize));
  cmd->add_option("--zipf", a->zipf, "Zipf exponent of document popularity")
      ->capture_default_str()
      ->check(in_range(0.0, 10.0));
  cmd->add_option("--seed", a->seed, "Workload seed")->capture_default_str();
  cmd->callback([a] { run_demo(*a); });
}

}  // namespace lazyscope::cli

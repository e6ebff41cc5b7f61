// Tensor parallelism on the CUDA backend with synthetic weights: batch-1 decode against the
// weight-bandwidth bound, cached-RAG TTFT lazy vs materialized, and the all-reduce share of a
// decode step. The peer of every TP row is the plain (unsharded) CUDA backend in the same run.
// Runs TP=1 on one GPU (the 8B shape); the 70B shape needs TP=2 (two GPUs), else it is reported
// as not run. Option: --steps N (decode steps per measurement, default 128).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "bench/cuda/scenarios.h"
#include "bench/cuda_bench_util.h"
#include "kernels/cuda/cuda_backend.h"
#include "kernels/cuda/tensor_parallel_backend.h"
#include "kernels/cuda_entry.h"
#include "kernels/synthetic_shapes.h"

using namespace lazyscope;

namespace {

constexpr int kBlock = 16;
using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0.0 : v[v.size() / 2];
}

// A step's spans point into this.
struct StepData {
  std::vector<int32_t> tokens, positions, slots;
  std::vector<BlockRef> table;
  ForwardStep step(bool lazy, bool want_logits) const {
    ForwardStep s;
    s.tokens = tokens;
    s.positions = positions;
    s.slots = slots;
    s.table = table;
    s.lazy_rotation = lazy;
    s.want_logits = want_logits;
    return s;
  }
};

std::vector<int32_t> tokens_of(int n, int vocab, uint32_t seed) {
  std::vector<int32_t> out(n);
  uint32_t x = seed * 2654435761u + 1;
  for (int32_t& t : out) {
    x = x * 1664525u + 1013904223u;
    t = int32_t((x >> 8) % uint32_t(vocab));
  }
  return out;
}

// n tokens at positions start.. into blocks first.. (contiguous), attending to `prefix` first.
StepData prompt_step(const std::vector<int32_t>& tokens, int start, int first_block,
                     std::vector<BlockRef> prefix) {
  StepData d;
  d.tokens = tokens;
  const int n = int(tokens.size());
  for (int i = 0; i < n; ++i) {
    d.positions.push_back(start + i);
    d.slots.push_back(first_block * kBlock + i);
  }
  d.table = std::move(prefix);
  for (int b = 0; b * kBlock < n; ++b)
    d.table.push_back(BlockRef{first_block + b, 0, std::min(kBlock, n - b * kBlock)});
  return d;
}

// Batch-1 greedy decode after a `context`-token prompt in blocks 0..: ms/token on the host clock
// (each step ends with its token on the host), and the tokens chosen.
double decode_ms_per_token(Backend& backend, const ModelShape& shape, int context, int steps,
                           std::vector<int32_t>* chosen,
                           const std::function<void()>& before_timed = {}) {
  StepData d = prompt_step(tokens_of(context, shape.vocab_size, 7), 0, 0, {});
  int32_t token = backend.forward_greedy(d.step(false, false));
  int length = context;
  auto one = [&] {
    if (length % kBlock == 0) d.table.push_back(BlockRef{length / kBlock, 0, 0});
    d.table.back().valid += 1;
    d.tokens.assign(1, token);
    d.positions.assign(1, length);
    d.slots.assign(1, length);
    token = backend.forward_greedy(d.step(false, false));
    ++length;
    if (chosen) chosen->push_back(token);
  };
  for (int i = 0; i < 4; ++i) one();  // warm-up: graphs captured
  backend.synchronize();
  if (before_timed) before_timed();
  const Clock::time_point start = Clock::now();
  for (int i = 0; i < steps; ++i) one();
  return 1000.0 * seconds_since(start) / steps;
}

// Cached RAG: `docs` documents of doc_tokens each encoded at position 0 in their own blocks;
// a query after all of them, the documents at shifts d * doc_tokens. TTFT: host wall from a
// synchronised start to the query's logits on the host.
struct RagResult {
  double lazy_ms = 0, materialized_ms = 0;
};

RagResult rag_ttft(Backend& backend, const ModelShape& shape, int docs, int doc_tokens,
                   int query_tokens, int repeats) {
  const int doc_blocks = doc_tokens / kBlock;
  for (int d = 0; d < docs; ++d) {
    const StepData encode =
        prompt_step(tokens_of(doc_tokens, shape.vocab_size, 100 + d), 0, d * doc_blocks, {});
    backend.forward(encode.step(false, false), nullptr);
  }
  const int copies_at = docs * doc_blocks;  // materialized copies of documents 1..
  const int query_at = copies_at + (docs - 1) * doc_blocks;
  const std::vector<int32_t> query = tokens_of(query_tokens, shape.vocab_size, 99);
  std::vector<BlockRef> lazy_prefix, plain_prefix;
  std::vector<BlockCopy> copies;
  for (int d = 0; d < docs; ++d) {
    for (int b = 0; b < doc_blocks; ++b) {
      lazy_prefix.push_back(BlockRef{d * doc_blocks + b, d * doc_tokens, kBlock});
      if (d == 0) {
        plain_prefix.push_back(BlockRef{b, 0, kBlock});
        continue;
      }
      const int copy = copies_at + (d - 1) * doc_blocks + b;
      copies.push_back(BlockCopy{d * doc_blocks + b, copy, d * doc_tokens, kBlock});
      plain_prefix.push_back(BlockRef{copy, 0, kBlock});
    }
  }
  const StepData lazy = prompt_step(query, docs * doc_tokens, query_at, lazy_prefix);
  const StepData plain = prompt_step(query, docs * doc_tokens, query_at, plain_prefix);
  std::vector<float> logits;
  std::vector<double> lazy_ms, materialized_ms;
  for (int r = 0; r <= repeats; ++r) {  // round 0 warms up
    for (int order = 0; order < 2; ++order) {
      const bool run_lazy = (order == 0) == (r % 2 == 0);
      backend.synchronize();
      const Clock::time_point start = Clock::now();
      if (run_lazy) {
        backend.forward(lazy.step(true, true), &logits);
      } else {
        backend.copy_blocks(
            copies);  // enqueued back to back with the prompt step, as the engine does
        backend.forward(plain.step(false, true), &logits);
      }
      const double ms = 1000.0 * seconds_since(start);
      if (r > 0) (run_lazy ? lazy_ms : materialized_ms).push_back(ms);
    }
  }
  return RagResult{median(lazy_ms), median(materialized_ms)};
}

std::string tp_not_run_reason(int ranks) {
  const int gpus = cuda::device_count();
  if (!cuda::tensor_parallel_compiled()) return "not run: NCCL compiled out";
  if (gpus < ranks)
    return "not run: needs " + std::to_string(ranks) + " GPUs, " + std::to_string(gpus) +
           " visible";
  return {};
}

}  // namespace

int main(int argc, char** argv) {
  int steps = 128;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--steps") == 0 && i + 1 < argc) {
      steps = std::max(8, std::atoi(argv[++i]));
    } else {
      std::fprintf(stderr, "usage: bench_cuda_tp [--steps N]\n");
      return 2;
    }
  }
  try {
    if (cuda::device_count() == 0) {
      std::printf("no CUDA GPU visible: nothing measured\n");
      return 0;
    }
    if (!tp_not_run_reason(1).empty()) {
      std::printf("%s: nothing measured\n", tp_not_run_reason(1).c_str());
      return 0;
    }
    const double copy_gbs = bench::copy_bandwidth_gbs();
    const char* model = "llama-3.1-8b";
    const ModelShape shape = synthetic_shape(model);
    constexpr int kContext = 512, kRounds = 3;
    cuda::CudaBackend plain;
    cuda::TensorParallelBackend tp(1);
    for (Backend* b : std::initializer_list<Backend*>{&plain, &tp}) {
      b->load_synthetic(shape, 1);
      b->allocate_pool(1280, kBlock);
    }
    std::printf(
        "# Tensor parallelism (bench_cuda_tp), %s, synthetic weights; peer: the plain CUDA "
        "backend, same run\n",
        tp.device().c_str());
    std::printf("device-to-device copy bandwidth: %.0f GB/s (read + write)\n", copy_gbs);

    // 1. Batch-1 decode.
    std::vector<double> plain_ms, tp_ms;
    std::vector<int32_t> plain_tokens, tp_tokens;
    for (int r = 0; r < kRounds; ++r) {
      plain_tokens.clear();
      tp_tokens.clear();
      plain_ms.push_back(decode_ms_per_token(plain, shape, kContext, steps, &plain_tokens));
      tp_ms.push_back(decode_ms_per_token(tp, shape, kContext, steps, &tp_tokens));
    }
    const double weights = bench::decode_weight_bytes(shape);
    const double kv = (kContext + steps / 2.0) * bench::kv_bytes_per_token(shape);
    const double bound = copy_gbs * 1e9 / (weights + kv);
    std::printf(
        "\n## Batch-1 greedy decode after a %d-token prompt (%d steps, host clock, median of %d "
        "rounds "
        "alternating plain / TP; graphs on)\n",
        kContext, steps, kRounds);
    std::printf("bound: copy bandwidth / (weight bytes per GPU + mean K/V bytes per GPU)\n\n");
    std::printf(
        "| model | TP | ms/token | tok/s | bound tok/s | %% of bound | vs plain "
        "|\n|---|---:|---:|---:|---:|---:|---:|\n");
    const double p = median(plain_ms), t = median(tp_ms);
    std::printf("| %s | plain | %.3f | %.1f | %.0f | %.0f %% | 1.000 |\n", model, p, 1000.0 / p,
                bound, 100.0 * 1000.0 / p / bound);
    std::printf("| %s | 1 | %.3f | %.1f | %.0f | %.0f %% | %.3f |\n", model, t, 1000.0 / t, bound,
                100.0 * 1000.0 / t / bound, p / t);
    if (!tp_not_run_reason(2).empty()) {
      std::printf("| llama-3.1-70b | 2 | — | — | — | — | %s |\n", tp_not_run_reason(2).c_str());
    } else {
      // 70B: about 141 GB of bf16 weights, more than one GPU holds, so no plain peer.
      const ModelShape big = synthetic_shape("llama-3.1-70b");
      cuda::TensorParallelBackend tp2(2);
      tp2.load_synthetic(big, 1);
      tp2.allocate_pool(64, kBlock);
      const double ms = decode_ms_per_token(tp2, big, kContext, steps, nullptr);
      const double big_bound = copy_gbs * 1e9 /
                               ((bench::decode_weight_bytes(big) +
                                 (kContext + steps / 2.0) * bench::kv_bytes_per_token(big)) /
                                2);
      std::printf(
          "| llama-3.1-70b | 2 | %.3f | %.1f | %.0f | %.0f %% | no peer (does not fit one GPU) |\n",
          ms, 1000.0 / ms, big_bound, 100.0 * 1000.0 / ms / big_bound);
    }
    std::printf("same greedy tokens, plain vs TP=1: %s\n",
                plain_tokens == tp_tokens ? "yes" : "NO");

    // 2. Cached RAG TTFT.
    constexpr int kDocs = 5, kDocTokens = 2048, kQuery = 64, kRepeats = 5;
    const RagResult plain_rag = rag_ttft(plain, shape, kDocs, kDocTokens, kQuery, kRepeats);
    const RagResult tp_rag = rag_ttft(tp, shape, kDocs, kDocTokens, kQuery, kRepeats);
    std::printf(
        "\n## Cached RAG TTFT (%d docs x %d tokens cached, %d-token query), %s; host wall from a "
        "synchronised "
        "start to the logits on the host, median of %d, lazy and materialized alternating\n\n",
        kDocs, kDocTokens, kQuery, model, kRepeats);
    std::printf(
        "| backend | lazy ms | materialized ms | lazy vs materialized |\n|---|---:|---:|---:|\n");
    std::printf("| plain | %.2f | %.2f | %.2fx faster |\n", plain_rag.lazy_ms,
                plain_rag.materialized_ms, plain_rag.materialized_ms / plain_rag.lazy_ms);
    std::printf("| TP=1 | %.2f | %.2f | %.2fx faster |\n", tp_rag.lazy_ms, tp_rag.materialized_ms,
                tp_rag.materialized_ms / tp_rag.lazy_ms);
    std::printf("TP=1 vs plain: lazy %.3f, materialized %.3f (plain ms / TP ms)\n",
                plain_rag.lazy_ms / tp_rag.lazy_ms,
                plain_rag.materialized_ms / tp_rag.materialized_ms);

    // 3. The all-reduce share of a decode step (graphs off; a synchronisation around each one).
    cuda::CudaTuning eager;
    eager.graphs = false;
    tp.on_every_rank([&](int, cuda::CudaBackend& b) { b.set_tuning(eager); });
    const double eager_ms = decode_ms_per_token(tp, shape, kContext, steps, nullptr);
    auto timing = [&](bool on) {
      tp.on_every_rank([&](int, cuda::CudaBackend& b) {
        b.time_collectives = on;
        b.collective_seconds = 0;
      });
    };
    double collective_ms = 0;
    const double synced_ms =
        decode_ms_per_token(tp, shape, kContext, steps, nullptr, [&] { timing(true); });
    collective_ms = 1000.0 * tp.rank(0).collective_seconds / steps;
    timing(false);
    tp.on_every_rank([&](int, cuda::CudaBackend& b) { b.set_tuning(cuda::CudaTuning{}); });
    std::printf(
        "\n## All-reduce share of a decode step, TP=1, %s (graphs off, %d steps; %d all-reduces a "
        "step: "
        "the embedding's and two a layer)\n\n",
        model, steps, 2 * shape.num_layers + 1);
    std::printf("| measure | value |\n|---|---:|\n");
    std::printf("| ms/token, graphs off | %.3f |\n", eager_ms);
    std::printf(
        "| ms/token, graphs off, a synchronisation before and after each all-reduce | %.3f |\n",
        synced_ms);
    std::printf("| all-reduce ms a step (host clock, sync to sync) | %.3f |\n", collective_ms);
    std::printf("| all-reduce share of the synchronised step | %.1f %% |\n",
                100.0 * collective_ms / synced_ms);
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_cuda_tp: %s\n", e.what());
    return 1;
  }
}

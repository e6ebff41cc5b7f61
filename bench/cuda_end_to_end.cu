// End-to-end CUDA backend figures with synthetic weights: batch-1 decode against the weight-
// bandwidth bound, batched decode against the weight + KV bound, prompt processing, and
// cached-RAG TTFT under none / lazy / materialized.
// Options (one at a time): --model NAME (that model's batch-1 decode rows only), --quick (fewer
// TTFT repeats), --sweep (GEMV split sweep), --decode-context N (batch-1 decode of llama-3.1-8b
// after an N-token prompt: greedy and logits paths only), --batched (the batched decode table only),
// --ttft (the cached-RAG TTFT table only, 5 repeats), --prompt-profile [MODEL [TOKENS]] (one prompt
// step's kernels under the CUPTI tracer; default llama-3.1-8b, 2048 tokens).
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <string>
#include <vector>

#include "bench/cuda/scenarios.h"
#include "bench/cuda_bench_util.h"
#include "kernels/cuda/gemv.h"
#include "kernels/cuda/tuning.h"
#include "kernels/cuda_entry.h"
#include "kernels/synthetic_shapes.h"

using namespace lazyscope;

namespace {

// Decode tokens/s by batch size against the bound: a step reads every weight once and each
// sequence's K/V, at the device-to-device copy bandwidth.
void print_batched_decode(double copy_gbs) {
  const std::vector<int> batches{1, 2, 4, 8, 16, 32, 64};
  constexpr int kContext = 1024, kSteps = 32;
  std::printf("\n## Batched greedy decode (forward_batch_greedy; each sequence its own ~%d-token prompt, 896..1152; "
              "%d steps, host clock, each step ends with the batch's tokens on the host; batch 1: the graph path)\n",
              kContext, kSteps);
  std::printf("bound: batch / ((weight bytes + the batch's K/V bytes) / copy bandwidth); ");
  std::printf("lazy: the same steps with lazy attention, each prompt's second half of blocks at a shift (3 shift runs a "
              "sequence), the query rotated once per shift beside the new K/V (the default) or by the attention kernel "
              "(rotating)\n\n");
  std::printf("| model | batch | ms/step | tok/s | vs batch 1 | K/V GB/step | bound tok/s | %% of bound | lazy ms/step | "
              "lazy vs plain | rotating ms/step | rotating vs plain |\n|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n");
  for (const char* model : {"llama-3.2-1b", "llama-3.1-8b"}) {
    const ModelShape shape = synthetic_shape(model);
    const double weights = bench::decode_weight_bytes(shape);
    const std::vector<bench::BatchedDecodeRow> rows = bench::measure_batched_decode(model, kContext, batches, kSteps);
    const double single = rows.empty() ? 0.0 : rows.front().tokens_per_second();
    for (const bench::BatchedDecodeRow& r : rows) {
      const double bound = r.batch * copy_gbs * 1e9 / (weights + r.kv_bytes);
      std::printf("| %s | %d | %.3f | %.1f | %.2fx | %.3f | %.0f | %.0f %% | %.3f | %+.1f %% | %.3f | %+.1f %% |\n",
                  model, r.batch, r.ms_per_step, r.tokens_per_second(), r.tokens_per_second() / single,
                  r.kv_bytes / 1e9, bound, 100.0 * r.tokens_per_second() / bound, r.lazy_ms_per_step,
                  100.0 * (r.lazy_ms_per_step / r.ms_per_step - 1.0), r.lazy_rotating_ms_per_step,
                  100.0 * (r.lazy_rotating_ms_per_step / r.ms_per_step - 1.0));
      std::fflush(stdout);
    }
  }
}

// Batch-1 decode of the 8B shape after a long prompt: the greedy path (device argmax) and the
// logits path (every logit read back), same prompt, same run.
void print_decode_at_context(double copy_gbs, int context) {
  const char* model = "llama-3.1-8b";
  const ModelShape shape = synthetic_shape(model);
  const double bytes = bench::decode_weight_bytes(shape) + context * bench::kv_bytes_per_token(shape);
  const bench::DecodeThroughput t = bench::measure_decode(model, context, 128, false);
  std::printf("\n## Batch-1 decode of %s after a %d-token prompt (128 steps, host clock)\n\n", model, context);
  std::printf("| path | ms/token | tok/s | %% of weight + K/V bound |\n|---|---:|---:|---:|\n");
  const double bound = copy_gbs * 1e9 / bytes;
  std::printf("| greedy (forward_greedy, graphs) | %.3f | %.1f | %.0f %% |\n", t.greedy_graph_ms,
              1000.0 / t.greedy_graph_ms, 100.0 * 1000.0 / t.greedy_graph_ms / bound);
  std::printf("| greedy, no graphs | %.3f | %.1f | %.0f %% |\n", t.greedy_stream_ms, 1000.0 / t.greedy_stream_ms,
              100.0 * 1000.0 / t.greedy_stream_ms / bound);
  std::printf("| logits read back, argmax on the host (graphs) | %.3f | %.1f | %.0f %% |\n", t.logits_ms,
              1000.0 / t.logits_ms, 100.0 * 1000.0 / t.logits_ms / bound);
  std::printf("same tokens on every path: %s; device ms/token (greedy): %.3f\n", t.tokens_match ? "yes" : "NO",
              t.device_ms);
}

// Cached-RAG TTFT of the 8B shape: none, lazy, materialized and an already rotated cache.
void print_rag_ttft(int repeats) {
  std::printf("\n## Cached RAG TTFT (5 docs x 2048 tokens cached, 64-token query), llama-3.1-8b\n");
  std::printf("medians: none %d runs in a phase of its own; lazy / materialized / rotated %d rounds in a rotating "
              "order; wall: synchronised start to logits on the host; GPU: events around the same span; host: "
              "forward() without the logits wait\n\n", repeats, 3 * repeats);
  const bench::RagTtft r = bench::measure_rag_ttft("llama-3.1-8b", 5, 2048, 64, repeats);
  std::printf("| policy | TTFT ms (wall) | GPU ms | vs rotated cache (wall) | vs rotated cache (GPU) | vs none |\n|---|---:|---:|---:|---:|---:|\n");
  std::printf("| none (prefill 10,304 tokens) | %.2f | %.2f | %.2fx | %.2fx | 1.00x |\n", r.none_ms, r.none_gpu_ms,
              r.none_ms / r.rotated_ms, r.none_gpu_ms / r.rotated_gpu_ms);
  std::printf("| rotated cache, plain kernel (ideal) | %.2f | %.2f | 1.00x | 1.00x | %.3fx |\n", r.rotated_ms,
              r.rotated_gpu_ms, r.rotated_ms / r.none_ms);
  std::printf("| lazy | %.2f | %.2f | %+.1f %% | %+.1f %% | %.3fx |\n", r.lazy_ms, r.lazy_gpu_ms,
              100.0 * (r.lazy_ms / r.rotated_ms - 1.0), 100.0 * (r.lazy_gpu_ms / r.rotated_gpu_ms - 1.0),
              r.lazy_ms / r.none_ms);
  std::printf("| materialized (copy %.2f ms GPU, then plain; no host wait between) | %.2f | %.2f | %+.1f %% | %+.1f %% | %.3fx |\n",
              r.copy_gpu_ms, r.materialized_ms, r.materialized_gpu_ms,
              100.0 * (r.materialized_ms / r.rotated_ms - 1.0),
              100.0 * (r.materialized_gpu_ms / r.rotated_gpu_ms - 1.0), r.materialized_ms / r.none_ms);
  std::printf("\nhost time of one 64-token step (forward() returning once queued): lazy %.3f ms, rotated %.3f ms\n",
              r.lazy_host_ms, r.rotated_host_ms);
  std::printf("measured right after a none run (the old order): lazy %.2f ms, rotated %.2f ms (wall)\n",
              r.lazy_after_none_ms, r.rotated_after_none_ms);
}

void print_step_profile(const bench::PromptProfile& p, const std::string& title, double tokens) {
  std::printf("\n## %s\n\n", title.c_str());
  std::printf("| run | wall ms | tok/s | GPU-event ms |\n|---|---:|---:|---:|\n");
  const double walls[3] = {p.untraced_wall_ms, p.traced_wall_ms, p.after_wall_ms};
  const double gpus[3] = {p.untraced_gpu_ms, p.traced_gpu_ms, p.after_gpu_ms};
  const char* runs[3] = {"untraced, before the tracer (median of 3)", "traced", "untraced, after the tracer (median of 3)"};
  for (int r = 0; r < 3; ++r) {
    std::printf("| %s | %.3f | %.0f | %.3f |\n", runs[r], walls[r], tokens / (walls[r] * 1e-3), gpus[r]);
  }
  std::printf("\ntraced step: GPU span (first kernel start to last kernel end) %.1f µs; kernels %d, their sum %.1f "
              "µs; no kernel running %.1f µs of the span; dropped records %llu\n\n",
              p.gpu_span_ms * 1e3, p.kernels, p.kernel_ms * 1e3, p.idle_ms * 1e3,
              static_cast<unsigned long long>(p.dropped));
  std::printf("| kernel | grid | launches | total µs | µs a launch | %% of span |\n|---|---|---:|---:|---:|---:|\n");
  for (const bench::PromptKernelGroup& g : p.groups) {
    std::printf("| %s | %s | %d | %.1f | %.2f | %.1f %% |\n", g.name.c_str(), g.grid.c_str(), g.launches, g.total_us,
                g.total_us / g.launches, 100.0 * g.total_us * 1e-3 / p.gpu_span_ms);
  }
  std::printf("\nthe step's first kernels (µs from its first kernel's start):\n\n| kernel | start | end | length |\n|---|---:|---:|---:|\n");
  for (const bench::PromptKernelSpan& k : p.first) {
    std::printf("| %s | %.2f | %.2f | %.2f |\n", k.name.c_str(), k.start_us, k.end_us, k.end_us - k.start_us);
  }
  std::fflush(stdout);
}

// One prompt step's kernels under the CUPTI tracer (see bench::measure_prompt_profile).
void print_prompt_profile(const std::string& model, int tokens) {
  print_step_profile(bench::measure_prompt_profile(model, tokens),
                     "Prompt step of " + model + ", " + std::to_string(tokens) +
                         " tokens: kernels under the CUPTI tracer (one traced step after a traced warm-up)",
                     tokens);
}

}  // namespace

int main(int argc, char** argv) {
  try {
    if (cuda::device_count() == 0) {
      std::printf("no CUDA GPU visible: nothing to measure\n");
      return 0;
    }
    const double copy_gbs = bench::copy_bandwidth_gbs();
    std::printf("# End to end (synthetic bf16 weights)\n\ndevice-to-device copy: %.0f GB/s (read + write)\n", copy_gbs);
    if (argc > 2 && std::strcmp(argv[1], "--decode-context") == 0) {
      const int context = std::atoi(argv[2]);
      if (context < 16 || context > 120000) {
        std::fprintf(stderr, "bench_cuda_end_to_end: --decode-context %s: expected 16..120000 tokens\n", argv[2]);
        return 2;
      }
      print_decode_at_context(copy_gbs, context);
      return 0;
    }
    // `--prompt-profile [MODEL [TOKENS]]` and `--decode-profile [MODEL [CONTEXT]]`: one step under CUPTI.
    const bool prompt_profile = argc > 1 && std::strcmp(argv[1], "--prompt-profile") == 0;
    if (prompt_profile || (argc > 1 && std::strcmp(argv[1], "--decode-profile") == 0)) {
      const std::string model = argc > 2 ? argv[2] : prompt_profile ? "llama-3.1-8b" : "llama-3.2-1b";
      const int tokens = argc > 3 ? std::atoi(argv[3]) : 2048;
      if (tokens < 16 || tokens > 32768) {
        std::fprintf(stderr, "bench_cuda_end_to_end: %s MODEL %s: %s is not 16..32768 tokens\n", argv[1],
                     prompt_profile ? "TOKENS" : "CONTEXT", argv[3]);
        return 2;
      }
      if (prompt_profile) {
        print_prompt_profile(model, tokens);
        return 0;
      }
      for (bool layer : {false, true}) {
        print_step_profile(bench::measure_decode_profile(model, tokens, layer),
                           "Decode step of " + model + " after " + std::to_string(tokens) + " tokens, " +
                               (layer ? "persistent layer kernel" : "GEMV launches") + ", under the CUPTI tracer",
                           1.0);
      }
      return 0;
    }
    if (argc > 1 && std::strcmp(argv[1], "--layer-kernel") == 0) {
      const double copy = copy_gbs;
      for (const char* model : {"llama-3.2-1b", "llama-3.1-8b"}) {
        const std::vector<bench::LayerKernelRow> rows = bench::measure_layer_kernel(model);
        std::printf("\n## %s: a decode layer's dense part alone (%.1f MB of weights), 64 layers back to back\n\n",
                    model, rows.empty() ? 0.0 : rows[0].weight_mb);
        std::printf("| launches | µs a layer | GB/s | %% of copy |\n|---|---:|---:|---:|\n");
        for (const bench::LayerKernelRow& r : rows) {
          std::printf("| %s | %.1f | %.0f | %.0f %% |\n", r.name.c_str(), r.us, r.gbs, 100.0 * r.gbs / copy);
        }
        std::fflush(stdout);
      }
      return 0;
    }
    if (argc > 1 && std::strcmp(argv[1], "--ttft") == 0) {
      print_rag_ttft(5);
      return 0;
    }
    if (argc > 1 && std::strcmp(argv[1], "--batched") == 0) {
      print_batched_decode(copy_gbs);
      return 0;
    }
    // `--model NAME [TEXT]`: only that model's decode row (a quick check of one shape), and with
    // TEXT only the decode variants whose name contains it.
    const bool one_model = argc > 2 && std::strcmp(argv[1], "--model") == 0;
    const std::string variant_filter = one_model && argc > 3 ? argv[3] : "";
    std::printf("\n## Batch-1 greedy decode (prompt 2048 tokens, 128 steps; host clock, each step ends with its token on the host)\n");
    std::printf("graphs: one CUDA graph per launch signature replays the whole one-token forward; greedy: argmax on the device, "
                "4 bytes read back; logits: all logits read back, argmax on the host (graphs on); device: median "
                "GPU-event time of a greedy graph step (events around each step: upload, kernels, LM head, argmax, "
                "readback; wall minus device = host turnaround between steps).\n\n");
    std::printf("| model | weight GB/token | bound tok/s | tok/s greedy+graphs | %% of bound | ms/token | tok/s greedy, no graphs | ms/token | tok/s logits readback | device ms/token | device %% of bound | graphs captured | same tokens | prefill 2048 tok/s | prefill, mma.sync attention | prefill, persistent attention CTAs | prefill, a CTA a row tile | persistent speed-up |\n");
    std::printf("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|---:|---:|---:|---:|---:|\n");
    const std::vector<std::string> models =
        one_model ? std::vector<std::string>{argv[2]} : std::vector<std::string>{"smollm2-135m", "llama-3.2-1b", "llama-3.1-8b"};
    struct ModelResult {
      std::string model;
      double bound;
      bench::DecodeThroughput t;
    };
    std::vector<ModelResult> results;
    for (const std::string& name : models) {
      const char* model = name.c_str();
      const ModelShape shape = synthetic_shape(model);
      const double bytes = bench::decode_weight_bytes(shape);
      const double bound = copy_gbs * 1e9 / bytes;
      const bench::DecodeThroughput t = bench::measure_decode(model, 2048, 128, true, variant_filter);
      const double graph_tps = 1000.0 / t.greedy_graph_ms, stream_tps = 1000.0 / t.greedy_stream_ms;
      std::printf("| %s | %.2f | %.0f | %.1f | %.0f %% | %.3f | %.1f | %.3f | %.1f | %.3f | %.0f %% | %d | %s | %.0f | %.0f | %.0f | "
                  "%.0f | %.3f× |\n",
                  model, bytes / 1e9, bound, graph_tps, 100.0 * graph_tps / bound, t.greedy_graph_ms, stream_tps,
                  t.greedy_stream_ms, 1000.0 / t.logits_ms, t.device_ms, 100.0 * (1000.0 / t.device_ms) / bound,
                  t.graph_captures, t.tokens_match ? "yes" : "NO", t.prefill_tokens_per_second,
                  t.prefill_mma_sync_tokens_per_second, t.prefill_persistent_tokens_per_second,
                  t.prefill_one_tile_tokens_per_second,
                  t.prefill_persistent_speedup);
      std::fflush(stdout);
      results.push_back({name, bound, t});
    }
    std::printf("\n## Decode variants (tok/s wall, %% of bound, device ms/token; against the default run by the engine's equivalence rule: identical, or the first step whose greedy token flips, a near-tie when both runs' margins are within bf16 rounding, else different)\n| variant |");
    for (const auto& r : results) std::printf(" %s |", r.model.c_str());
    std::printf("\n|---|");
    for (std::size_t i = 0; i < results.size(); ++i) std::printf("---|");
    std::printf("\n| default: graphs, RMSNorm / SwiGLU / kv_write folded into the GEMVs, PDL, attention KV splits <= %d |",
                cuda::CudaTuning{}.decode_splits_cap);
    for (const auto& r : results) {
      std::printf(" %.1f (%.0f %%, %.3f ms) |", 1000.0 / r.t.greedy_graph_ms, 100.0 * 1000.0 / r.t.greedy_graph_ms / r.bound,
                  r.t.device_ms);
    }
    std::printf("\n");
    for (std::size_t v = 0; !results.empty() && v < results[0].t.variants.size(); ++v) {
      std::printf("| %s |", results[0].t.variants[v].name.c_str());
      for (const auto& r : results) {
        const bench::DecodeVariant& d = r.t.variants[v];
        if (d.ms <= 0) {
          std::printf(" failed |");
        } else {
          std::printf(" %.1f (%.0f %%, %.3f ms, ", 1000.0 / d.ms, 100.0 * 1000.0 / d.ms / r.bound, d.device_ms);
          if (d.first_difference < 0) {
            std::printf("%s, max |Δlogit| %.3f) |", d.verdict.c_str(), d.max_logit_delta);
          } else {
            std::printf("step %d flips: %s, max |Δlogit| %.3f before it) |", d.first_difference, d.verdict.c_str(),
                        d.max_logit_delta);
          }
        }
      }
      std::printf("\n");
    }
    std::fflush(stdout);
    if (one_model) return 0;
    print_batched_decode(copy_gbs);
    std::printf("\n## bf16 GEMV at one token (the decode GEMMs), 8B and 1B shapes; GPU events over 50 back-to-back calls; PDL: programmatic dependent launch (the next call's weight loads start while this one drains); pf4: each warp bulk-prefetches its next 4 steps into L2\n| weight | splits | cuBLAS GB/s | gemv_bf16 GB/s | %% of copy | + pf4 GB/s | + PDL GB/s | + PDL + pf4 GB/s | best %% of copy |\n|---|---:|---:|---:|---:|---:|---:|---:|---:|\n");
    const int shapes[9][2] = {{6144, 4096}, {4096, 4096},  {28672, 4096}, {4096, 14336}, {128256, 4096},
                              {3072, 2048}, {2048, 2048},  {16384, 2048}, {2048, 8192}};
    const char* names[9] = {"8B wqkv 6144x4096", "8B wo 4096x4096", "8B w_gate_up 28672x4096", "8B w_down 4096x14336",
                            "8B lm_head 128256x4096", "1B wqkv 3072x2048", "1B wo 2048x2048",
                            "1B w_gate_up 16384x2048", "1B w_down 2048x8192"};
    for (int i = 0; i < 9; ++i) {
      const double cublas = bench::measure_gemv_gbs(shapes[i][0], shapes[i][1], false);
      const double ours = bench::measure_gemv_gbs(shapes[i][0], shapes[i][1], true);
      double variant[3] = {0.0, 0.0, 0.0};
      const bool programmatic[3] = {false, true, true};
      const int prefetch[3] = {4, 0, 4};
      for (int v = 0; v < 3; ++v) {
        try {
          variant[v] = bench::measure_gemv_gbs(shapes[i][0], shapes[i][1], true, 0, 2, programmatic[v], prefetch[v]);
        } catch (const std::exception& e) {
          std::fprintf(stderr, "GEMV variant %d failed: %s\n", v, e.what());
        }
      }
      const double best = std::max({ours, variant[0], variant[1], variant[2]});
      std::printf("| %s | %d | %.0f | %.0f | %.0f %% | %.0f | %.0f | %.0f | %.0f %% |\n", names[i],
                  cuda::gemv_num_splits(shapes[i][0], shapes[i][1]), cublas, ours, 100.0 * ours / copy_gbs, variant[0],
                  variant[1], variant[2], 100.0 * best / copy_gbs);
      std::fflush(stdout);
    }
    // Run 1 and 2 swept split-K (1..16) x rows a warp (2, 4) for these shapes: one split and two rows
    // a warp won or tied everywhere (kernels/cuda/ops.cu, gemv_splits_for); `--sweep` repeats it.
    if (argc > 1 && std::strcmp(argv[1], "--sweep") == 0) {
      std::printf("\n## gemv_bf16 GB/s by column splits (split-K) and rows a warp, plain launches\n| weight | rows/warp | 1 | 2 | 4 | 8 | 16 | default splits |\n|---|---:|---:|---:|---:|---:|---:|---:|\n");
      for (int i : {0, 1, 2, 3, 5, 6, 8}) {
        for (int rows_per_warp : {2, 4}) {
          std::printf("| %s | %d |", names[i], rows_per_warp);
          for (int splits : {1, 2, 4, 8, 16}) {
            std::printf(" %.0f |", bench::measure_gemv_gbs(shapes[i][0], shapes[i][1], true, splits, rows_per_warp));
          }
          std::printf(" %d |\n", cuda::gemv_num_splits(shapes[i][0], shapes[i][1]));
          std::fflush(stdout);
        }
      }
    }
    const bool quick = argc > 1 && std::strcmp(argv[1], "--quick") == 0;
    print_rag_ttft(quick ? 5 : 11);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_cuda_end_to_end: %s\n", e.what());
    return 1;
  }
  return 0;
}

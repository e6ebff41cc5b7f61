// End-to-end CUDA backend figures with synthetic weights: batch-1 decode against the weight-
// bandwidth bound, prompt processing, and cached-RAG TTFT under none / lazy / materialized.
#include <cstdio>
#include <cstring>
#include <exception>
#include <string>
#include <vector>

#include "bench/cuda_bench_util.h"
#include "kernels/cuda/scenarios.h"
#include "kernels/cuda_entry.h"

using namespace lazyscope;

int main(int argc, char** argv) {
  try {
    if (cuda::device_count() == 0) {
      std::printf("no CUDA GPU visible: nothing to measure\n");
      return 0;
    }
    const double copy_gbs = bench::copy_bandwidth_gbs();
    std::printf("# End to end (synthetic bf16 weights)\n\ndevice-to-device copy: %.0f GB/s (read + write)\n", copy_gbs);
    // `--model NAME`: only that model's decode row (a quick check of one shape).
    const bool one_model = argc > 2 && std::strcmp(argv[1], "--model") == 0;
    std::printf("\n## Batch-1 decode (prompt 2048 tokens, 128 greedy steps, logits read back each step)\n");
    std::printf("| model | weight GB/token | bound tok/s | decode tok/s | %% of bound | ms/token | ms/token, no logits readback | prefill 2048 tok/s |\n");
    std::printf("|---|---:|---:|---:|---:|---:|---:|---:|\n");
    const std::vector<std::string> models =
        one_model ? std::vector<std::string>{argv[2]} : std::vector<std::string>{"smollm2-135m", "llama-3.2-1b", "llama-3.1-8b"};
    for (const std::string& name : models) {
      const char* model = name.c_str();
      const ModelShape shape = cuda::synthetic_model_shape(model);
      const double bytes = cuda::decode_weight_bytes(shape);
      const double bound = copy_gbs * 1e9 / bytes;
      const cuda::DecodeThroughput t = cuda::measure_decode(model, 2048, 128);
      std::printf("| %s | %.2f | %.0f | %.1f | %.0f %% | %.2f | %.2f | %.0f |\n", model, bytes / 1e9, bound,
                  t.decode_tokens_per_second, 100.0 * t.decode_tokens_per_second / bound, t.decode_ms_per_token,
                  t.decode_ms_per_token_no_readback, t.prefill_tokens_per_second);
      std::fflush(stdout);
    }
    if (one_model) return 0;
    std::printf("\n## bf16 GEMV at one token (the decode GEMMs), 8B shapes\n| weight | cuBLAS GB/s | gemv_bf16 GB/s | gemv_bf16 %% of copy |\n|---|---:|---:|---:|\n");
    const int shapes[5][2] = {{6144, 4096}, {4096, 4096}, {28672, 4096}, {4096, 14336}, {128256, 4096}};
    const char* names[5] = {"wqkv 6144x4096", "wo 4096x4096", "w_gate_up 28672x4096", "w_down 4096x14336",
                            "lm_head 128256x4096"};
    for (int i = 0; i < 5; ++i) {
      const double cublas = cuda::measure_gemv_gbs(shapes[i][0], shapes[i][1], false);
      const double ours = cuda::measure_gemv_gbs(shapes[i][0], shapes[i][1], true);
      std::printf("| %s | %.0f | %.0f | %.0f %% |\n", names[i], cublas, ours, 100.0 * ours / copy_gbs);
    }
    const bool quick = argc > 1 && std::strcmp(argv[1], "--quick") == 0;
    std::printf("\n## Cached RAG TTFT (5 docs x 2048 tokens cached, 64-token query), llama-3.1-8b\n");
    const cuda::RagTtft r = cuda::measure_rag_ttft("llama-3.1-8b", 5, 2048, 64, quick ? 3 : 7);
    std::printf("| policy | TTFT ms | vs rotated cache | vs none |\n|---|---:|---:|---:|\n");
    std::printf("| none (prefill 10,304 tokens) | %.2f | %.2fx | 1.00x |\n", r.none_ms, r.none_ms / r.rotated_ms);
    std::printf("| rotated cache, plain kernel (ideal) | %.2f | 1.00x | %.3fx |\n", r.rotated_ms, r.rotated_ms / r.none_ms);
    std::printf("| lazy | %.2f | %+.1f %% | %.3fx |\n", r.lazy_ms, 100.0 * (r.lazy_ms / r.rotated_ms - 1.0),
                r.lazy_ms / r.none_ms);
    std::printf("| materialized (copy %.2f ms + plain) | %.2f | %+.1f %% | %.3fx |\n", r.copy_ms, r.materialized_ms,
                100.0 * (r.materialized_ms / r.rotated_ms - 1.0), r.materialized_ms / r.none_ms);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_cuda_end_to_end: %s\n", e.what());
    return 1;
  }
  return 0;
}

#pragma once
// The accounting mode's step-time constants: one NVIDIA H200 running this engine's CUDA backend.
// Each figure says where it was measured; docs/serving.md explains the model they feed.
namespace lazyscope::calibration {

struct H200 {
  // bf16 weights streamed by one forward (GEMV-bound decode). Fitted with layer_overhead_s to the
  // batch-1 greedy decode of bench/cuda/NOTES.md round 5: llama-3.1-8b 4.468 ms/token (15.01 GB
  // of weights), llama-3.2-1b 0.990 ms/token (2.47 GB): 4.05 TB/s and 23.8 µs per layer.
  static constexpr double weight_bytes_per_s = 4.05e12;
  static constexpr double layer_overhead_s = 23.8e-6;
  // Dense bf16 GEMM rate of prefill: llama-3.1-8b prefill of 2,048 tokens at 39,734 tok/s
  // (NOTES round 5) less its attention time.
  static constexpr double gemm_flops_per_s = 6.0e14;
  // Prefill attention: causal 16K plain kernel, 341 TFLOP/s (NOTES round 5 targets table).
  static constexpr double attention_flops_per_s = 3.4e14;
  // Decode attention reads K and V once: batch 16 x 8K at 4,157 GB/s (NOTES round 5).
  static constexpr double kv_read_bytes_per_s = 4.16e12;
  // Materialize (copy + rotate): 4 docs x 2,048 tokens x 32 layers of 8B KV, 1.07 GB written in
  // 0.59 ms of GPU time (NOTES round 5, cached RAG TTFT): bytes written per second.
  static constexpr double copy_bytes_per_s = 1.8e12;
  // Batched decode (2+ sequences) runs separate ops with cuBLAS GEMMs instead of batch 1's graph of
  // fused GEMVs: +0.34 ms (1B, 16 layers) and +0.92 ms (8B, 32 layers) from batch 1 to 2 (NOTES
  // session 3, run 6): ~25 µs per layer.
  static constexpr double batched_layer_overhead_s = 25e-6;
  // Per prefill forward (a document encode or prompt chunk), beyond the roofline above: the real
  // serving runs of 2026-12-01 (bench/serving_device_run.sh: paper preset on llama-3.2-1b and on
  // llama-3.1-8b at 4 GiB) took 0.45-1.5 ms more per prefill forward than this model without it
  // (host launch work of a prefill step, ~2.3 ms for 8B per NOTES round 5, not fully hidden).
  static constexpr double prefill_forward_overhead_s = 0.8e-3;
  // Host work of one scheduler step around the launches (block tables, uploads, readback).
  static constexpr double step_overhead_s = 50e-6;
};

}  // namespace lazyscope::calibration

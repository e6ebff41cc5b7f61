#pragma once
// The CUDA backend's launch choices, given at construction. The defaults are the measured best
// on the H200 (bench/cuda/NOTES.md); benchmarks switch them off one at a time to show what each
// is worth, tests to check that each changes only how a step runs, never what it computes.
namespace lazyscope::cuda {

struct CudaTuning {
  // Replay one-token steps of one sequence from CUDA graphs.
  bool graphs = true;
  // One-token steps fold RMSNorm and SwiGLU into the GEMVs' input staging (3 fewer launches a layer).
  bool fused_decode = true;
  // With fused_decode, the gate_up GEMV forms silu(gate) * up in its epilogue (a warp owns a gate
  // row and its up row), so the down GEMV reads a plain bf16 input; false: the down GEMV forms it
  // while staging its input from the stored gate_up. The same logits, bit for bit (tested). H100,
  // batch 1 after a 2,048-token prompt, against the staging from one binary: 1B +1.0 / +1.4 %,
  // SmolLM2-135M +5.5 %, 8B +2.6 % tok/s; on a second H100 1B +0.7 … +1.9 %, SmolLM2 +4.2 %,
  // 8B +2.4 % (bench/cuda/NOTES.md, session 23).
  bool swiglu_in_gate_up = true;
  // With fused_decode, the wqkv GEMV also rotates and stores K/V (and q) itself, replacing kv_write.
  bool fused_kv_write = true;
  // Programmatic dependent launch of the GEMVs: a GEMV's weight loads start while the kernel
  // before it drains (run 2: +2.6 % tok/s on the 8B decode, same tokens).
  bool programmatic_gemv = true;
  // Each GEMV warp bulk-prefetches into L2 the weight pieces of its next steps (0: off; run 2
  // measured 4 steps 10 % slower on the 8B decode). 0..64.
  int gemv_prefetch_steps = 0;
  // GEMV column splits where the shape decides (GemvContext::split_ctas_per_sm): n > 0 doubles the
  // splits until the grid has n CTAs an SM; 0 splits only matrices of very few rows (0..8). With 1,
  // Llama-3.2-1B's wo and down (128 CTAs of 16 rows for 132 SMs) run as 256 CTAs of half the
  // columns: H100, two rounds, 861.3 / 861.5 against 854.1 / 855.5 tok/s; 2 and 4 were slower
  // (804, 706: wqkv's grid then exceeds one wave); 8B grids are full and do not change. Off by
  // default: a second H100 call gave the 1B +0.2-0.3 % and SmolLM2-135M -23 % (narrow rows, where
  // the partials' reduction dominates).
  int gemv_split_ctas_per_sm = 0;
  // At most this many KV splits in one-token attention (0: decode_num_splits' choice). A cap of
  // 16 was 0.8 % (8B) to 4.5 % (SmolLM2) faster than the uncapped 33 while the split merge read
  // 8 splits a round trip; since it reads 32 at once, 24 is the fastest of 8 / 16 / 24 / 32 /
  // uncapped (H100, batch 1 after a 2,048-token prompt: 1B +1.4 %, SmolLM2 +1.4 %, 8B +0.2 %
  // over 16).
  int decode_splits_cap = 24;
  // Batch 1: the attention kernel, latency-bound there, bulk-prefetches into L2 the first this
  // many MiB of the layer's wo weights and then its w_gate_up, which the next GEMVs read (0: off; 0..48).
  int attention_l2_prefetch_mib = 16;
  // One-token attention copies the keys of every table entry but the last (this step's new token)
  // before it waits for the wqkv kernel, where its grid is one wave (DecodeParams::history_before_wait).
  bool decode_kv_before_wait = true;
  // Lazy one-token steps: the kernel that writes the new token's K/V (the wqkv GEMV, or kv_write)
  // also writes the query rotated once per distinct shift of the sequence, and attention reads the
  // copy of each entry's shift instead of rotating the query itself (DecodeParams::q_rotated).
  bool decode_query_copies = true;
  // Batch 1, with fused_decode and fused_kv_write: everything of a layer after its attention, and
  // the next layer's wqkv, in one persistent kernel (decode_layer.h) that streams the weights
  // through shared memory across its grid barriers (Hopper and newer; elsewhere the GEMVs).
  // Off by default: on the H100 it is still slower than the GEMV launches for Llama-3.2-1B
  // (bench/cuda/NOTES.md, session 12).
  bool decode_layer_kernel = false;
  // Its 32 KB weight stages a CTA (2..8).
  int decode_layer_stages = 4;
  // Its gate_up rows claimed at run time (faster CTAs take more) instead of a fixed share a CTA.
  // Off: on the H100 neither this nor the prefetch below made Llama-3.2-1B faster.
  bool decode_layer_dynamic_gate_up = false;
  // KiB a CTA of the layer kernel prefetches into L2 of the next layer's wo and gate_up once its own
  // weights are in flight (0..1024; the attention kernel's prefetch then stays off past layer 0).
  int decode_layer_l2_prefetch_kib = 0;
  // Prompt steps take the warp-specialised wgmma attention kernel where the GPU and the build have
  // it (compute capability 9.0, sm_90a code; head_dim 64 / 128); false: mma.sync everywhere.
  bool prefill_wgmma = true;
  // The warp-specialised kernel's prompt steps without KV splits run a grid of at most one CTA an
  // SM, each walking several row tiles (PrefillParams::persistent); false: a CTA a row tile.
  // Off by default: its first GPU run hung past a CTA's first row tile (mended, not yet rerun), and
  // nothing has measured it (bench_cuda_attention's "persistent" columns, bench_cuda_end_to_end's
  // prefill columns).
  bool prefill_persistent = false;
};

}  // namespace lazyscope::cuda

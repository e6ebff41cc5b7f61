#pragma once
// One-token GEMMs (GEMV) of the decode step, bf16 weights and input, fp32 accumulation.
// C++17-clean for nvcc.
#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

#include "kernels/cuda/bf16_host.h"

namespace lazyscope::cuda {

// Scratch for split-K GEMV: fp32 partials and per-row-block arrival counters (zeroed once at
// allocation; every call leaves them zero again, so one workspace serves a whole stream).
struct GemvWorkspace {
  float* partial = nullptr;
  std::size_t partial_floats = 0;
  unsigned* counters = nullptr;
  int num_counters = 0;
};
struct GemvWorkspaceSize {
  std::size_t partial_floats = 0;
  int num_counters = 0;
};
// How one owner (a backend, a test, a benchmark) launches its GEMVs: its split-K scratch (empty:
// one pass over the columns) and its launch choices.
struct GemvContext {
  GemvWorkspace workspace;
  // Programmatic dependent launch: a GEMV may start, and put its weight loads in flight, while the
  // kernel before it drains; it waits for that kernel's results before reading its input.
  bool programmatic = true;
  // Each warp also bulk-prefetches into L2 the weight pieces of its next `prefetch_steps` steps
  // (0: off; 0..64). Moves no arithmetic.
  int prefetch_steps = 0;
  // Column splits (split-K) where a call leaves them to the shape: 0 splits only matrices so short
  // that their CTAs number under a quarter of the SMs (gemv_num_splits); n > 0 doubles the splits
  // until the grid has at least n CTAs an SM (gemv_splits_to_fill; at most 16 splits; 1..8). Needs a
  // workspace sized for it (gemv_workspace_size_for_splits), else one pass.
  int split_ctas_per_sm = 0;
};
// Column splits gemv_bf16 uses for this shape on the current device (1: no workspace needed).
int gemv_num_splits(int rows, int cols);
// The splits GemvContext::split_ctas_per_sm = n > 0 chooses: doubled (at most 16) until the grid of
// 16-row blocks has n CTAs for each of `sm_count` SMs, each split keeping at least 8 pieces (64
// columns). Host logic, no device needed.
int gemv_splits_to_fill(int rows, int cols, int sm_count, int ctas_per_sm);
GemvWorkspaceSize gemv_workspace_size(int rows, int cols);
GemvWorkspaceSize gemv_workspace_size_for_splits(int rows, int splits);
// out[rows] (+)= w[rows, cols] @ x[cols]; out is fp32 (accumulate adds to it) or bf16. cols must be
// a multiple of 8. Matrices with very few rows split the columns over more CTAs when the context's
// workspace is big enough (see above); the result is deterministic either way.
void gemv_bf16(const bf16_bits* x, const bf16_bits* w, int rows, int cols, void* out, bool out_fp32, bool accumulate,
               cudaStream_t stream, const GemvContext& context = GemvContext{});
// gemv_bf16 with an explicit split count (1..16) and rows per warp (2, the default, or 4: half the
// pieces per row per step); for benchmarks and tests, same workspace rule.
void gemv_bf16_splits(const bf16_bits* x, const bf16_bits* w, int rows, int cols, void* out, bool out_fp32,
                      bool accumulate, cudaStream_t stream, const GemvContext& context, int splits,
                      int rows_per_warp = 2);
// The same GEMV with the decode step's neighbours folded into its input staging: each CTA builds
// its column range of the bf16 input in shared memory, rounded as rmsnorm / swiglu round it. When
// a range would not fit, they run the separate op into `scratch` [cols] bf16, then gemv_bf16.
// Input = rmsnorm(x [cols] fp32, one row) * norm_weight:
void gemv_rmsnorm_bf16(const float* x, const float* norm_weight, float eps, const bf16_bits* w, int rows, int cols,
                       void* out, bool out_fp32, bool accumulate, cudaStream_t stream, const GemvContext& context,
                       bf16_bits* scratch);
// The gate_up GEMV with SwiGLU folded into its epilogue: input rmsnorm(x) * norm_weight (as
// gemv_rmsnorm_bf16), weights w_gate_up [2 * inter, cols] (gate rows, then up rows); a warp owns
// gate row i and up row inter + i and stores act[i] = silu(gate) * up, both sums rounded to bf16
// first, exactly as gemv_rmsnorm_bf16 then swiglu round them. Returns false (nothing launched)
// where its input range would not fit in shared memory: then use those two.
bool gemv_rmsnorm_gate_up_swiglu(const float* x, const float* norm_weight, float eps, const bf16_bits* w_gate_up,
                                 int inter, int cols, bf16_bits* act, cudaStream_t stream, const GemvContext& context);
// Input = silu(gate) * up from gate_up [2 * cols] = [gate | up], one row:
void gemv_swiglu_bf16(const bf16_bits* gate_up, const bf16_bits* w, int rows, int cols, void* out, bool out_fp32,
                      bool accumulate, cudaStream_t stream, const GemvContext& context, bf16_bits* scratch);
// The decode step's wqkv GEMV with kv_write folded into its epilogue: input rmsnorm(x) * norm_weight
// (as gemv_rmsnorm_bf16), output rows [q | k | v] of head_dim each; q goes to `q` (rotated by
// positions[0] when rotate_q, raw for lazy attention), k rotated and v into the pool slot slots[0],
// with kv_write's arithmetic. Returns false (nothing launched) where it cannot run (head_dim not a
// multiple of 16, or an input range too wide for shared memory): then use the separate ops.
struct QkvRopeOutput {
  bf16_bits* q = nullptr;  // [q_dim] (the qkv row)
  bf16_bits* k_pool = nullptr;
  bf16_bits* v_pool = nullptr;
  const int32_t* positions = nullptr;  // device, [1]
  const int32_t* slots = nullptr;      // device, [1]
  const float* inv_freq = nullptr;     // device, [head_dim / 2]
  int q_dim = 0, kv_dim = 0, head_dim = 0, num_kv_heads = 0, block_size = 0;
  bool rotate_q = true;
  // Lazy (rotate_q false), optional: q rotated by (position − shift) once per shift of the sequence,
  // shifts[shift_offsets[0] .. shift_offsets[1]) (device), copy j at q_rotated + j * q_dim (the
  // layout DecodeParams::q_rotated reads at batch 1); q itself is then not written.
  bf16_bits* q_rotated = nullptr;
  const int32_t* shifts = nullptr;
  const int32_t* shift_offsets = nullptr;
};
bool gemv_rmsnorm_qkv_rope(const float* x, const float* norm_weight, float eps, const bf16_bits* wqkv, int cols,
                           const QkvRopeOutput& output, cudaStream_t stream, const GemvContext& context);

}  // namespace lazyscope::cuda

#pragma once
// CUDA Llama ops besides attention (same op names as kernels/cpu/ops.h). bf16 activations,
// fp32 residual stream; C++17-clean for nvcc.
#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

#include "kernels/cuda/bf16_host.h"

namespace lazyscope::cuda {

// out[n, hidden] (fp32 residual) = table[ids[i]] (bf16 rows).
void embedding(const int32_t* ids, int n, const bf16_bits* table, int hidden, float* out, cudaStream_t stream);
// out (bf16) = x / sqrt(mean(x^2) + eps) * weight, row by row; x fp32, weight fp32.
void rmsnorm(const float* x, const float* weight, int rows, int cols, float eps, bf16_bits* out,
             cudaStream_t stream);
// out[n, inter] = silu(gate) * up, from gate_up[n, 2 * inter] = [gate | up].
void swiglu(const bf16_bits* gate_up, int rows, int inter, bf16_bits* out, cudaStream_t stream);
// Deterministic pseudo-normal values (mean 0, std `scale`) straight into a bf16 tensor.
void fill_random_bf16(bf16_bits* out, int64_t count, uint64_t seed, float scale, cudaStream_t stream);
void fill_float(float* out, int64_t count, float value, cudaStream_t stream);
// fp32 → bf16 on the device (weights upload).
void convert_to_bf16(const float* in, int64_t count, bf16_bits* out, cudaStream_t stream);
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
// Column splits gemv_bf16 uses for this shape on the current device (1: no workspace needed).
int gemv_num_splits(int rows, int cols);
GemvWorkspaceSize gemv_workspace_size(int rows, int cols);
GemvWorkspaceSize gemv_workspace_size_for_splits(int rows, int splits);
// One-token GEMM (GEMV): out[rows] (+)= w[rows, cols] @ x[cols], bf16 weights and input, fp32
// accumulation; out is fp32 (accumulate adds to it) or bf16. cols must be a multiple of 8.
// Matrices with very few rows split the columns over more CTAs when `workspace` is big enough
// (see above); the result is deterministic either way.
void gemv_bf16(const bf16_bits* x, const bf16_bits* w, int rows, int cols, void* out, bool out_fp32, bool accumulate,
               cudaStream_t stream, const GemvWorkspace* workspace = nullptr);
// gemv_bf16 with an explicit split count (1..16) and rows per warp (2, the default, or 4: half the
// pieces per row per step); for benchmarks and tests, same workspace rule.
void gemv_bf16_splits(const bf16_bits* x, const bf16_bits* w, int rows, int cols, void* out, bool out_fp32,
                      bool accumulate, cudaStream_t stream, const GemvWorkspace* workspace, int splits,
                      int rows_per_warp = 2);
// The same GEMV with the decode step's neighbours folded into its input staging: each CTA builds
// its column range of the bf16 input in shared memory, rounded as rmsnorm / swiglu round it. When
// a range would not fit, they run the separate op into `scratch` [cols] bf16, then gemv_bf16.
// Input = rmsnorm(x [cols] fp32, one row) * norm_weight:
void gemv_rmsnorm_bf16(const float* x, const float* norm_weight, float eps, const bf16_bits* w, int rows, int cols,
                       void* out, bool out_fp32, bool accumulate, cudaStream_t stream, const GemvWorkspace* workspace,
                       bf16_bits* scratch);
// Input = silu(gate) * up from gate_up [2 * cols] = [gate | up], one row:
void gemv_swiglu_bf16(const bf16_bits* gate_up, const bf16_bits* w, int rows, int cols, void* out, bool out_fp32,
                      bool accumulate, cudaStream_t stream, const GemvWorkspace* workspace, bf16_bits* scratch);
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
};
bool gemv_rmsnorm_qkv_rope(const float* x, const float* norm_weight, float eps, const bf16_bits* wqkv, int cols,
                           const QkvRopeOutput& output, cudaStream_t stream, const GemvWorkspace* workspace);
// Programmatic dependent launch of every GEMV (process-wide, on by default): a GEMV may start,
// and put its weight loads in flight, while the kernel before it drains; it waits for that
// kernel's results before reading its input. Graphs captured before a change keep the old launches.
void gemv_set_programmatic_launch(bool enabled);
bool gemv_programmatic_launch();
// Experimental, process-wide: each warp also bulk-prefetches into L2 the weight pieces of its next
// `steps` steps (0, the default: off; run 2 measured it 10 % slower on the 8B decode).
void gemv_set_prefetch_steps(int steps);
int gemv_prefetch_steps();
// Index of the largest value (first on ties; NaN never wins), written to *out (device). `scratch`
// is two zeroed 64-bit words of device memory, left zeroed again (one per stream at a time).
void argmax(const float* x, int n, int32_t* out, unsigned long long* scratch, cudaStream_t stream);

}  // namespace lazyscope::cuda

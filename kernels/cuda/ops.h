#pragma once
// CUDA Llama ops besides attention and the GEMVs (same op names as kernels/cpu/ops.h). bf16
// activations, fp32 residual stream; C++17-clean for nvcc. One .cu per op family:
// embedding_argmax.cu, norm_activation.cu, fill.cu; the GEMVs are in gemv.h / gemv.cu.
#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

#include "kernels/cuda/bf16_host.h"

namespace lazyscope::cuda {

// out[n, hidden] (fp32 residual) = table[ids[i]] (bf16 rows).
void embedding(const int32_t* ids, int n, const bf16_bits* table, int hidden, float* out, cudaStream_t stream);
// Tensor-parallel rank's share: table holds vocabulary rows [vocab_begin, vocab_begin + vocab_count);
// a token outside them gives a zero row (the all-reduce over the ranks fills it in).
void embedding_shard(const int32_t* ids, int n, const bf16_bits* table, int vocab_begin, int vocab_count, int hidden,
                     float* out, cudaStream_t stream);
// out (bf16) = x / sqrt(mean(x^2) + eps) * weight, row by row; x fp32, weight fp32.
void rmsnorm(const float* x, const float* weight, int rows, int cols, float eps, bf16_bits* out,
             cudaStream_t stream);
// out[n, inter] = silu(gate) * up, from gate_up[n, 2 * inter] = [gate | up].
void swiglu(const bf16_bits* gate_up, int rows, int inter, bf16_bits* out, cudaStream_t stream);
// Deterministic pseudo-normal values (mean 0, std `scale`) straight into a bf16 tensor.
void fill_random_bf16(bf16_bits* out, int64_t count, uint64_t seed, float scale, cudaStream_t stream);
// The block [row_begin, + rows) x [col_begin, + cols) of the tensor fill_random_bf16 would make with
// `seed` over a [*, full_cols] matrix, into out[rows, cols] (a tensor-parallel rank's slice).
void fill_random_bf16_block(bf16_bits* out, int64_t rows, int64_t cols, int64_t full_cols, int64_t row_begin,
                            int64_t col_begin, uint64_t seed, float scale, cudaStream_t stream);
void fill_float(float* out, int64_t count, float value, cudaStream_t stream);
// fp32 → bf16 on the device (weights upload).
void convert_to_bf16(const float* in, int64_t count, bf16_bits* out, cudaStream_t stream);
// Index of the largest value of each of `rows` rows of n values (x [rows, n]; first on ties; NaN
// never wins), written to out[row] (device). `scratch` is 2 * rows zeroed 64-bit words of device
// memory, left zeroed again (one per stream at a time).
void argmax_rows(const float* x, int rows, int n, int32_t* out, unsigned long long* scratch, cudaStream_t stream);
// argmax_rows of one row.
inline void argmax(const float* x, int n, int32_t* out, unsigned long long* scratch, cudaStream_t stream) {
  argmax_rows(x, 1, n, out, scratch, stream);
}

}  // namespace lazyscope::cuda

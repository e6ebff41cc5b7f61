#pragma once
// CPU reference kernels for the Llama ops, fp32. Same op names as kernels/cuda.
#include <cstdint>

namespace lazyscope::cpu {

// out[n, hidden] = table[ids[i]]
void embedding(const int32_t* ids, int n, const float* table, int hidden, float* out);
// out = x / sqrt(mean(x^2) + eps) * weight, row by row (HF LlamaRMSNorm order of operations).
void rmsnorm(const float* x, const float* weight, int rows, int cols, float eps, float* out);
// out[m, n] = a[m, k] @ w[n, k]^T (HF Linear layout), through BLAS.
void matmul_wt(const float* a, const float* w, int m, int n, int k, float* out);
// out = silu(gate) * up
void swiglu(const float* gate, const float* up, int64_t count, float* out);
// x += y
void add_inplace(float* x, const float* y, int64_t count);
int32_t argmax(const float* x, int n);
void set_num_threads(int threads);

}  // namespace lazyscope::cpu

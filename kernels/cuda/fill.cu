// Tensor initialisation on the GPU: deterministic random bf16 weights, constant fills, fp32 -> bf16.
#include <cuda_bf16.h>

#include "kernels/cuda/check.h"
#include "kernels/cuda/ops.h"

namespace lazyscope::cuda {
namespace {

__device__ uint64_t mix64(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

// Element `index` of the tensor made with `seed`: a function of the two alone.
__device__ __nv_bfloat16 random_value(uint64_t seed, int64_t index, float scale) {
  const uint64_t bits = mix64(seed * 0x9e3779b97f4a7c15ull + uint64_t(index));
  // Box-Muller from two 24-bit uniforms.
  const float u1 = (float((bits >> 40) & 0xffffff) + 1.0f) * (1.0f / 16777217.0f);
  const float u2 = float((bits >> 8) & 0xffffff) * (1.0f / 16777216.0f);
  const float normal = sqrtf(-2.0f * logf(u1)) * cospif(2.0f * u2);
  return __float2bfloat16(normal * scale);
}

__global__ void fill_random_kernel(__nv_bfloat16* out, int64_t count, uint64_t seed, float scale) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < count; i += int64_t(gridDim.x) * blockDim.x) {
    out[i] = random_value(seed, i, scale);
  }
}

__global__ void fill_random_block_kernel(__nv_bfloat16* out, int64_t rows, int64_t cols, int64_t full_cols,
                                         int64_t row_begin, int64_t col_begin, uint64_t seed, float scale) {
  const int64_t count = rows * cols;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < count; i += int64_t(gridDim.x) * blockDim.x) {
    const int64_t row = i / cols, col = i % cols;
    out[i] = random_value(seed, (row_begin + row) * full_cols + col_begin + col, scale);
  }
}

__global__ void fill_float_kernel(float* out, int64_t count, float value) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < count; i += int64_t(gridDim.x) * blockDim.x) {
    out[i] = value;
  }
}

__global__ void convert_kernel(const float* in, int64_t count, __nv_bfloat16* out) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < count; i += int64_t(gridDim.x) * blockDim.x) {
    out[i] = __float2bfloat16(in[i]);
  }
}

int grid_for(int64_t count) {
  const int64_t blocks = (count + 255) / 256;
  return int(blocks < 8192 ? (blocks > 0 ? blocks : 1) : 8192);
}

}  // namespace

void fill_random_bf16(bf16_bits* out, int64_t count, uint64_t seed, float scale, cudaStream_t stream) {
  fill_random_kernel<<<grid_for(count), 256, 0, stream>>>(reinterpret_cast<__nv_bfloat16*>(out), count, seed, scale);
  LAZYSCOPE_CUDA_LAUNCH_CHECK();
}

void fill_random_bf16_block(bf16_bits* out, int64_t rows, int64_t cols, int64_t full_cols, int64_t row_begin,
                            int64_t col_begin, uint64_t seed, float scale, cudaStream_t stream) {
  fill_random_block_kernel<<<grid_for(rows * cols), 256, 0, stream>>>(reinterpret_cast<__nv_bfloat16*>(out), rows,
                                                                      cols, full_cols, row_begin, col_begin, seed,
                                                                      scale);
  LAZYSCOPE_CUDA_LAUNCH_CHECK();
}

void fill_float(float* out, int64_t count, float value, cudaStream_t stream) {
  fill_float_kernel<<<grid_for(count), 256, 0, stream>>>(out, count, value);
  LAZYSCOPE_CUDA_LAUNCH_CHECK();
}

void convert_to_bf16(const float* in, int64_t count, bf16_bits* out, cudaStream_t stream) {
  convert_kernel<<<grid_for(count), 256, 0, stream>>>(in, count, reinterpret_cast<__nv_bfloat16*>(out));
  LAZYSCOPE_CUDA_LAUNCH_CHECK();
}

}  // namespace lazyscope::cuda

// Embedding, RMSNorm, SwiGLU, random init and small utilities on the GPU.
#include <cuda_bf16.h>

#include <string>

#include "kernels/cuda/check.h"
#include "kernels/error.h"
#include "kernels/cuda/ops.h"

namespace lazyscope::cuda {
namespace {

__global__ void embedding_kernel(const int32_t* ids, const __nv_bfloat16* table, int hidden, float* out) {
  const int64_t row = blockIdx.x;
  const __nv_bfloat16* src = table + int64_t(ids[row]) * hidden;
  for (int i = threadIdx.x; i < hidden; i += blockDim.x) out[row * hidden + i] = __bfloat162float(src[i]);
}

__device__ float block_sum(float value, float* scratch) {
  for (int offset = 16; offset > 0; offset /= 2) value += __shfl_xor_sync(0xffffffffu, value, offset);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  if (lane == 0) scratch[warp] = value;
  __syncthreads();
  float total = 0.0f;
  for (int w = 0; w < int(blockDim.x / 32); ++w) total += scratch[w];
  return total;
}

__global__ void rmsnorm_kernel(const float* x, const float* weight, int cols, float eps, __nv_bfloat16* out) {
  __shared__ float scratch[32];
  const int64_t row = blockIdx.x;
  const float* in = x + row * cols;
  float sum = 0.0f;
  for (int i = threadIdx.x; i < cols; i += blockDim.x) sum += in[i] * in[i];
  const float total = block_sum(sum, scratch);
  const float inv = rsqrtf(total / float(cols) + eps);
  for (int i = threadIdx.x; i < cols; i += blockDim.x) out[row * cols + i] = __float2bfloat16(in[i] * inv * weight[i]);
}

__global__ void swiglu_kernel(const __nv_bfloat16* gate_up, int inter, __nv_bfloat16* out) {
  const int64_t row = blockIdx.y;
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= inter) return;
  const float gate = __bfloat162float(gate_up[row * 2 * inter + i]);
  const float up = __bfloat162float(gate_up[row * 2 * inter + inter + i]);
  out[row * inter + i] = __float2bfloat16(gate / (1.0f + expf(-gate)) * up);
}

__device__ uint64_t mix64(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

__global__ void fill_random_kernel(__nv_bfloat16* out, int64_t count, uint64_t seed, float scale) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < count; i += int64_t(gridDim.x) * blockDim.x) {
    const uint64_t bits = mix64(seed * 0x9e3779b97f4a7c15ull + uint64_t(i));
    // Box-Muller from two 24-bit uniforms.
    const float u1 = (float((bits >> 40) & 0xffffff) + 1.0f) * (1.0f / 16777217.0f);
    const float u2 = float((bits >> 8) & 0xffffff) * (1.0f / 16777216.0f);
    const float normal = sqrtf(-2.0f * logf(u1)) * cospif(2.0f * u2);
    out[i] = __float2bfloat16(normal * scale);
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

__global__ void argmax_kernel(const float* x, int n, int32_t* out) {
  __shared__ float best_value[32];
  __shared__ int best_index[32];
  float value = -INFINITY;
  int index = 0x7fffffff;
  for (int i = threadIdx.x; i < n; i += blockDim.x) {
    if (x[i] > value) {
      value = x[i];
      index = i;
    }
  }
  for (int offset = 16; offset > 0; offset /= 2) {
    const float other = __shfl_xor_sync(0xffffffffu, value, offset);
    const int other_index = __shfl_xor_sync(0xffffffffu, index, offset);
    if (other > value || (other == value && other_index < index)) {
      value = other;
      index = other_index;
    }
  }
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  if (lane == 0) {
    best_value[warp] = value;
    best_index[warp] = index;
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    for (int w = 1; w < int(blockDim.x / 32); ++w) {
      if (best_value[w] > value || (best_value[w] == value && best_index[w] < index)) {
        value = best_value[w];
        index = best_index[w];
      }
    }
    *out = index;
  }
}

// Each warp owns kGemvRows rows; lanes stream 16-byte pieces of the rows (four in flight) and of x.
constexpr int kGemvRows = 2, kGemvWarps = 8;

__global__ void __launch_bounds__(kGemvWarps * 32) gemv_kernel(const __nv_bfloat16* x, const __nv_bfloat16* w,
                                                                int rows, int cols, void* out, bool out_fp32,
                                                                bool accumulate) {
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int row0 = (blockIdx.x * kGemvWarps + warp) * kGemvRows;
  if (row0 >= rows) return;
  float sum[kGemvRows] = {};
  const uint4* x_vec = reinterpret_cast<const uint4*>(x);
  const int pieces = cols / 8;
  int piece = lane;
  for (; piece + 96 < pieces; piece += 128) {
    uint4 xv[4], wv[kGemvRows][4];
#pragma unroll
    for (int u = 0; u < 4; ++u) {
      xv[u] = __ldg(x_vec + piece + 32 * u);
#pragma unroll
      for (int r = 0; r < kGemvRows; ++r) {
        const int row = min(row0 + r, rows - 1);
        wv[r][u] = __ldcs(reinterpret_cast<const uint4*>(w + int64_t(row) * cols) + piece + 32 * u);
      }
    }
#pragma unroll
    for (int u = 0; u < 4; ++u) {
      const __nv_bfloat162* xp = reinterpret_cast<const __nv_bfloat162*>(&xv[u]);
#pragma unroll
      for (int r = 0; r < kGemvRows; ++r) {
        const __nv_bfloat162* wp = reinterpret_cast<const __nv_bfloat162*>(&wv[r][u]);
#pragma unroll
        for (int j = 0; j < 4; ++j) {
          const float2 a = __bfloat1622float2(xp[j]), b = __bfloat1622float2(wp[j]);
          sum[r] = fmaf(a.x, b.x, fmaf(a.y, b.y, sum[r]));
        }
      }
    }
  }
  for (; piece < pieces; piece += 32) {
    const uint4 xv = __ldg(x_vec + piece);
    const __nv_bfloat162* xp = reinterpret_cast<const __nv_bfloat162*>(&xv);
#pragma unroll
    for (int r = 0; r < kGemvRows; ++r) {
      const int row = min(row0 + r, rows - 1);
      const uint4 wv = __ldcs(reinterpret_cast<const uint4*>(w + int64_t(row) * cols) + piece);
      const __nv_bfloat162* wp = reinterpret_cast<const __nv_bfloat162*>(&wv);
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        const float2 a = __bfloat1622float2(xp[j]), b = __bfloat1622float2(wp[j]);
        sum[r] = fmaf(a.x, b.x, fmaf(a.y, b.y, sum[r]));
      }
    }
  }
#pragma unroll
  for (int r = 0; r < kGemvRows; ++r) {
    for (int offset = 16; offset > 0; offset /= 2) sum[r] += __shfl_xor_sync(0xffffffffu, sum[r], offset);
  }
  if (lane == 0) {
#pragma unroll
    for (int r = 0; r < kGemvRows; ++r) {
      const int row = row0 + r;
      if (row >= rows) break;
      if (out_fp32) {
        float* o = static_cast<float*>(out);
        o[row] = accumulate ? o[row] + sum[r] : sum[r];
      } else {
        __nv_bfloat16* o = static_cast<__nv_bfloat16*>(out);
        o[row] = __float2bfloat16(accumulate ? __bfloat162float(o[row]) + sum[r] : sum[r]);
      }
    }
  }
}

int grid_for(int64_t count) {
  const int64_t blocks = (count + 255) / 256;
  return int(blocks < 8192 ? (blocks > 0 ? blocks : 1) : 8192);
}

}  // namespace

void embedding(const int32_t* ids, int n, const bf16_bits* table, int hidden, float* out, cudaStream_t stream) {
  embedding_kernel<<<n, 256, 0, stream>>>(ids, reinterpret_cast<const __nv_bfloat16*>(table), hidden, out);
  LAZYSCOPE_CUDA_LAUNCH_CHECK();
}

void rmsnorm(const float* x, const float* weight, int rows, int cols, float eps, bf16_bits* out, cudaStream_t stream) {
  rmsnorm_kernel<<<rows, 512, 0, stream>>>(x, weight, cols, eps, reinterpret_cast<__nv_bfloat16*>(out));
  LAZYSCOPE_CUDA_LAUNCH_CHECK();
}

void swiglu(const bf16_bits* gate_up, int rows, int inter, bf16_bits* out, cudaStream_t stream) {
  swiglu_kernel<<<dim3((inter + 255) / 256, rows), 256, 0, stream>>>(
      reinterpret_cast<const __nv_bfloat16*>(gate_up), inter, reinterpret_cast<__nv_bfloat16*>(out));
  LAZYSCOPE_CUDA_LAUNCH_CHECK();
}

void fill_random_bf16(bf16_bits* out, int64_t count, uint64_t seed, float scale, cudaStream_t stream) {
  fill_random_kernel<<<grid_for(count), 256, 0, stream>>>(reinterpret_cast<__nv_bfloat16*>(out), count, seed, scale);
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

void gemv_bf16(const bf16_bits* x, const bf16_bits* w, int rows, int cols, void* out, bool out_fp32, bool accumulate,
               cudaStream_t stream) {
  if (cols % 8 != 0) throw Error("cuda gemv: cols " + std::to_string(cols) + " is not a multiple of 8");
  const int rows_per_block = kGemvRows * kGemvWarps;
  gemv_kernel<<<(rows + rows_per_block - 1) / rows_per_block, kGemvWarps * 32, 0, stream>>>(
      reinterpret_cast<const __nv_bfloat16*>(x), reinterpret_cast<const __nv_bfloat16*>(w), rows, cols, out, out_fp32,
      accumulate);
  LAZYSCOPE_CUDA_LAUNCH_CHECK();
}

void argmax(const float* x, int n, int32_t* out, cudaStream_t stream) {
  argmax_kernel<<<1, 1024, 0, stream>>>(x, n, out);
  LAZYSCOPE_CUDA_LAUNCH_CHECK();
}

}  // namespace lazyscope::cuda

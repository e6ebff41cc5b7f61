// RMSNorm and SwiGLU on the GPU (the separate launches; decode folds them into its GEMVs).
#include <cuda_bf16.h>

#include <cstdint>

#include "kernels/cuda/check.h"
#include "kernels/cuda/device_util.cuh"
#include "kernels/cuda/ops.h"

namespace lazyscope::cuda {
namespace {

__device__ float block_sum(float value, float* scratch) {
  for (int offset = 16; offset > 0; offset /= 2) value += __shfl_xor_sync(0xffffffffu, value, offset);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  if (lane == 0) scratch[warp] = value;
  __syncthreads();
  float total = 0.0f;
  for (int w = 0; w < int(blockDim.x / 32); ++w) total += scratch[w];
  return total;
}

// One row a CTA. Rows of a multiple of 4 columns move as float4 (x, the weights) and 4 bf16 (the
// output): a prompt's norms are bandwidth-bound and 4-byte loads left most of it unused.
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

__global__ void rmsnorm_vec4_kernel(const float* x, const float* weight, int cols, float eps, __nv_bfloat16* out) {
  __shared__ float scratch[32];
  const int64_t row = blockIdx.x;
  const int quads = cols / 4;
  const float4* in = reinterpret_cast<const float4*>(x + row * cols);
  const float4* g = reinterpret_cast<const float4*>(weight);
  float sum = 0.0f;
#pragma unroll 4
  for (int i = threadIdx.x; i < quads; i += blockDim.x) {
    const float4 v = in[i];
    sum += v.x * v.x + v.y * v.y + v.z * v.z + v.w * v.w;
  }
  const float total = block_sum(sum, scratch);
  const float inv = rsqrtf(total / float(cols) + eps);
  uint2* dst = reinterpret_cast<uint2*>(out + row * cols);
#pragma unroll 4
  for (int i = threadIdx.x; i < quads; i += blockDim.x) {
    const float4 v = in[i], w = g[i];
    const __nv_bfloat162 lo = __floats2bfloat162_rn(v.x * inv * w.x, v.y * inv * w.y);
    const __nv_bfloat162 hi = __floats2bfloat162_rn(v.z * inv * w.z, v.w * inv * w.w);
    uint2 packed;
    packed.x = *reinterpret_cast<const uint32_t*>(&lo);
    packed.y = *reinterpret_cast<const uint32_t*>(&hi);
    dst[i] = packed;
  }
}

__global__ void swiglu_kernel(const __nv_bfloat16* gate_up, int inter, __nv_bfloat16* out) {
  const int64_t row = blockIdx.y;
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= inter) return;
  const float gate = __bfloat162float(gate_up[row * 2 * inter + i]);
  const float up = __bfloat162float(gate_up[row * 2 * inter + inter + i]);
  out[row * inter + i] = __float2bfloat16(detail::silu_times(gate, up));
}

// The same arithmetic, 8 columns a thread through 16-byte loads and stores (inter % 8 == 0).
__global__ void swiglu_vec8_kernel(const __nv_bfloat16* gate_up, int inter, __nv_bfloat16* out) {
  const int64_t row = blockIdx.y;
  const int octet = blockIdx.x * blockDim.x + threadIdx.x;
  if (octet >= inter / 8) return;
  const uint4 g = reinterpret_cast<const uint4*>(gate_up + row * 2 * inter)[octet];
  const uint4 u = reinterpret_cast<const uint4*>(gate_up + row * 2 * inter + inter)[octet];
  const __nv_bfloat162* gp = reinterpret_cast<const __nv_bfloat162*>(&g);
  const __nv_bfloat162* up = reinterpret_cast<const __nv_bfloat162*>(&u);
  uint4 result;
  __nv_bfloat162* rp = reinterpret_cast<__nv_bfloat162*>(&result);
#pragma unroll
  for (int j = 0; j < 4; ++j) {
    const float2 a = __bfloat1622float2(gp[j]), b = __bfloat1622float2(up[j]);
    rp[j] = __floats2bfloat162_rn(detail::silu_times(a.x, b.x), detail::silu_times(a.y, b.y));
  }
  reinterpret_cast<uint4*>(out + row * inter)[octet] = result;
}

bool aligned16(const void* p) { return reinterpret_cast<std::uintptr_t>(p) % 16 == 0; }

}  // namespace

void rmsnorm(const float* x, const float* weight, int rows, int cols, float eps, bf16_bits* out, cudaStream_t stream) {
  if (cols % 4 == 0 && aligned16(x) && aligned16(weight) && aligned16(out)) {
    rmsnorm_vec4_kernel<<<rows, 256, 0, stream>>>(x, weight, cols, eps, reinterpret_cast<__nv_bfloat16*>(out));
  } else {
    rmsnorm_kernel<<<rows, 512, 0, stream>>>(x, weight, cols, eps, reinterpret_cast<__nv_bfloat16*>(out));
  }
  LAZYSCOPE_CUDA_LAUNCH_CHECK();
}

void swiglu(const bf16_bits* gate_up, int rows, int inter, bf16_bits* out, cudaStream_t stream) {
  const auto* in = reinterpret_cast<const __nv_bfloat16*>(gate_up);
  auto* dst = reinterpret_cast<__nv_bfloat16*>(out);
  if (inter % 8 == 0 && aligned16(gate_up) && aligned16(out)) {
    swiglu_vec8_kernel<<<dim3((inter / 8 + 255) / 256, rows), 256, 0, stream>>>(in, inter, dst);
  } else {
    swiglu_kernel<<<dim3((inter + 255) / 256, rows), 256, 0, stream>>>(in, inter, dst);
  }
  LAZYSCOPE_CUDA_LAUNCH_CHECK();
}

}  // namespace lazyscope::cuda

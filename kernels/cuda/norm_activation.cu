// RMSNorm and SwiGLU on the GPU (the separate launches; decode folds them into its GEMVs).
#include <cuda_bf16.h>

#include "kernels/cuda/check.h"
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

}  // namespace

void rmsnorm(const float* x, const float* weight, int rows, int cols, float eps, bf16_bits* out, cudaStream_t stream) {
  rmsnorm_kernel<<<rows, 512, 0, stream>>>(x, weight, cols, eps, reinterpret_cast<__nv_bfloat16*>(out));
  LAZYSCOPE_CUDA_LAUNCH_CHECK();
}

void swiglu(const bf16_bits* gate_up, int rows, int inter, bf16_bits* out, cudaStream_t stream) {
  swiglu_kernel<<<dim3((inter + 255) / 256, rows), 256, 0, stream>>>(
      reinterpret_cast<const __nv_bfloat16*>(gate_up), inter, reinterpret_cast<__nv_bfloat16*>(out));
  LAZYSCOPE_CUDA_LAUNCH_CHECK();
}

}  // namespace lazyscope::cuda

// Split-KV reduction shared by decode and prefill attention.
#include <cuda_bf16.h>

#include "kernels/cuda/attention_common.cuh"
#include "kernels/cuda/check.h"

namespace lazyscope::cuda {
namespace {

__global__ void combine_kernel(const float* partial_o, const float* partial_ml, int splits, int head_dim,
                               __nv_bfloat16* out) {
  const int64_t row = blockIdx.x;
  const float* ml = partial_ml + row * splits * 2;
  float total_max = -INFINITY;
  for (int s = 0; s < splits; ++s) total_max = fmaxf(total_max, ml[2 * s]);
  const float base_max = total_max == -INFINITY ? 0.0f : total_max;
  float total_sum = 0.0f;
  for (int s = 0; s < splits; ++s) total_sum += ml[2 * s + 1] * exp2f(ml[2 * s] - base_max);
  const float inv_sum = total_sum > 0.0f ? 1.0f / total_sum : 0.0f;
  for (int d = threadIdx.x; d < head_dim; d += blockDim.x) {
    float value = 0.0f;
    for (int s = 0; s < splits; ++s) {
      value += partial_o[(row * splits + s) * head_dim + d] * exp2f(ml[2 * s] - base_max);
    }
    out[row * head_dim + d] = __float2bfloat16(value * inv_sum);
  }
}

}  // namespace

void combine_splits(const float* partial_o, const float* partial_ml, int rows, int splits, int head_dim,
                    bf16_bits* out, cudaStream_t stream) {
  if (rows == 0) return;
  combine_kernel<<<rows, head_dim, 0, stream>>>(partial_o, partial_ml, splits, head_dim,
                                                 reinterpret_cast<__nv_bfloat16*>(out));
  LAZYSCOPE_CUDA_LAUNCH_CHECK();
}

}  // namespace lazyscope::cuda

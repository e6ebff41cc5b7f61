#pragma once
// Pieces shared by the decode and prefill attention kernels.
#include <cuda_runtime.h>

#include "kernels/cuda/attention.h"
#include "kernels/cuda/device_util.cuh"

namespace lazyscope::cuda {

namespace detail {

// Rotates this lane's 8-dim slice (dims dim0..dim0+7) of every group head's raw query by
// `position` (half-split pairing, the partner dim read from shared memory).
template <int D, int G>
__device__ __forceinline__ void rotate_slice(const float (*q_raw)[D], float (*q)[8], int dim0, long long position,
                                             const float* inv_freq) {
  constexpr int kHalf = D / 2;
#pragma unroll
  for (int j = 0; j < 8; ++j) {
    const int d = dim0 + j;
    const bool first = d < kHalf;
    float c, s;
    rope_cos_sin(position, inv_freq[first ? d : d - kHalf], &c, &s);
#pragma unroll
    for (int g = 0; g < G; ++g) {
      const float x = q_raw[g][d];
      const float partner = q_raw[g][first ? d + kHalf : d - kHalf];
      q[g][j] = first ? x * c - partner * s : x * c + partner * s;
    }
  }
}

}  // namespace detail

// Merges split-KV partials (unnormalised accumulators with log2-domain max and sum) into bf16 rows.
void combine_splits(const float* partial_o, const float* partial_ml, int rows, int splits, int head_dim,
                    bf16_bits* out, cudaStream_t stream);

}  // namespace lazyscope::cuda

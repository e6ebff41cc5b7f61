// Token embedding lookup and the greedy pick over logits (argmax) on the GPU.
#include <cuda_bf16.h>

#include <algorithm>
#include <string>

#include "base/error.h"
#include "kernels/cuda/check.h"
#include "kernels/cuda/device_util.cuh"
#include "kernels/cuda/ops.h"

namespace lazyscope::cuda {
namespace {

__global__ void embedding_kernel(const int32_t* ids, const __nv_bfloat16* table, int hidden, float* out) {
  const int64_t row = blockIdx.x;
  const __nv_bfloat16* src = table + int64_t(ids[row]) * hidden;
  for (int i = threadIdx.x; i < hidden; i += blockDim.x) out[row * hidden + i] = __bfloat162float(src[i]);
}

__global__ void embedding_shard_kernel(const int32_t* ids, const __nv_bfloat16* table, int vocab_begin,
                                       int vocab_count, int hidden, float* out) {
  const int64_t row = blockIdx.x;
  const int local = ids[row] - vocab_begin;
  const bool mine = local >= 0 && local < vocab_count;
  const __nv_bfloat16* src = table + int64_t(mine ? local : 0) * hidden;
  for (int i = threadIdx.x; i < hidden; i += blockDim.x) out[row * hidden + i] = mine ? __bfloat162float(src[i]) : 0.0f;
}

// Order-preserving map of a float onto unsigned bits (larger float, larger key).
__device__ __forceinline__ unsigned ordered_bits(float value) {
  const unsigned bits = __float_as_uint(value);
  return (bits & 0x80000000u) != 0 ? ~bits : bits | 0x80000000u;
}

// Grid-wide argmax of row blockIdx.y: each CTA of the row reduces its stride of x to one (value,
// index) key, atomicMax picks the largest value and, among equal values, the smallest index
// (order-independent, so the result is deterministic); the row's last CTA to arrive writes the
// index and re-zeroes the row's scratch. NaN is never picked (as the CPU reference's strict `>`
// loop); all -inf or NaN gives index 0.
__global__ void argmax_kernel(const float* x_rows, int n, int32_t* out_rows, unsigned long long* scratch_rows) {
  const float* x = x_rows + int64_t(blockIdx.y) * n;
  int32_t* out = out_rows + blockIdx.y;
  unsigned long long* scratch = scratch_rows + 2 * int64_t(blockIdx.y);
  __shared__ float best_value[32];
  __shared__ int best_index[32];
  __shared__ bool is_last;
  float value = -INFINITY;
  int index = n;
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
    const float v = __ldcg(x + i);
    if (v > value || (index == n && v == value)) {
      value = v;
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
    if (index < n) {
      const unsigned long long key =
          (static_cast<unsigned long long>(ordered_bits(value)) << 32) | (0xffffffffu - unsigned(index));
      atomicMax(scratch, key);
    }
    __threadfence();
    is_last = atomicAdd(scratch + 1, 1ull) == gridDim.x - 1;
  }
  __syncthreads();
  if (is_last && threadIdx.x == 0) {
    __threadfence();
    const unsigned long long key = atomicExch(scratch, 0ull);
    *out = key == 0 ? 0 : int32_t(0xffffffffu - unsigned(key & 0xffffffffull));
    scratch[1] = 0;
  }
}

}  // namespace

void embedding(const int32_t* ids, int n, const bf16_bits* table, int hidden, float* out, cudaStream_t stream) {
  embedding_kernel<<<n, 256, 0, stream>>>(ids, reinterpret_cast<const __nv_bfloat16*>(table), hidden, out);
  LAZYSCOPE_CUDA_LAUNCH_CHECK();
}

void embedding_shard(const int32_t* ids, int n, const bf16_bits* table, int vocab_begin, int vocab_count, int hidden,
                     float* out, cudaStream_t stream) {
  embedding_shard_kernel<<<n, 256, 0, stream>>>(ids, reinterpret_cast<const __nv_bfloat16*>(table), vocab_begin,
                                                vocab_count, hidden, out);
  LAZYSCOPE_CUDA_LAUNCH_CHECK();
}

void argmax_rows(const float* x, int rows, int n, int32_t* out, unsigned long long* scratch, cudaStream_t stream) {
  if (n <= 0) throw Error("cuda argmax: empty input");
  if (rows <= 0 || rows > 65535) throw Error("cuda argmax: " + std::to_string(rows) + " rows (1..65535)");
  constexpr int kThreads = 256;
  const int blocks = std::max(1, std::min(2 * detail::cached_sm_count(), (n + kThreads * 8 - 1) / (kThreads * 8)));
  argmax_kernel<<<dim3(blocks, rows), kThreads, 0, stream>>>(x, n, out, scratch);
  LAZYSCOPE_CUDA_LAUNCH_CHECK();
}

}  // namespace lazyscope::cuda

// Lazy and plain paged decode attention (flash-decoding): one CTA per (split, kv head, sequence)
// serves every query head of the GQA group; keys are read straight from the pool with 16-byte
// loads, each warp owning whole blocks; the split partials are merged by combine_splits.
#include <algorithm>
#include <climits>
#include <string>

#include "kernels/cuda/attention.h"
#include "kernels/cuda/attention_common.cuh"
#include "kernels/cuda/check.h"
#include "kernels/cuda/device_util.cuh"
#include "kernels/error.h"

namespace lazyscope::cuda {
namespace {

using namespace detail;

constexpr int kDecodeWarps = 4;

template <int D, int G, bool LAZY>
__global__ void __launch_bounds__(kDecodeWarps * 32) decode_kernel(DecodeParams p) {
  constexpr int kLanesPerKey = D / 8;               // each lane holds 8 dims (16 bytes)
  constexpr int kGroups = 32 / kLanesPerKey;        // keys side by side in a warp
  constexpr int kKeysPerGroup = 16 / kGroups;       // a chunk is 16 keys per warp
  const int split = blockIdx.x, kv_head = blockIdx.y, seq = blockIdx.z;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int group = lane / kLanesPerKey, sub = lane % kLanesPerKey;
  const int dim0 = sub * 8;

  __shared__ float q_raw[LAZY ? G : 1][LAZY ? D : 1];
  __shared__ float merge_ml[kDecodeWarps][G][2];
  __shared__ float merge_acc[kDecodeWarps][G][D];

  const bf16_bits* q_seq = p.q + seq * p.q_row_stride + int64_t(kv_head) * G * D;
  float q[G][8];
  long long position = 0;
  if constexpr (LAZY) {
    for (int i = threadIdx.x; i < G * D; i += blockDim.x) {
      q_raw[i / D][i % D] = __bfloat162float(reinterpret_cast<const __nv_bfloat16*>(q_seq)[i]);
    }
    position = p.q_positions[seq];
    __syncthreads();
  } else {
#pragma unroll
    for (int g = 0; g < G; ++g) {
      uint4 raw = *reinterpret_cast<const uint4*>(q_seq + g * D + dim0);
      unpack8(raw, q[g]);
    }
  }
  const float score_scale = rsqrtf(float(D)) * kLog2e;  // scores kept in the log2 domain

  const int entry_first = p.seq_entry_offsets[seq], entry_last = p.seq_entry_offsets[seq + 1];
  const int per_split = (entry_last - entry_first + p.num_splits - 1) / p.num_splits;
  const int begin = entry_first + split * per_split;
  const int end = min(entry_last, begin + per_split);

  float row_max[G], row_sum[G], acc[G][8];
#pragma unroll
  for (int g = 0; g < G; ++g) {
    row_max[g] = -INFINITY;
    row_sum[g] = 0.0f;
#pragma unroll
    for (int j = 0; j < 8; ++j) acc[g][j] = 0.0f;
  }
  int current_shift = INT_MIN;
  const int64_t head_stride = int64_t(p.block_size) * D;
  for (int e = begin + warp; e < end; e += kDecodeWarps) {
    const KvEntry ref = p.entries[e];
    if constexpr (LAZY) {
      if (ref.shift != current_shift) {
        // A new run of one shift: rotate the raw query once by (m − δ).
        current_shift = ref.shift;
        rotate_slice<D, G>(q_raw, q, dim0, position - ref.shift, p.inv_freq);
      }
    }
    const int64_t base = (int64_t(ref.block) * p.num_kv_heads + kv_head) * head_stride;
    const bf16_bits* k_block = p.k_pool + base;
    const bf16_bits* v_block = p.v_pool + base;
    for (int chunk = 0; chunk < ref.valid; chunk += 16) {
      uint4 k_raw[kKeysPerGroup], v_raw[kKeysPerGroup];
#pragma unroll
      for (int j = 0; j < kKeysPerGroup; ++j) {
        const int slot = chunk + group * kKeysPerGroup + j;
        if (slot < ref.valid) {
          k_raw[j] = __ldcs(reinterpret_cast<const uint4*>(k_block + slot * D + dim0));
        } else {
          k_raw[j] = make_uint4(0, 0, 0, 0);
        }
      }
#pragma unroll
      for (int j = 0; j < kKeysPerGroup; ++j) {
        const int slot = chunk + group * kKeysPerGroup + j;
        if (slot < ref.valid) {
          v_raw[j] = __ldcs(reinterpret_cast<const uint4*>(v_block + slot * D + dim0));
        } else {
          v_raw[j] = make_uint4(0, 0, 0, 0);
        }
      }
      float score[kKeysPerGroup][G];
#pragma unroll
      for (int j = 0; j < kKeysPerGroup; ++j) {
        float k[8];
        unpack8(k_raw[j], k);
#pragma unroll
        for (int g = 0; g < G; ++g) {
          float s = 0.0f;
#pragma unroll
          for (int d = 0; d < 8; ++d) s = fmaf(q[g][d], k[d], s);
          score[j][g] = s;
        }
      }
#pragma unroll
      for (int j = 0; j < kKeysPerGroup; ++j) {
#pragma unroll
        for (int g = 0; g < G; ++g) {
#pragma unroll
          for (int offset = kLanesPerKey / 2; offset > 0; offset /= 2) {
            score[j][g] += __shfl_xor_sync(0xffffffffu, score[j][g], offset);
          }
        }
      }
#pragma unroll
      for (int g = 0; g < G; ++g) {
        float chunk_max = -INFINITY;
#pragma unroll
        for (int j = 0; j < kKeysPerGroup; ++j) {
          const int slot = chunk + group * kKeysPerGroup + j;
          score[j][g] = slot < ref.valid ? score[j][g] * score_scale : -INFINITY;
          chunk_max = fmaxf(chunk_max, score[j][g]);
        }
        const float new_max = fmaxf(row_max[g], chunk_max);
        const float base_max = new_max == -INFINITY ? 0.0f : new_max;
        const float correction = exp2f(row_max[g] - base_max);
        row_max[g] = new_max;
        row_sum[g] *= correction;
#pragma unroll
        for (int d = 0; d < 8; ++d) acc[g][d] *= correction;
#pragma unroll
        for (int j = 0; j < kKeysPerGroup; ++j) {
          const float weight = exp2f(score[j][g] - base_max);
          row_sum[g] += weight;
          float v[8];
          unpack8(v_raw[j], v);
#pragma unroll
          for (int d = 0; d < 8; ++d) acc[g][d] = fmaf(weight, v[d], acc[g][d]);
        }
      }
    }
  }
  // Merge the groups of a warp (lanes with the same dims), then the warps through shared memory.
#pragma unroll
  for (int offset = kLanesPerKey; offset < 32; offset *= 2) {
#pragma unroll
    for (int g = 0; g < G; ++g) {
      const float other_max = __shfl_xor_sync(0xffffffffu, row_max[g], offset);
      const float other_sum = __shfl_xor_sync(0xffffffffu, row_sum[g], offset);
      const float new_max = fmaxf(row_max[g], other_max);
      const float base_max = new_max == -INFINITY ? 0.0f : new_max;
      const float mine = exp2f(row_max[g] - base_max), theirs = exp2f(other_max - base_max);
      row_sum[g] = row_sum[g] * mine + other_sum * theirs;
#pragma unroll
      for (int d = 0; d < 8; ++d) {
        const float other = __shfl_xor_sync(0xffffffffu, acc[g][d], offset);
        acc[g][d] = acc[g][d] * mine + other * theirs;
      }
      row_max[g] = new_max;
    }
  }
  if (group == 0) {
#pragma unroll
    for (int g = 0; g < G; ++g) {
#pragma unroll
      for (int d = 0; d < 8; ++d) merge_acc[warp][g][dim0 + d] = acc[g][d];
      if (sub == 0) {
        merge_ml[warp][g][0] = row_max[g];
        merge_ml[warp][g][1] = row_sum[g];
      }
    }
  }
  __syncthreads();
  for (int i = threadIdx.x; i < G * D; i += blockDim.x) {
    const int g = i / D, d = i % D;
    float total_max = -INFINITY;
#pragma unroll
    for (int w = 0; w < kDecodeWarps; ++w) total_max = fmaxf(total_max, merge_ml[w][g][0]);
    const float base_max = total_max == -INFINITY ? 0.0f : total_max;
    float total_sum = 0.0f, total_acc = 0.0f;
#pragma unroll
    for (int w = 0; w < kDecodeWarps; ++w) {
      const float weight = exp2f(merge_ml[w][g][0] - base_max);
      total_sum += merge_ml[w][g][1] * weight;
      total_acc += merge_acc[w][g][d] * weight;
    }
    const int64_t row = int64_t(seq) * p.num_heads + kv_head * G + g;
    if (p.num_splits == 1) {
      const float value = total_sum > 0.0f ? total_acc / total_sum : 0.0f;
      reinterpret_cast<__nv_bfloat16*>(p.out)[row * D + d] = __float2bfloat16(value);
    } else {
      const int64_t slot = row * p.num_splits + split;
      p.partial_o[slot * D + d] = total_acc;
      if (d == 0) {
        p.partial_ml[slot * 2] = total_max;
        p.partial_ml[slot * 2 + 1] = total_sum;
      }
    }
  }
}

template <int D, int G, bool LAZY>
void launch_decode(const DecodeParams& p, cudaStream_t stream) {
  dim3 grid(p.num_splits, p.num_kv_heads, p.batch);
  decode_kernel<D, G, LAZY><<<grid, kDecodeWarps * 32, 0, stream>>>(p);
  LAZYSCOPE_CUDA_LAUNCH_CHECK();
}

template <int D, int G>
void dispatch_lazy(const DecodeParams& p, cudaStream_t stream) {
  if (p.lazy) {
    launch_decode<D, G, true>(p, stream);
  } else {
    launch_decode<D, G, false>(p, stream);
  }
}

template <int D>
void dispatch_group(const DecodeParams& p, cudaStream_t stream) {
  switch (p.num_heads / p.num_kv_heads) {
    case 1: return dispatch_lazy<D, 1>(p, stream);
    case 2: return dispatch_lazy<D, 2>(p, stream);
    case 3: return dispatch_lazy<D, 3>(p, stream);
    case 4: return dispatch_lazy<D, 4>(p, stream);
    case 5: return dispatch_lazy<D, 5>(p, stream);
    case 6: return dispatch_lazy<D, 6>(p, stream);
    case 7: return dispatch_lazy<D, 7>(p, stream);
    case 8: return dispatch_lazy<D, 8>(p, stream);
    default:
      throw Error("cuda decode attention: GQA ratio " + std::to_string(p.num_heads / p.num_kv_heads) +
                  " (supported: 1 to 8)");
  }
}

}  // namespace

int decode_num_splits(int batch, int num_kv_heads, int max_entries, int sm_count) {
  const int ctas = batch * num_kv_heads;
  // Two resident CTAs per SM (about 200 registers a thread). Pick the fewest splits that fill
  // the last wave to >= 90 %, so no half-empty wave doubles the time; each split keeps >= 4 blocks.
  const int capacity = 2 * sm_count;
  const int max_splits = std::max(1, std::min(128, max_entries / 4));
  int best = 1;
  double best_efficiency = 0.0;
  for (int splits = 1; splits <= max_splits; ++splits) {
    const int total = ctas * splits;
    const int waves = (total + capacity - 1) / capacity;
    const double efficiency = double(total) / (double(waves) * capacity);
    if (total >= capacity && efficiency >= 0.9) return splits;
    if (efficiency > best_efficiency + 1e-9) {
      best_efficiency = efficiency;
      best = splits;
    }
  }
  return best;
}

void decode_attention(const DecodeParams& p, cudaStream_t stream) {
  if (p.batch == 0) return;
  if (p.num_kv_heads <= 0 || p.num_heads % p.num_kv_heads != 0) {
    throw Error("cuda decode attention: num_heads must be a multiple of num_kv_heads");
  }
  if (p.num_splits > 1 && (p.partial_o == nullptr || p.partial_ml == nullptr)) {
    throw Error("cuda decode attention: split workspace missing");
  }
  if (p.head_dim == 128) {
    dispatch_group<128>(p, stream);
  } else if (p.head_dim == 64) {
    dispatch_group<64>(p, stream);
  } else if (p.head_dim == 32) {
    dispatch_group<32>(p, stream);
  } else if (p.head_dim == 16) {
    dispatch_group<16>(p, stream);
  } else {
    throw Error("cuda decode attention: head_dim " + std::to_string(p.head_dim) + " (supported: 16, 32, 64, 128)");
  }
  if (p.num_splits > 1) {
    combine_splits(p.partial_o, p.partial_ml, p.batch * p.num_heads, p.num_splits, p.head_dim, p.out, stream);
  }
}

}  // namespace lazyscope::cuda

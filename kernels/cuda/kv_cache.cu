// RoPE-at-write KV store and the materialize copy (copy + rotate blocks by δ).
#include <cuda_bf16.h>

#include <cstdint>
#include <string>

#include "kernels/cuda/attention.h"
#include "kernels/cuda/check.h"
#include "kernels/cuda/device_util.cuh"
#include "base/error.h"

namespace lazyscope::cuda {
namespace {

using detail::rope_cos_sin;

// Rotates 8 pairs (dim + j, dim + j + D/2) of one head from src into dst (may alias) with the
// CTA's cos/sin table; two 16-byte loads and two 16-byte stores.
__device__ __forceinline__ void rotate_chunk(const bf16_bits* src, bf16_bits* dst, int dim, int half,
                                             const float* trig) {
  float a[8], b[8];
  detail::unpack8(*reinterpret_cast<const uint4*>(src), a);
  detail::unpack8(*reinterpret_cast<const uint4*>(src + half), b);
  uint4 lo, hi;
  uint32_t* lo_words = reinterpret_cast<uint32_t*>(&lo);
  uint32_t* hi_words = reinterpret_cast<uint32_t*>(&hi);
#pragma unroll
  for (int j = 0; j < 4; ++j) {
    const int x = 2 * j, y = 2 * j + 1;
    const float cx = trig[dim + x], sx = trig[half + dim + x], cy = trig[dim + y], sy = trig[half + dim + y];
    lo_words[j] = detail::pack_bf16x2(a[x] * cx - b[x] * sx, a[y] * cy - b[y] * sy);
    hi_words[j] = detail::pack_bf16x2(b[x] * cx + a[x] * sx, b[y] * cy + a[y] * sy);
  }
  *reinterpret_cast<uint4*>(dst) = lo;
  *reinterpret_cast<uint4*>(dst + half) = hi;
}

// One CTA per (token, set). Set 0 stores K rotated by the token's position and V into the pool;
// set 1 + r writes the query: plain (q_rotated null) rotated in place by the position, lazy
// rotated by (position − shifts[r]) into q_rotated[r] (with token_shift_offsets, by the token's
// own shift r). Each CTA computes its D/2 angles once
// (one sincos per token, pair and shift) into shared memory; every access moves 16 bytes.
__global__ void kv_write_kernel(KvWriteParams p) {
  extern __shared__ float trig[];  // [half] cos, then [half] sin
  const int token = blockIdx.x, set = blockIdx.y;
  const int D = p.head_dim, half = D / 2, chunks = half / 8;
  long long position = p.positions[token];
  if (set > 0 && p.q_rotated != nullptr) {
    int shift = set - 1;
    if (p.token_shift_offsets != nullptr) {  // this token's own shifts: fewer than the grid's sets
      const int first = p.token_shift_offsets[token];
      if (shift >= p.token_shift_offsets[token + 1] - first) return;  // the whole CTA, before any barrier
      shift += first;
    }
    position -= p.shifts[shift];
  }
  for (int i = threadIdx.x; i < half; i += blockDim.x) rope_cos_sin(position, p.inv_freq[i], &trig[i], &trig[half + i]);
  __syncthreads();
  if (set > 0) {
    const bf16_bits* q = p.q + int64_t(token) * p.q_row_stride;
    bf16_bits* out = p.q_rotated != nullptr ? p.q_rotated + (int64_t(set - 1) * p.n + token) * p.num_heads * D
                                            : p.q + int64_t(token) * p.q_row_stride;
    for (int idx = threadIdx.x; idx < p.num_heads * chunks; idx += blockDim.x) {
      const int head = idx / chunks, dim = (idx % chunks) * 8;
      rotate_chunk(q + head * D + dim, out + head * D + dim, dim, half, trig);
    }
    return;
  }
  const int slot = p.slots[token];
  const int block = slot / p.block_size, offset = slot % p.block_size;
  const int64_t src = int64_t(token) * p.row_stride;
  for (int idx = threadIdx.x; idx < p.num_kv_heads * chunks; idx += blockDim.x) {
    const int head = idx / chunks, dim = (idx % chunks) * 8;
    const int64_t dst = ((int64_t(block) * p.num_kv_heads + head) * p.block_size + offset) * D;
    rotate_chunk(p.k + src + head * D + dim, p.k_pool + dst + dim, dim, half, trig);
  }
  // V: a plain copy, 8 elements a thread.
  const int v_chunks = D / 8;
  for (int idx = threadIdx.x; idx < p.num_kv_heads * v_chunks; idx += blockDim.x) {
    const int head = idx / v_chunks, dim = (idx % v_chunks) * 8;
    const int64_t dst = ((int64_t(block) * p.num_kv_heads + head) * p.block_size + offset) * D;
    *reinterpret_cast<uint4*>(p.v_pool + dst + dim) = *reinterpret_cast<const uint4*>(p.v + src + head * D + dim);
  }
}

bool aligned16(const void* p) { return reinterpret_cast<std::uintptr_t>(p) % 16 == 0; }

// One CTA per (copy, layer, kv head). The angle shift × inv_freq is the same for every slot,
// so cos/sin are computed once per CTA; K and V move in 16-byte pieces.
__global__ void materialize_kernel(MaterializeParams p) {
  extern __shared__ float trig[];  // [half] cos, then [half] sin
  const BlockCopyOp copy = p.copies[blockIdx.x];
  const int layer = blockIdx.y, head = blockIdx.z;
  const int half = p.head_dim / 2;
  for (int i = threadIdx.x; i < half; i += blockDim.x) rope_cos_sin(copy.shift, p.inv_freq[i], &trig[i], &trig[half + i]);
  __syncthreads();
  const int64_t layer_base = int64_t(layer) * p.layer_stride;
  const int64_t src = layer_base + (int64_t(copy.src) * p.num_kv_heads + head) * p.block_size * p.head_dim;
  const int64_t dst = layer_base + (int64_t(copy.dst) * p.num_kv_heads + head) * p.block_size * p.head_dim;
  const bf16_bits* k_src = p.k_pool + src;
  const bf16_bits* v_src = p.v_pool + src;
  bf16_bits* k_dst = p.k_pool + dst;
  bf16_bits* v_dst = p.v_pool + dst;
  const int chunks = half / 8;
  for (int idx = threadIdx.x; idx < copy.valid * chunks; idx += blockDim.x) {
    const int slot = idx / chunks, dim = (idx % chunks) * 8;
    const int64_t at = int64_t(slot) * p.head_dim + dim;
    const uint4 lo_raw = *reinterpret_cast<const uint4*>(k_src + at);
    const uint4 hi_raw = *reinterpret_cast<const uint4*>(k_src + at + half);
    float a[8], b[8];
    detail::unpack8(lo_raw, a);
    detail::unpack8(hi_raw, b);
    uint4 lo_out, hi_out;
    uint32_t* lo_words = reinterpret_cast<uint32_t*>(&lo_out);
    uint32_t* hi_words = reinterpret_cast<uint32_t*>(&hi_out);
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const int x = 2 * j, y = 2 * j + 1;
      const float cx = trig[dim + x], sx = trig[half + dim + x], cy = trig[dim + y], sy = trig[half + dim + y];
      lo_words[j] = detail::pack_bf16x2(a[x] * cx - b[x] * sx, a[y] * cy - b[y] * sy);
      hi_words[j] = detail::pack_bf16x2(b[x] * cx + a[x] * sx, b[y] * cy + a[y] * sy);
    }
    *reinterpret_cast<uint4*>(k_dst + at) = lo_out;
    *reinterpret_cast<uint4*>(k_dst + at + half) = hi_out;
    *reinterpret_cast<uint4*>(v_dst + at) = *reinterpret_cast<const uint4*>(v_src + at);
    *reinterpret_cast<uint4*>(v_dst + at + half) = *reinterpret_cast<const uint4*>(v_src + at + half);
  }
}

}  // namespace

void kv_write(const KvWriteParams& p, cudaStream_t stream) {
  if (p.n == 0) return;
  if (p.head_dim % 16 != 0 || p.head_dim > 2048) {
    throw Error("cuda kv_write: head_dim " + std::to_string(p.head_dim) + " must be a multiple of 16");
  }
  // 16-byte accesses: every base and row stride must keep rows on 8-element boundaries.
  const bool q_ok = p.q == nullptr || (aligned16(p.q) && p.q_row_stride % 8 == 0);
  if (!aligned16(p.k) || !aligned16(p.v) || p.row_stride % 8 != 0 || !aligned16(p.k_pool) || !aligned16(p.v_pool) ||
      !q_ok || (p.q_rotated != nullptr && !aligned16(p.q_rotated))) {
    throw Error("cuda kv_write: q/k/v/pool pointers must be 16-byte aligned and row strides multiples of 8");
  }
  int query_sets = p.q != nullptr ? 1 : 0;
  if (p.q_rotated != nullptr) {
    if (p.q == nullptr || p.shifts == nullptr || p.num_shifts < 1) {
      throw Error("cuda kv_write: q_rotated needs q, shifts and num_shifts >= 1");
    }
    query_sets = p.num_shifts;
  }
  if (query_sets > 0 && p.num_heads < 1) throw Error("cuda kv_write: q given without num_heads");
  if (query_sets > 65534) throw Error("cuda kv_write: more than 65534 distinct shifts in one step (grid.y)");
  kv_write_kernel<<<dim3(p.n, 1 + query_sets), 128, p.head_dim * sizeof(float), stream>>>(p);
  LAZYSCOPE_CUDA_LAUNCH_CHECK();
}

void materialize(const MaterializeParams& p, cudaStream_t stream) {
  if (p.num_copies == 0) return;
  if (p.head_dim % 16 != 0) throw Error("cuda materialize: head_dim must be a multiple of 16");
  materialize_kernel<<<dim3(p.num_copies, p.num_layers, p.num_kv_heads), 128, p.head_dim * sizeof(float), stream>>>(p);
  LAZYSCOPE_CUDA_LAUNCH_CHECK();
}

}  // namespace lazyscope::cuda

// RoPE-at-write KV store and the materialize copy (copy + rotate blocks by δ).
#include <cuda_bf16.h>

#include <string>

#include "kernels/cuda/attention.h"
#include "kernels/cuda/check.h"
#include "kernels/cuda/device_util.cuh"
#include "kernels/error.h"

namespace lazyscope::cuda {
namespace {

using detail::rope_cos_sin;

// One CTA per (token, head); thread i rotates the pair (i, i + D/2). Heads past num_kv_heads
// are query heads, rotated in place for the plain attention path.
__global__ void kv_write_kernel(KvWriteParams p) {
  const int token = blockIdx.x, head = blockIdx.y;
  const int half = p.head_dim / 2, i = threadIdx.x;
  if (i >= half) return;
  float c, s;
  rope_cos_sin(p.positions[token], p.inv_freq[i], &c, &s);
  if (head >= p.num_kv_heads) {
    __nv_bfloat16* q = reinterpret_cast<__nv_bfloat16*>(p.q) + token * p.q_row_stride +
                       int64_t(head - p.num_kv_heads) * p.head_dim;
    const float a = __bfloat162float(q[i]), b = __bfloat162float(q[i + half]);
    q[i] = __float2bfloat16(a * c - b * s);
    q[i + half] = __float2bfloat16(b * c + a * s);
    return;
  }
  const int slot = p.slots[token];
  const int block = slot / p.block_size, offset = slot % p.block_size;
  const int64_t dst = ((int64_t(block) * p.num_kv_heads + head) * p.block_size + offset) * p.head_dim;
  const int64_t src = token * p.row_stride + int64_t(head) * p.head_dim;
  const __nv_bfloat16* k = reinterpret_cast<const __nv_bfloat16*>(p.k) + src;
  const __nv_bfloat16* v = reinterpret_cast<const __nv_bfloat16*>(p.v) + src;
  __nv_bfloat16* k_pool = reinterpret_cast<__nv_bfloat16*>(p.k_pool) + dst;
  __nv_bfloat16* v_pool = reinterpret_cast<__nv_bfloat16*>(p.v_pool) + dst;
  const float a = __bfloat162float(k[i]), b = __bfloat162float(k[i + half]);
  k_pool[i] = __float2bfloat16(a * c - b * s);
  k_pool[i + half] = __float2bfloat16(b * c + a * s);
  v_pool[i] = v[i];
  v_pool[i + half] = v[i + half];
}

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
  if (p.head_dim % 2 != 0 || p.head_dim > 2048) throw Error("cuda kv_write: bad head_dim " + std::to_string(p.head_dim));
  const int heads = p.num_kv_heads + (p.q != nullptr ? p.num_heads : 0);
  kv_write_kernel<<<dim3(p.n, heads), p.head_dim / 2, 0, stream>>>(p);
  LAZYSCOPE_CUDA_LAUNCH_CHECK();
}

void materialize(const MaterializeParams& p, cudaStream_t stream) {
  if (p.num_copies == 0) return;
  if (p.head_dim % 16 != 0) throw Error("cuda materialize: head_dim must be a multiple of 16");
  materialize_kernel<<<dim3(p.num_copies, p.num_layers, p.num_kv_heads), 128, p.head_dim * sizeof(float), stream>>>(p);
  LAZYSCOPE_CUDA_LAUNCH_CHECK();
}

}  // namespace lazyscope::cuda

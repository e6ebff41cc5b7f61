#pragma once
// The decode step's wqkv epilogue, shared by the wqkv GEMV and the persistent layer kernel: given
// the fp32 sums of a RoPE pair of rows (dims i and i + D/2 of one q or k head, or any two V rows),
// it stores them with kv_write's arithmetic on the bf16-rounded projections: q rotated by the
// position (raw for lazy attention, or rotated once per shift into q_rotated), K rotated and V into
// the pool slot slots[0].
#include <cuda_bf16.h>

#include "kernels/cuda/device_util.cuh"
#include "kernels/cuda/gemv.h"

namespace lazyscope::cuda::detail {

__device__ __forceinline__ void qkv_epilogue(const QkvRopeOutput& o, const int rows[2], const float value[2]) {
  const int D = o.head_dim, half = D / 2;
  const int slot = o.slots[0];
  const int64_t slot_base = (int64_t(slot / o.block_size) * o.num_kv_heads) * o.block_size + slot % o.block_size;
  auto pool_at = [&](int head, int dim) { return (slot_base + int64_t(head) * o.block_size) * D + dim; };
  __nv_bfloat16* q = reinterpret_cast<__nv_bfloat16*>(o.q);
  if (rows[0] >= o.q_dim + o.kv_dim) {
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      const int d = rows[r] - o.q_dim - o.kv_dim;
      reinterpret_cast<__nv_bfloat16*>(o.v_pool)[pool_at(d / D, d % D)] = __float2bfloat16(value[r]);
    }
    return;
  }
  const bool is_q = rows[0] < o.q_dim;
  if (is_q && !o.rotate_q && o.q_rotated == nullptr) {  // lazy decode rotates the raw query itself
    q[rows[0]] = __float2bfloat16(value[0]);
    q[rows[1]] = __float2bfloat16(value[1]);
    return;
  }
  const int local = is_q ? rows[0] : rows[0] - o.q_dim;
  const int head = local / D, i = local % D;
  const float a = __bfloat162float(__float2bfloat16(value[0])), b = __bfloat162float(__float2bfloat16(value[1]));
  float c, s;
  if (is_q && !o.rotate_q) {  // lazy decode's query copies, one a shift
    __nv_bfloat16* copies = reinterpret_cast<__nv_bfloat16*>(o.q_rotated);
    const int first = o.shift_offsets[0], count = o.shift_offsets[1] - first;
    for (int j = 0; j < count; ++j) {
      rope_cos_sin(static_cast<long long>(o.positions[0]) - o.shifts[first + j], o.inv_freq[i], &c, &s);
      copies[int64_t(j) * o.q_dim + rows[0]] = __float2bfloat16(a * c - b * s);
      copies[int64_t(j) * o.q_dim + rows[1]] = __float2bfloat16(b * c + a * s);
    }
    return;
  }
  rope_cos_sin(o.positions[0], o.inv_freq[i], &c, &s);
  const __nv_bfloat16 lo = __float2bfloat16(a * c - b * s), hi = __float2bfloat16(b * c + a * s);
  if (is_q) {
    q[rows[0]] = lo;
    q[rows[1]] = hi;
  } else {
    __nv_bfloat16* k_pool = reinterpret_cast<__nv_bfloat16*>(o.k_pool);
    k_pool[pool_at(head, i)] = lo;
    k_pool[pool_at(head, i + half)] = hi;
  }
}

}  // namespace lazyscope::cuda::detail

// Lazy and plain paged decode attention (flash-decoding) on tensor cores. One CTA per (split,
// kv head, sequence) serves every query head of the GQA group; each of its warps walks its own
// 16-key units (a unit = 16 slots of one block) through a private ring of shared-memory stages
// filled by cp.async, so two units per warp stay in flight while it computes a third. Scores and
// P·V are mma.sync m16n8k16 (the group's heads are the A rows); the split partials are merged by
// decode_combine_kernel. Both kernels use programmatic dependent launch. At batch 1 the CTAs can
// also bulk-prefetch the next GEMVs' weights into L2 as they start (DecodeParams::l2_prefetch).
// Lazy: the CTA rotates the query once by (m − δ) for the shift of its split's first entry (the
// D/2 angles and the G×D rotation shared by its 4 warps through shared memory, computed while the
// first copies are in flight); a warp that meets another shift re-rotates its own fragment from the
// raw query (lane-local in the MMA A layout: the RoPE partner of dim d < D/2 sits in the same lane).
// Lazy with query copies (DecodeParams::q_rotated): the kernel before rotated the query once per
// distinct shift of its sequence; each warp runs the plain path on the copy its unit's entry names,
// and loads another copy where a unit names another.
#include <algorithm>
#include <climits>
#include <string>

#include "kernels/cuda/attention.h"
#include "kernels/cuda/check.h"
#include "kernels/cuda/device_arch.h"
#include "kernels/cuda/device_util.cuh"
#include "kernels/cuda/tool_switches.h"
#include "base/error.h"

namespace lazyscope::cuda {
namespace {

using namespace detail;

constexpr int kDecodeWarps = 4;
constexpr int kUnitKeys = 16;  // keys per unit: one MMA k-step of P·V

// Ring depth per warp: D128 keeps 2 CTAs (96 KB each) on an SM; smaller heads afford a deeper ring.
template <int D>
__host__ __device__ constexpr int decode_stages() {
  return D >= 128 ? 3 : 4;
}
template <int D>
__host__ __device__ constexpr int stage_elements() {
  return 2 * kUnitKeys * D;  // the unit's K tile, then its V tile
}
// Lazy, after the ring: the CTA's query [G][D + 8] bf16 (raw, then rotated in place; rows padded so
// the fragment loads of a warp's 8 rows hit distinct banks), the angles' cos and sin [D/2] each,
// and for each angle thread its (position, shift, frequency) as copied.
template <int D>
__host__ __device__ constexpr int rotated_query_stride() {
  return D + 8;
}
template <int D>
__host__ __device__ constexpr int decode_ring_bytes() {
  constexpr int ring = kDecodeWarps * decode_stages<D>() * stage_elements<D>() * 2;
  constexpr int merge = kDecodeWarps * 8 * (D + 2) * 4;  // reused after the loop
  return ring > merge ? ring : merge;
}
template <int D, int G, bool LAZY>
__host__ __device__ constexpr int decode_smem_bytes() {
  return decode_ring_bytes<D>() + (LAZY ? G * rotated_query_stride<D>() * 2 + D * 4 + D / 2 * 16 : 0);
}

// Tiles are unpadded [16 keys][D] with the 16-byte chunks of each row XOR-swizzled, so the 8 rows
// of every ldmatrix 8x8 matrix (8 consecutive keys, one logical chunk) hit 8 distinct bank groups.
template <int D>
__device__ __forceinline__ int tile_offset(int key, int chunk) {
  constexpr int kChunks = D / 8;
  int swizzle;
  if constexpr (kChunks >= 8) {
    swizzle = key & 7;
  } else if constexpr (kChunks == 4) {
    swizzle = (key >> 1) & 3;  // two rows share a 128-byte line
  } else {
    swizzle = (key >> 2) & 1;  // four rows share a 128-byte line
  }
  return key * D + (chunk ^ swizzle) * 8;
}

// A lane's share of copying a unit (16 keys of K and V) into a stage: pass p copies chunk
// lane % kChunks of key p * kKeysPerPass + lane / kChunks. The swizzle repeats every 8 keys, so
// passes p and p + kPeriod land 8 rows apart: the first kPeriod destinations serve every pass.
template <int D>
struct UnitCopy {
  static constexpr int kChunks = D / 8, kKeysPerPass = 32 / kChunks, kPasses = kUnitKeys / kKeysPerPass;
  static constexpr int kPeriod = kKeysPerPass >= 8 ? 1 : 8 / kKeysPerPass;
};
// The lane's byte offsets into a stage's K tile for passes [0, kPeriod).
template <int D>
__device__ __forceinline__ void unit_copy_offsets(int lane, uint32_t (&offset)[UnitCopy<D>::kPeriod]) {
  using C = UnitCopy<D>;
#pragma unroll
  for (int pass = 0; pass < C::kPeriod; ++pass) {
    offset[pass] = tile_offset<D>(pass * C::kKeysPerPass + lane / C::kChunks, lane % C::kChunks) * 2;
  }
}

// Copies slots [first_slot, first_slot + 16) of one block's K and V into the stage at shared address
// `stage`; slots at or past `valid` are zero-filled (never read from the pool), so a stale value
// cannot leak in as NaN. The copies mark their L2 lines evict-first (`policy`): a step reads each
// key once.
template <int D>
__device__ __forceinline__ void load_unit(uint32_t stage, const uint32_t (&offset)[UnitCopy<D>::kPeriod],
                                          const bf16_bits* k_block, const bf16_bits* v_block, int first_slot,
                                          int valid, int lane, uint64_t policy) {
  using C = UnitCopy<D>;
  const int chunk = lane % C::kChunks;
#pragma unroll
  for (int pass = 0; pass < C::kPasses; ++pass) {
    const int key = pass * C::kKeysPerPass + lane / C::kChunks;
    const int slot = first_slot + key;
    const bool ok = slot < valid;
    const int64_t src = ok ? int64_t(slot) * D + chunk * 8 : 0;
    const uint32_t dst = stage + offset[pass % C::kPeriod] + (pass / C::kPeriod) * (8 * D * 2);
    cp_async16(dst, k_block + src, ok ? 16 : 0, policy);
    cp_async16(dst + kUnitKeys * D * 2, v_block + src, ok ? 16 : 0, policy);
  }
}

// 4-byte async global→shared copy (src_bytes 0: zero fill). The lazy metadata goes through these,
// committed as a group ahead of the prologue's copies: ptxas keeps cp.async in order but sinks
// ordinary loads below them, where they would wait behind the copies' requests.
__device__ __forceinline__ void cp_async4(void* dst, const void* src, int src_bytes) {
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" ::"r"(smem_addr(dst)), "l"(src), "r"(src_bytes));
}

__device__ __forceinline__ float bf16_lo(uint32_t pair) { return __uint_as_float(pair << 16); }
__device__ __forceinline__ float bf16_hi(uint32_t pair) { return __uint_as_float(pair & 0xffff0000u); }

// Programmatic dependent launch (both kernels are launched with it): wait until the previous
// kernel in the stream has finished and its writes are visible (a no-op when launched without
// it), then let the next kernel's CTAs be scheduled while ours run; the next one waits the same way.
// Hopper and newer only: older devices are launched without the attribute (cuda_arch.h).
__device__ __forceinline__ void wait_previous_kernel_then_release_next() {
#if __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;\n" ::: "memory");
  asm volatile("griddepcontrol.launch_dependents;\n" :::);
#endif
}

// Lazy: rotates the raw query fragment by `position` into the A fragment. Lane L holds the angles
// of frequencies L and L + 32 (cos_t/sin_t slots); the RoPE partner of dim d < D/2 is d + D/2,
// the same lane's q[kk + D/32], so the rotation itself is lane-local. Warp-uniform (shuffles).
template <int D>
__device__ __forceinline__ void rotate_query(const uint32_t (&q_raw)[D / 16][2], uint32_t (&q_frag)[D / 16][2],
                                             const float (&freq)[(D / 2 + 31) / 32], long long position,
                                             int quad_col) {
  constexpr int kTrigSlots = (D / 2 + 31) / 32;
  float cos_t[kTrigSlots], sin_t[kTrigSlots];
#pragma unroll
  for (int t = 0; t < kTrigSlots; ++t) rope_cos_sin(position, freq[t], &cos_t[t], &sin_t[t]);
  if constexpr (D >= 32) {
    constexpr int kPartner = D / 32;
#pragma unroll
    for (int kk = 0; kk < kPartner; ++kk) {
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        // Frequencies kk*16 + h*8 + 2*quad_col + {0,1}: slot kk/2 of lanes (kk%2)*16 + h*8 + 2*quad_col + {0,1}.
        const int source = (kk % 2) * 16 + h * 8 + 2 * quad_col;
        const float c0 = __shfl_sync(0xffffffffu, cos_t[kk / 2], source);
        const float s0 = __shfl_sync(0xffffffffu, sin_t[kk / 2], source);
        const float c1 = __shfl_sync(0xffffffffu, cos_t[kk / 2], source + 1);
        const float s1 = __shfl_sync(0xffffffffu, sin_t[kk / 2], source + 1);
        const uint32_t x = q_raw[kk][h], y = q_raw[kk + kPartner][h];
        q_frag[kk][h] = pack_bf16x2(bf16_lo(x) * c0 - bf16_lo(y) * s0, bf16_hi(x) * c1 - bf16_hi(y) * s1);
        q_frag[kk + kPartner][h] = pack_bf16x2(bf16_lo(y) * c0 + bf16_lo(x) * s0, bf16_hi(y) * c1 + bf16_hi(x) * s1);
      }
    }
  } else {
    // D 16: dims 2*quad_col + {0,1} pair with 8 + 2*quad_col + {0,1}: q_frag[0][0] with q_frag[0][1].
    const int source = 2 * quad_col;
    const float c0 = __shfl_sync(0xffffffffu, cos_t[0], source);
    const float s0 = __shfl_sync(0xffffffffu, sin_t[0], source);
    const float c1 = __shfl_sync(0xffffffffu, cos_t[0], source + 1);
    const float s1 = __shfl_sync(0xffffffffu, sin_t[0], source + 1);
    const uint32_t x = q_raw[0][0], y = q_raw[0][1];
    q_frag[0][0] = pack_bf16x2(bf16_lo(x) * c0 - bf16_lo(y) * s0, bf16_hi(x) * c1 - bf16_hi(y) * s1);
    q_frag[0][1] = pack_bf16x2(bf16_lo(y) * c0 + bf16_lo(x) * s0, bf16_hi(y) * c1 + bf16_hi(x) * s1);
  }
}

// This CTA's share of the DecodeParams::l2_prefetch ranges (the grid splits each range evenly),
// as bulk L2 prefetches of up to 16 KB, one per thread in turn. Hopper and newer; a no-op before.
__device__ __forceinline__ void prefetch_share_into_l2(const DecodeParams& p) {
#if __CUDA_ARCH__ >= 900
  constexpr std::size_t kChunk = 16384;
  const std::size_t ctas = std::size_t(gridDim.x) * gridDim.y * gridDim.z;
  const std::size_t cta = blockIdx.x + gridDim.x * (blockIdx.y + std::size_t(gridDim.y) * blockIdx.z);
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    const std::size_t bytes = p.l2_prefetch_bytes[r] & ~std::size_t(15);
    if (p.l2_prefetch[r] == nullptr || bytes == 0) continue;
    const std::size_t share = ((bytes + ctas - 1) / ctas + 15) & ~std::size_t(15);
    const std::size_t from = cta * share, to = from + share < bytes ? from + share : bytes;
    for (std::size_t at = from + threadIdx.x * kChunk; at < to; at += blockDim.x * kChunk) {
      const unsigned size = unsigned(to - at < kChunk ? to - at : kChunk);
      asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;\n" ::"l"(static_cast<const char*>(p.l2_prefetch[r]) + at),
                   "r"(size)
                   : "memory");
    }
  }
#endif
}

// `early` (decode_attention decides; DecodeParams::history_before_wait): the tables, the lazy angle
// inputs and the copies of every unit outside each sequence's last entry are issued before the wait
// for the previous kernel, which may still be writing that entry (this step's new token) and q.
template <int D, int G, bool LAZY, bool COPIES>
__global__ void __launch_bounds__(kDecodeWarps * 32, 2) decode_kernel(DecodeParams p, bool early) {
  constexpr int kStages = decode_stages<D>();
  constexpr int kStageElements = stage_elements<D>();
  constexpr int kSteps = D / 16;  // MMA k-steps of Q·K^T, and 16-dim pairs of P·V n-tiles
  constexpr int kHalf = D / 2;
  constexpr int kTrigSlots = (kHalf + 31) / 32;
  extern __shared__ __align__(16) uint8_t smem[];
  const int split = blockIdx.x, kv_head = blockIdx.y, seq = blockIdx.z;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int row = lane / 4, quad_col = lane % 4;  // this lane's A/C fragment row (group head) and column pair
  __nv_bfloat16* ring = reinterpret_cast<__nv_bfloat16*>(smem) + warp * kStages * kStageElements;
  const uint32_t ring_addr = smem_addr(ring);

  // The query as the A fragment: row `row` (rows >= G are zero), dims kk*16 + 2*quad_col + {0,1}
  // in q_frag[kk][0] and + 8 in q_frag[kk][1]; rows 8..15 of the tile are zero registers.
  const bf16_bits* q_seq = p.q + seq * p.q_row_stride + int64_t(kv_head) * G * D;  // copies: set below
  auto load_query = [&](uint32_t (&frag)[kSteps][2]) {
#pragma unroll
    for (int kk = 0; kk < kSteps; ++kk) {
      frag[kk][0] = frag[kk][1] = 0;
      if (row < G) {
        frag[kk][0] = *reinterpret_cast<const uint32_t*>(q_seq + row * D + kk * 16 + 2 * quad_col);
        frag[kk][1] = *reinterpret_cast<const uint32_t*>(q_seq + row * D + kk * 16 + 8 + 2 * quad_col);
      }
    }
  };
  uint32_t q_frag[kSteps][2];

  // block_size divides 64 (append_table checks), so units per entry is 1, 2 or 4: shifts, not divisions.
  const int unit_shift = p.block_size > 32 ? 2 : p.block_size > 16 ? 1 : 0;
  const int unit_mask = (1 << unit_shift) - 1;
  const int64_t head_stride = int64_t(p.block_size) * D;
  int entry_last = 0, begin = 0, num_units = 0;
  auto find_range = [&] {
    const int entry_first = p.seq_entry_offsets[seq];
    entry_last = p.seq_entry_offsets[seq + 1];
    const int per_split = (entry_last - entry_first + p.num_splits - 1) / p.num_splits;
    begin = entry_first + split * per_split;
    num_units = max(0, min(entry_last, begin + per_split) - begin) << unit_shift;
  };
  // A unit of the sequence's last entry, which the previous kernel may be writing (early calls).
  auto fresh = [&](int unit) { return begin + (unit >> unit_shift) == entry_last - 1; };

  // Copies: each warp's fragment is the query copy of its unit's shift, named by the unit's entry
  // (KvEntry::key_start holds the copy's index); its first unit's entry is the one its first copy
  // reads, so choosing the copy adds no load before the wait.
  int copy_slot = -1;
  auto take_copy = [&](int slot) {
    copy_slot = slot;
    q_seq = p.q_rotated + (int64_t(slot) * p.batch + seq) * p.num_heads * D + int64_t(kv_head) * G * D;
  };
  auto take_first_copy = [&] { take_copy(warp < num_units ? p.entries[begin + (warp >> unit_shift)].key_start : 0); };

  // Lazy, shared rotation: thread t < D/2 forms the angle of frequency t; work item j (two
  // consecutive dims i, i + 1 < D/2 of group head g and their RoPE partners i + D/2, i + 1 + D/2)
  // belongs to thread j mod 128. What each reads (its position, the split's first shift and its
  // frequency; its item's raw query words) is copied into shared memory as the first cp.async group.
  constexpr int kPairItems = G * D / 4;
  constexpr int kItemsPerThread = (kPairItems + kDecodeWarps * 32 - 1) / (kDecodeWarps * 32);
  constexpr int kQStride = rotated_query_stride<D>();
  __nv_bfloat16* q_shared = reinterpret_cast<__nv_bfloat16*>(smem + decode_ring_bytes<D>());
  float* trig = reinterpret_cast<float*>(q_shared + G * kQStride);  // [D/2] cos, then [D/2] sin
  int32_t* angle_inputs = reinterpret_cast<int32_t*>(trig + D);      // [D/2][4]: position, shift, frequency
  auto copy_angle_inputs = [&] {
    if (threadIdx.x < kHalf) {
      int32_t* mine = angle_inputs + threadIdx.x * 4;
      cp_async4(mine, p.q_positions + seq, 4);
      cp_async4(mine + 1, num_units > 0 ? &p.entries[begin].shift : p.q_positions, num_units > 0 ? 4 : 0);
      cp_async4(mine + 2, p.inv_freq + threadIdx.x, 4);
    }
  };
  // The raw query words of this thread's rotation items, into q_shared (rotated in place below).
  auto copy_query_words = [&] {
#pragma unroll
    for (int j = 0; j < kItemsPerThread; ++j) {
      const int item = threadIdx.x + j * kDecodeWarps * 32;
      if (item < kPairItems) {
        const int g = item / (D / 4), dim = (item % (D / 4)) * 2;
        cp_async4(q_shared + g * kQStride + dim, q_seq + g * D + dim, 4);
        cp_async4(q_shared + g * kQStride + dim + kHalf, q_seq + g * D + dim + kHalf, 4);
      }
    }
  };
  // Thread t < D/2: the cos and sin of frequency t for the split's first shift, from its angle inputs.
  auto form_angles = [&] {
    if (threadIdx.x < kHalf) {
      const int32_t* mine = angle_inputs + threadIdx.x * 4;
      rope_cos_sin(static_cast<long long>(mine[0]) - mine[1], __int_as_float(mine[2]), &trig[threadIdx.x],
                   &trig[kHalf + threadIdx.x]);
    }
  };

  // Warp w takes units w, w + 4, ...; the first kStages − 1 are in flight before anything else.
  const uint64_t kv_policy = l2_evict_first_policy();
  uint32_t copy_offset[UnitCopy<D>::kPeriod];
  unit_copy_offsets<D>(lane, copy_offset);
  auto issue = [&](int unit, int stage) {
    const KvEntry ref = p.entries[begin + (unit >> unit_shift)];
    const int64_t base = (int64_t(ref.block) * p.num_kv_heads + kv_head) * head_stride;
    load_unit<D>(ring_addr + stage * (kStageElements * 2), copy_offset, p.k_pool + base, p.v_pool + base,
                 (unit & unit_mask) * kUnitKeys, ref.valid, lane, kv_policy);
  };
  // The prologue's units: all of them (`which` 0), those outside the last entry (1), inside it (2).
  auto issue_prologue = [&](int which) {
#pragma unroll
    for (int s = 0; s < kStages - 1; ++s) {
      const int unit = warp + s * kDecodeWarps;
      if (unit < num_units && (which == 0 || (which == 1) != fresh(unit))) issue(unit, s);
      if (which != 2) cp_async_commit();  // a group a stage; the last entry's units form one group
    }
    if (which == 2) cp_async_commit();
  };
  // cp.async groups, oldest first: lazy angle inputs (+ query words unless early), the prologue's
  // kStages − 1, early calls' group of last-entry units, then one a loop iteration. Early lazy
  // calls also form their angles before the wait: only the query words come after it.
  if (early) {
    find_range();
    if constexpr (LAZY) {
      copy_angle_inputs();
      cp_async_commit();
    }
    issue_prologue(1);
    if constexpr (COPIES) take_first_copy();  // the table is not the previous kernel's to write
    if constexpr (LAZY) {
      cp_async_wait<kStages - 1>();  // the angle inputs, the oldest group
      form_angles();
      __syncthreads();  // the angles, and thread 0's position and shift, for everyone
    }
  }
  prefetch_share_into_l2(p);                 // weights: no dependence on earlier kernels
  wait_previous_kernel_then_release_next();  // q and the pool come from earlier kernels
  if (!early) {
    find_range();
    if constexpr (LAZY) {
      copy_angle_inputs();
      copy_query_words();
      cp_async_commit();
    }
    issue_prologue(0);
    if constexpr (COPIES) take_first_copy();
  }

  long long position = 0;
  int current_shift = 0;
  if constexpr (LAZY) {
    // Under the prologue's copies: the CTA's one rotation, for the shift of its first entry.
    if (!early) {
      cp_async_wait<kStages - 1>();  // the metadata group, the oldest
      form_angles();
      __syncthreads();  // the angles, and thread 0's position and shift, for everyone
    }
    position = angle_inputs[0];
    current_shift = angle_inputs[1];
#pragma unroll
    for (int j = 0; j < kItemsPerThread; ++j) {
      const int item = threadIdx.x + j * kDecodeWarps * 32;
      if (item < kPairItems) {  // early: read here; else the words this thread copied: rotated in place
        const int g = item / (D / 4), dim = (item % (D / 4)) * 2;
        const float c0 = trig[dim], c1 = trig[dim + 1], s0 = trig[kHalf + dim], s1 = trig[kHalf + dim + 1];
        uint32_t* lo = reinterpret_cast<uint32_t*>(q_shared + g * kQStride + dim);
        uint32_t* hi = reinterpret_cast<uint32_t*>(q_shared + g * kQStride + dim + kHalf);
        const uint32_t* raw = reinterpret_cast<const uint32_t*>(q_seq + g * D + dim);
        const uint32_t x = early ? raw[0] : *lo, y = early ? raw[kHalf / 2] : *hi;
        *lo = pack_bf16x2(bf16_lo(x) * c0 - bf16_lo(y) * s0, bf16_hi(x) * c1 - bf16_hi(y) * s1);
        *hi = pack_bf16x2(bf16_lo(y) * c0 + bf16_lo(x) * s0, bf16_hi(y) * c1 + bf16_hi(x) * s1);
      }
    }
    __syncthreads();
#pragma unroll
    for (int kk = 0; kk < kSteps; ++kk) {
      q_frag[kk][0] = q_frag[kk][1] = 0;
      if (row < G) {
        q_frag[kk][0] = *reinterpret_cast<const uint32_t*>(q_shared + row * kQStride + kk * 16 + 2 * quad_col);
        q_frag[kk][1] = *reinterpret_cast<const uint32_t*>(q_shared + row * kQStride + kk * 16 + 8 + 2 * quad_col);
      }
    }
  } else {
    load_query(q_frag);
  }
  if (early) issue_prologue(2);  // after the query's loads, which the first unit waits for
  // Lazy: a warp whose unit has another shift than the last re-rotates its own fragment from the
  // raw query (documents shorter than a split; rare in long contexts).
  auto rotate_warp_query = [&](int shift) {
    uint32_t q_raw[kSteps][2];
    load_query(q_raw);
    float freq[kTrigSlots];
#pragma unroll
    for (int t = 0; t < kTrigSlots; ++t) {
      const int f = lane + 32 * t;
      freq[t] = f < kHalf ? p.inv_freq[f] : 0.0f;
    }
    rotate_query<D>(q_raw, q_frag, freq, position - shift, quad_col);
  };
  const float score_scale = rsqrtf(float(D)) * kLog2e;  // scores kept in the log2 domain
  float o[D / 8][4];
#pragma unroll
  for (int i = 0; i < D / 8; ++i) o[i][0] = o[i][1] = o[i][2] = o[i][3] = 0.0f;
  float row_max = -INFINITY, row_sum = 0.0f;  // of row `row`, quad-uniform max, lane-partial sum
  // ldmatrix row addresses: K (B of Q·K^T, non-transposed) and V (B of P·V, transposed), as byte
  // offsets into a stage. A swizzle flips only a chunk's low three bits, so k-steps kk and kk + 4
  // read 128 bytes apart: at most four offsets a lane, the rest folded into the instructions' offsets.
  const int k_key = lane % 8 + (lane / 16) * 8, k_half = (lane / 8) % 2;
  const int v_key = lane % 8 + ((lane / 8) % 2) * 8, v_half = lane / 16;
  constexpr int kOffsets = kSteps < 4 ? kSteps : 4;
  uint32_t k_offset[kOffsets], v_offset[kOffsets];
#pragma unroll
  for (int j = 0; j < kOffsets; ++j) {
    k_offset[j] = tile_offset<D>(k_key, j * 2 + k_half) * 2;
    v_offset[j] = (kUnitKeys * D + tile_offset<D>(v_key, j * 2 + v_half)) * 2;
  }

  int stage = 0;
  for (int i = 0;; ++i) {
    const int unit = warp + i * kDecodeWarps;
    if (unit >= num_units) break;
    const int ahead = unit + (kStages - 1) * kDecodeWarps;
    if (ahead < num_units) issue(ahead, stage == 0 ? kStages - 1 : stage - 1);
    cp_async_commit();
    const KvEntry ref = p.entries[begin + (unit >> unit_shift)];
    if constexpr (LAZY) {
      if (ref.shift != current_shift) {  // one call site keeps the lazy kernel's code small
        rotate_warp_query(ref.shift);
        current_shift = ref.shift;
      }
    }
    if constexpr (COPIES) {
      if (ref.key_start != copy_slot) {
        take_copy(ref.key_start);
        load_query(q_frag);
      }
    }
    const int keys_valid = ref.valid - (unit & unit_mask) * kUnitKeys;
    if (early && fresh(unit)) {
      cp_async_wait<0>();  // its group came after the prologue's; it is this warp's last unit anyway
    } else {
      cp_async_wait<kStages - 1>();  // this unit's group has landed (for this lane)
    }
    __syncwarp();                  // ... and for every lane of the warp
    const uint32_t stage_addr = ring_addr + stage * (kStageElements * 2);

    float s[2][4] = {{0.0f, 0.0f, 0.0f, 0.0f}, {0.0f, 0.0f, 0.0f, 0.0f}};
#pragma unroll
    for (int kk = 0; kk < kSteps; ++kk) {
      uint32_t b[4];
      ldmatrix_x4(b, stage_addr + k_offset[kk % kOffsets] + (kk / kOffsets) * 128);
      const uint32_t a[4] = {q_frag[kk][0], 0u, q_frag[kk][1], 0u};
      mma_bf16_16816(s[0], a, b[0], b[1]);
      mma_bf16_16816(s[1], a, b[2], b[3]);
    }
    // Row `row` holds keys nt*8 + 2*quad_col + e in s[nt][e]; empty slots are masked.
    float unit_max = -INFINITY;
#pragma unroll
    for (int nt = 0; nt < 2; ++nt) {
#pragma unroll
      for (int e = 0; e < 2; ++e) {
        const int key = nt * 8 + 2 * quad_col + e;
        const float value = key < keys_valid ? s[nt][e] * score_scale : -INFINITY;
        s[nt][e] = value;
        unit_max = fmaxf(unit_max, value);
      }
    }
    unit_max = fmaxf(unit_max, __shfl_xor_sync(0xffffffffu, unit_max, 1));
    unit_max = fmaxf(unit_max, __shfl_xor_sync(0xffffffffu, unit_max, 2));
    const float new_max = fmaxf(row_max, unit_max);
    const float base_max = new_max == -INFINITY ? 0.0f : new_max;
    const float correction = exp2f(row_max - base_max);
    row_max = new_max;
    row_sum *= correction;
#pragma unroll
    for (int nt = 0; nt < 2; ++nt) {
#pragma unroll
      for (int e = 0; e < 2; ++e) {
        s[nt][e] = exp2f(s[nt][e] - base_max);
        row_sum += s[nt][e];
      }
    }
#pragma unroll
    for (int dt = 0; dt < D / 8; ++dt) {
      o[dt][0] *= correction;
      o[dt][1] *= correction;
    }
    // P (rows 8..15 zero) as the A operand; V through ldmatrix.trans.
    const uint32_t a[4] = {pack_bf16x2(s[0][0], s[0][1]), 0u, pack_bf16x2(s[1][0], s[1][1]), 0u};
#pragma unroll
    for (int dp = 0; dp < kSteps; ++dp) {
      uint32_t b[4];
      ldmatrix_x4_trans(b, stage_addr + v_offset[dp % kOffsets] + (dp / kOffsets) * 128);
      mma_bf16_16816(o[2 * dp], a, b[0], b[1]);
      mma_bf16_16816(o[2 * dp + 1], a, b[2], b[3]);
    }
    __syncwarp();  // every lane is done with this stage before it is refilled
    stage = stage + 1 == kStages ? 0 : stage + 1;
  }
  cp_async_wait<0>();

  // Merge the warps through shared memory (the rings are free once every warp is here).
  row_sum += __shfl_xor_sync(0xffffffffu, row_sum, 1);
  row_sum += __shfl_xor_sync(0xffffffffu, row_sum, 2);
  float* merge_acc = reinterpret_cast<float*>(smem);            // [warps][8][D]
  float* merge_ml = merge_acc + kDecodeWarps * 8 * D;           // [warps][8][2]
  __syncthreads();
  if (row < G) {
#pragma unroll
    for (int dt = 0; dt < D / 8; ++dt) {
      *reinterpret_cast<float2*>(merge_acc + (warp * 8 + row) * D + dt * 8 + 2 * quad_col) =
          make_float2(o[dt][0], o[dt][1]);
    }
    if (quad_col == 0) {
      merge_ml[(warp * 8 + row) * 2] = row_max;
      merge_ml[(warp * 8 + row) * 2 + 1] = row_sum;
    }
  }
  __syncthreads();
  for (int idx = threadIdx.x; idx < G * D; idx += blockDim.x) {
    const int g = idx / D, d = idx % D;
    float total_max = -INFINITY;
#pragma unroll
    for (int w = 0; w < kDecodeWarps; ++w) total_max = fmaxf(total_max, merge_ml[(w * 8 + g) * 2]);
    const float base_max = total_max == -INFINITY ? 0.0f : total_max;
    float total_sum = 0.0f, total_acc = 0.0f;
#pragma unroll
    for (int w = 0; w < kDecodeWarps; ++w) {
      const float weight = exp2f(merge_ml[(w * 8 + g) * 2] - base_max);
      total_sum += merge_ml[(w * 8 + g) * 2 + 1] * weight;
      total_acc += merge_acc[(w * 8 + g) * D + d] * weight;
    }
    const int64_t out_row = int64_t(seq) * p.num_heads + kv_head * G + g;
    if (p.num_splits == 1) {
      const float value = total_sum > 0.0f ? total_acc / total_sum : 0.0f;
      reinterpret_cast<__nv_bfloat16*>(p.out)[out_row * D + d] = __float2bfloat16(value);
    } else {
      const int64_t slot = out_row * p.num_splits + split;
      p.partial_o[slot * D + d] = total_acc;
      if (d == 0) {
        p.partial_ml[slot * 2] = total_max;
        p.partial_ml[slot * 2 + 1] = total_sum;
      }
    }
  }
}

bool programmatic_launch_on() {
  return !tool_switches().no_programmatic_launch && current_kernel_path().programmatic_launch;
}

// Launches with programmatic stream serialization, so the kernel's launch and CTA placement
// overlap the previous kernel's tail (the kernels wait for it on the device); a launch the runtime
// refuses with this attribute is retried as a plain launch.
template <typename... Params, typename... Args>
void launch_programmatic(void (*kernel)(Params...), dim3 grid, dim3 block, int smem, cudaStream_t stream,
                         Args... args) {
  cudaLaunchConfig_t config = {};
  config.gridDim = grid;
  config.blockDim = block;
  config.dynamicSmemBytes = smem;
  config.stream = stream;
  cudaLaunchAttribute attribute[1];
  attribute[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attribute[0].val.programmaticStreamSerializationAllowed = 1;
  config.attrs = attribute;
  config.numAttrs = programmatic_launch_on() ? 1 : 0;
  if (cudaLaunchKernelEx(&config, kernel, args...) != cudaSuccess) {
    (void)cudaGetLastError();  // clear the refusal, then launch the ordinary way
    kernel<<<grid, block, smem, stream>>>(args...);
  }
  LAZYSCOPE_CUDA_LAUNCH_CHECK();
}

template <int D, int G, bool LAZY, bool COPIES>
void launch_decode(const DecodeParams& p, cudaStream_t stream) {
  constexpr int kSmem = decode_smem_bytes<D, G, LAZY>();
  static int ctas_per_sm = 0;  // one attribute call per instantiation
  if (ctas_per_sm == 0) {
    LAZYSCOPE_CUDA_CHECK(
        cudaFuncSetAttribute(decode_kernel<D, G, LAZY, COPIES>, cudaFuncAttributeMaxDynamicSharedMemorySize, kSmem));
    LAZYSCOPE_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&ctas_per_sm, decode_kernel<D, G, LAZY, COPIES>,
                                                                       kDecodeWarps * 32, kSmem));
    ctas_per_sm = std::max(ctas_per_sm, 1);
  }
  // Copies before the wait pay off only where every CTA starts while the previous kernel runs: a
  // grid of one wave, launched programmatically. (A later wave's lazy CTAs would read their query
  // behind their own copies.)
  const long long ctas = (long long)p.num_splits * p.num_kv_heads * p.batch;
  const bool early =
      p.history_before_wait && programmatic_launch_on() && ctas <= (long long)ctas_per_sm * detail::cached_sm_count();
  launch_programmatic(decode_kernel<D, G, LAZY, COPIES>, dim3(p.num_splits, p.num_kv_heads, p.batch),
                      dim3(kDecodeWarps * 32), kSmem, stream, p, early);
}

template <int D, int G>
void dispatch_lazy(const DecodeParams& p, cudaStream_t stream) {
  if (p.lazy && p.q_rotated != nullptr) {
    launch_decode<D, G, false, true>(p, stream);
  } else if (p.lazy) {
    launch_decode<D, G, true, false>(p, stream);
  } else {
    launch_decode<D, G, false, false>(p, stream);
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

// Split-KV merge for decode: one warp a row (batch x heads rows are few, splits many). A split's
// row is D/4 float4 pieces, so a warp reads 32/(D/4) splits side by side, and each lane keeps
// its pieces of 32 splits (and their maxima) in flight at once. The first 32 are loaded together
// with the lanes' (max, sum) pairs, before their reduction, since the pieces do not depend on it:
// a row of up to 32 splits costs one round trip to L2. The lane groups' sums then meet through
// shuffles.
template <int D>
__global__ void __launch_bounds__(128) decode_combine_kernel(const float* partial_o, const float* partial_ml, int rows,
                                                             int splits, __nv_bfloat16* out) {
  constexpr int kLanes = D / 4;           // lanes holding a float4 of a split's row
  constexpr int kGroups = 32 / kLanes;    // splits read side by side
  constexpr int kInFlight = 32 / kGroups;  // splits a lane has in flight
  constexpr int kChunk = kInFlight * kGroups;  // 32 splits a round trip
  const int64_t row = (int64_t(blockIdx.x) * blockDim.x + threadIdx.x) / 32;
  const int lane = threadIdx.x % 32;
  wait_previous_kernel_then_release_next();  // the partials come from the decode kernel
  if (row >= rows) return;  // whole warps leave: no collective below misses a lane
  const float* ml = partial_ml + row * splits * 2;
  const int group = lane / kLanes, dim = (lane % kLanes) * 4;
  const float* po = partial_o + row * splits * D + dim;
  float4 piece[kInFlight];
  float piece_max[kInFlight];
  auto load_chunk = [&](int first) {
#pragma unroll
    for (int j = 0; j < kInFlight; ++j) {
      const int s = first + j * kGroups + group;
      const bool ok = s < splits;
      piece[j] = ok ? *reinterpret_cast<const float4*>(po + int64_t(s) * D) : make_float4(0, 0, 0, 0);
      piece_max[j] = ok ? ml[2 * s] : -INFINITY;
    }
  };
  load_chunk(0);
  float max_all = -INFINITY;
  for (int s = lane; s < splits; s += 32) max_all = fmaxf(max_all, ml[2 * s]);
#pragma unroll
  for (int offset = 16; offset > 0; offset /= 2) max_all = fmaxf(max_all, __shfl_xor_sync(0xffffffffu, max_all, offset));
  const float base = max_all == -INFINITY ? 0.0f : max_all;
  float sum = 0.0f;
  for (int s = lane; s < splits; s += 32) sum += ml[2 * s + 1] * exp2f(ml[2 * s] - base);  // empty split: weight 0
#pragma unroll
  for (int offset = 16; offset > 0; offset /= 2) sum += __shfl_xor_sync(0xffffffffu, sum, offset);
  const float inv_sum = sum > 0.0f ? 1.0f / sum : 0.0f;

  float4 acc = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
  for (int first = 0;;) {
#pragma unroll
    for (int j = 0; j < kInFlight; ++j) {
      const float weight = exp2f(piece_max[j] - base) * inv_sum;  // past the last split: max −inf, weight 0
      acc.x += piece[j].x * weight;
      acc.y += piece[j].y * weight;
      acc.z += piece[j].z * weight;
      acc.w += piece[j].w * weight;
    }
    first += kChunk;
    if (first >= splits) break;
    load_chunk(first);
  }
#pragma unroll
  for (int offset = kLanes; offset < 32; offset *= 2) {
    acc.x += __shfl_xor_sync(0xffffffffu, acc.x, offset);
    acc.y += __shfl_xor_sync(0xffffffffu, acc.y, offset);
    acc.z += __shfl_xor_sync(0xffffffffu, acc.z, offset);
    acc.w += __shfl_xor_sync(0xffffffffu, acc.w, offset);
  }
  if (lane < kLanes) {
    uint2 packed;
    packed.x = pack_bf16x2(acc.x, acc.y);
    packed.y = pack_bf16x2(acc.z, acc.w);
    *reinterpret_cast<uint2*>(out + row * D + dim) = packed;
  }
}

template <int D>
void launch_decode_combine(const DecodeParams& p, cudaStream_t stream) {
  const int rows = p.batch * p.num_heads;
  constexpr int kRowsPerCta = 4;  // a warp a row
  launch_programmatic(decode_combine_kernel<D>, dim3((rows + kRowsPerCta - 1) / kRowsPerCta), dim3(32 * kRowsPerCta),
                      0, stream, static_cast<const float*>(p.partial_o), static_cast<const float*>(p.partial_ml), rows,
                      p.num_splits, reinterpret_cast<__nv_bfloat16*>(p.out));
}

template <int D>
void dispatch_decode(const DecodeParams& p, cudaStream_t stream) {
  dispatch_group<D>(p, stream);
  if (p.num_splits > 1) launch_decode_combine<D>(p, stream);
}

}  // namespace

int decode_num_splits(int batch, int num_kv_heads, int max_entries, int sm_count) {
  const int ctas = batch * num_kv_heads;
  // Two resident CTAs per SM (D128: 96 KB of stage rings and <= 180 registers a thread; smaller
  // heads fit more, so this is the conservative count). Every CTA streams its share at the same
  // rate, so one nearly full wave is as good as several, and each extra wave or split costs a
  // prologue's latency (and splits > 1 a combine pass): take the fewest splits whose last wave is
  // >= 95 % full, else the fullest; each split keeps >= 4 blocks (a unit for every warp).
  const int capacity = 2 * sm_count;
  const int max_splits = std::max(1, std::min(128, max_entries / 4));
  int best = 1;
  double best_efficiency = 0.0;
  for (int splits = 1; splits <= max_splits; ++splits) {
    const int total = ctas * splits;
    const int waves = (total + capacity - 1) / capacity;
    const double efficiency = double(total) / (double(waves) * capacity);
    if (efficiency >= 0.95) return splits;
    if (efficiency > best_efficiency + 1e-9) {
      best_efficiency = efficiency;
      best = splits;
    }
  }
  return best;
}

int decode_kernel_binary_version() {
  cudaFuncAttributes attributes{};
  LAZYSCOPE_CUDA_CHECK(cudaFuncGetAttributes(&attributes, decode_kernel<128, 4, true, false>));
  return attributes.binaryVersion;
}

void decode_attention(const DecodeParams& p, cudaStream_t stream) {
  if (p.batch == 0) return;
  if (p.num_kv_heads <= 0 || p.num_heads % p.num_kv_heads != 0) {
    throw Error("cuda decode attention: num_heads must be a multiple of num_kv_heads");
  }
  if (p.num_splits > 1 && (p.partial_o == nullptr || p.partial_ml == nullptr)) {
    throw Error("cuda decode attention: split workspace missing");
  }
  for (int r = 0; r < 2; ++r) {
    if (reinterpret_cast<std::uintptr_t>(p.l2_prefetch[r]) % 16 != 0) {
      throw Error("cuda decode attention: L2 prefetch range " + std::to_string(r) + " is not 16-byte aligned");
    }
  }
  if (p.head_dim == 128) {
    dispatch_decode<128>(p, stream);
  } else if (p.head_dim == 64) {
    dispatch_decode<64>(p, stream);
  } else if (p.head_dim == 32) {
    dispatch_decode<32>(p, stream);
  } else if (p.head_dim == 16) {
    dispatch_decode<16>(p, stream);
  } else {
    throw Error("cuda decode attention: head_dim " + std::to_string(p.head_dim) + " (supported: 16, 32, 64, 128)");
  }
}

}  // namespace lazyscope::cuda

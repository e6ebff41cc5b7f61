#pragma once
// The paged prefill attention kernel, shared by attention_prefill.cu (mma.sync, every arch) and
// attention_prefill_sm90a.cu (wgmma, sm_90a only). A CTA owns 64 or 128 rows of (query token,
// group head) pairs of one KV head, so the GQA group shares every K/V tile; K/V tiles of 64 keys
// (consecutive blocks of one shift) are double-buffered through cp.async, their block-table
// metadata staged in shared memory tiles ahead (no dependent global reads before a copy), one
// barrier per tile; only tiles with empty slots or past the CTA's causal limit are masked; online
// softmax; optional split along the KV tiles. Lazy: a pre-pass rotates the query once per distinct
// shift δ by (m − δ); lazy splits never cross a shift change, so a CTA stages its one rotated copy
// up front and then runs the plain kernel's loop unchanged.
#include <climits>
#include <cstdint>

#include "kernels/cuda/attention.h"
#include "kernels/cuda/device_util.cuh"
#include "kernels/cuda/wgmma.cuh"

namespace lazyscope::cuda {
namespace {

using namespace detail;

constexpr int kWarps = 4;                 // the mma.sync kernel's warps
constexpr int kKeys = kPrefillTileKeys;   // keys per tile

// WG: the wgmma kernel (sm_90a), two warpgroups of 4 warps, each owning 64 rows.
template <bool WG>
constexpr int kernel_warps() {
  return WG ? 8 : kWarps;
}

// 2^x on the SFU alone (ex2.approx.ftz): exp2f adds a denormal-range fix-up (compare, two
// multiplies) per call; softmax weights below 2^-126 of the row maximum may flush to zero.
__device__ __forceinline__ float fast_exp2(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}

template <int MT, bool WG = false>
constexpr int rows_per_cta() {
  return 16 * MT * kernel_warps<WG>();
}

// Tile rows: padded by 16 bytes for ldmatrix (mma.sync), or unpadded 128-byte-swizzled halves
// of 64 dims (wgmma), whose tiles start 1024-byte aligned (one alignment pad up front).
template <int D, bool WG>
constexpr int tile_row_elements() {
  return WG ? D : D + 8;
}
template <int D, int MT, bool WG = false>
constexpr int smem_bytes() {
  return (rows_per_cta<MT, WG>() + 4 * kKeys) * tile_row_elements<D, WG>() * 2 + 2 * kKeys * int(sizeof(KvEntry)) +
         4 * int(sizeof(KvTile)) + 2 * kKeys * 4 + rows_per_cta<MT, WG>() * 4 + (WG ? 1024 : 0);
}

// Element (row, dim) of a tile of `rows` rows. wgmma: [D/64][rows][64], the 16-byte chunks of each
// 128-byte row XOR-ed with row % 8 (the hardware's 128-byte swizzle, with 8-row groups 1024 bytes apart).
template <int D, bool WG>
__device__ __forceinline__ int tile_at(int row, int dim, int rows) {
  if constexpr (WG) {
    return (dim / 64) * rows * 64 + row * 64 + ((((dim % 64) / 8) ^ (row & 7)) * 8) + dim % 8;
  } else {
    return row * tile_row_elements<D, WG>() + dim;
  }
}

// What one CTA does: its KV head, split, first row and range of K/V tiles. Called by all
// kThreads threads (the visible-tile count is a CTA-wide reduction).
struct CtaWork {
  int kv_head, split, row0, tile_begin, tile_end;
};

// Row tile (x) and KV head (y) of work item `linear` of row_tiles x num_kv_heads: heaviest causal
// row tiles first. When every head's K/V fits the L2 comfortably the order runs across heads (row
// tile major: the longest items of every head start in the first wave, a near-even finish), else
// head by head (one head's K/V hot at a time). Measured: causal 4K (16.8 MB) 518 -> 456 µs;
// causal 8K (33.5 MB) the same either way.
template <int D>
__device__ __forceinline__ int2 item_tile_head(const PrefillParams& p, int linear, int row_tiles) {
  const bool across_heads = int64_t(p.num_kv_heads) * (p.prior + p.n) * D * 4 <= (int64_t(32) << 20);
  return across_heads ? make_int2(row_tiles - 1 - linear / p.num_kv_heads, linear % p.num_kv_heads)
                      : make_int2(row_tiles - 1 - linear % row_tiles, linear / row_tiles);
}

// kSplitTiles: each split's tile count a multiple of it (the warp-specialised kernel's two-tile
// steps: an odd split would end in a step of one tile, which costs a whole step).
template <int D, bool LAZY, int kThreads, int kSplitTiles = 1>
__device__ __forceinline__ CtaWork cta_work(const PrefillParams& p, int rows_per_cta) {
  const int group_size = p.num_heads / p.num_kv_heads;
  // CTAs start in (x, y) order, x the row tile, y the KV head.
  const int2 tile_head = item_tile_head<D>(p, blockIdx.x + gridDim.x * blockIdx.y, gridDim.x);
  CtaWork work;
  work.kv_head = tile_head.y;
  work.split = blockIdx.z;
  const int rows_total = p.n * group_size;
  work.row0 = tile_head.x * rows_per_cta;

  // Tiles visible to any row of this CTA, then this split's share of them.
  const int last_token = (min(rows_total, work.row0 + rows_per_cta) - 1) / group_size;
  const int tile_key_limit = p.prior + last_token;
  // visible_tiles = tiles whose first key is <= tile_key_limit (key_start ascends, tile 0 starts at
  // key 0). Counted by the whole CTA: one sample per thread at a stride, then one per tile of the
  // bucket the boundary falls in: two round trips to memory instead of log2(num_tiles) dependent ones.
  int visible_tiles;
  const int tid = threadIdx.x;
  if (p.num_tiles <= kThreads) {
    visible_tiles = __syncthreads_count(tid < p.num_tiles && p.tiles[tid].key_start <= tile_key_limit);
  } else if (p.num_tiles <= kThreads * kThreads) {
    const int stride = (p.num_tiles + kThreads - 1) / kThreads;
    const int samples =
        __syncthreads_count(tid * stride < p.num_tiles && p.tiles[tid * stride].key_start <= tile_key_limit);
    const int base = (samples - 1) * stride;  // tile `base` is visible (samples >= 1: tile 0 always is)
    visible_tiles = base + __syncthreads_count(tid < stride && base + tid < p.num_tiles &&
                                               p.tiles[base + tid].key_start <= tile_key_limit);
  } else {
    int lo = 0, hi = p.num_tiles;
    while (lo < hi) {
      const int mid = (lo + hi) / 2;
      if (p.tiles[mid].key_start <= tile_key_limit) lo = mid + 1; else hi = mid;
    }
    visible_tiles = lo;
  }
  if constexpr (LAZY) {
    // Lazy splits never cross a shift run (host-built ranges), so one query copy serves each CTA.
    work.tile_begin = p.split_ranges[2 * work.split];
    work.tile_end = min(visible_tiles, p.split_ranges[2 * work.split + 1]);
  } else {
    const int per_split = (visible_tiles + p.num_splits * kSplitTiles - 1) / (p.num_splits * kSplitTiles) * kSplitTiles;
    work.tile_begin = work.split * per_split;
    work.tile_end = min(visible_tiles, work.tile_begin + per_split);
  }
  return work;
}

// 1/sqrt(D) in the log2 domain, a compile-time immediate (one register fewer in the loop).
template <int D>
constexpr float score_scale() {
  static_assert(D == 16 || D == 32 || D == 64 || D == 128, "head_dim 16, 32, 64 or 128");
  return (D == 16 ? 0.25f : D == 32 ? 0.17677669529663688f : D == 64 ? 0.125f : 0.08838834764831845f) * kLog2e;
}

// part[h][0] = op over part[h][0..N) for both halves, as a tree of pairs (i, i + width), the widths
// halving; constant trip counts, so nvcc unrolls it fully (the loop over `i < width` it left partly
// rolled at N 16, with part in local memory).
template <int N, typename Op>
__device__ __forceinline__ void fold_pairs(float (&part)[2][N], Op op) {
#pragma unroll
  for (int level = 0; (N / 2) >> level >= 1; ++level) {
    const int width = (N / 2) >> level;
#pragma unroll
    for (int i = 0; i < N / 2; ++i) {
      if (i < width) {
        part[0][i] = op(part[0][i], part[0][i + width]);
        part[1][i] = op(part[1][i], part[1][i + width]);
      }
    }
  }
}

// Online softmax of one tile's scores (raw QK^T in s; MT 16-row tiles of a warp whose first row
// in the CTA is warp_row0): new row maxima, the factor the accumulators must be rescaled by
// (`correction`), the weights in place of the scores, the updated row sums. kMask applies empty
// slots (keys INT_MAX) and each row's causal limit (row_key_limit) per element. Straight-line
// phases over the row tiles (so their latency chains interleave); maxima and sums are trees over
// the 8-column groups (depth 4, not 16-long dependent chains: with 8 warps an SM the loop is
// latency-bound). The scale is folded into the exponent (FFMA). kCols: the columns of s (one key
// tile, or a step of two: the warp-specialised kernel), keys holding one key per column.
template <int D, int MT, bool kMask, int kCols = kKeys>
__device__ __forceinline__ void softmax_scores(float (&s)[MT][kCols / 8][4], const int* keys, const int* row_key_limit,
                                               int warp_row0, float (&row_max)[MT][2], float (&row_sum)[MT][2],
                                               float (&correction)[MT][2]) {
  constexpr float kScale = score_scale<D>();
  const int lane = threadIdx.x % 32, quad_row = lane / 4, quad_col = lane % 4;
  float base_max[MT][2];
#pragma unroll
  for (int mt = 0; mt < MT; ++mt) {
    int key_limit[2] = {0, 0};
    if constexpr (kMask) {
      key_limit[0] = row_key_limit[warp_row0 + mt * 16 + quad_row];
      key_limit[1] = row_key_limit[warp_row0 + mt * 16 + quad_row + 8];
    }
    float part[2][kCols / 8];
#pragma unroll
    for (int nt = 0; nt < kCols / 8; ++nt) {
      if constexpr (kMask) {
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const int key = keys[nt * 8 + quad_col * 2 + (e & 1)];
          if (key > key_limit[e >> 1]) s[mt][nt][e] = -INFINITY;
        }
      }
      part[0][nt] = fmaxf(s[mt][nt][0], s[mt][nt][1]);
      part[1][nt] = fmaxf(s[mt][nt][2], s[mt][nt][3]);
    }
    if constexpr (kCols == kKeys) {
#pragma unroll
      for (int width = kKeys / 16; width >= 1; width /= 2) {
#pragma unroll
        for (int i = 0; i < width; ++i) {
          part[0][i] = fmaxf(part[0][i], part[0][i + width]);
          part[1][i] = fmaxf(part[1][i], part[1][i + width]);
        }
      }
    } else {
      fold_pairs<kCols / 8>(part, [](float a, float b) { return fmaxf(a, b); });
    }
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      float tile_max = part[half][0];
      tile_max = fmaxf(tile_max, __shfl_xor_sync(0xffffffffu, tile_max, 1));
      tile_max = fmaxf(tile_max, __shfl_xor_sync(0xffffffffu, tile_max, 2));
      const float new_max = fmaxf(row_max[mt][half], tile_max * kScale);  // log2 domain
      base_max[mt][half] = new_max == -INFINITY ? 0.0f : new_max;
      correction[mt][half] = fast_exp2(row_max[mt][half] - base_max[mt][half]);
      row_max[mt][half] = new_max;
    }
  }
#pragma unroll
  for (int mt = 0; mt < MT; ++mt) {
    float part[2][kCols / 8];
#pragma unroll
    for (int nt = 0; nt < kCols / 8; ++nt) {
#pragma unroll
      for (int e = 0; e < 4; ++e) s[mt][nt][e] = fast_exp2(fmaf(s[mt][nt][e], kScale, -base_max[mt][e >> 1]));
      part[0][nt] = s[mt][nt][0] + s[mt][nt][1];
      part[1][nt] = s[mt][nt][2] + s[mt][nt][3];
    }
    if constexpr (kCols == kKeys) {
#pragma unroll
      for (int width = kKeys / 16; width >= 1; width /= 2) {
#pragma unroll
        for (int i = 0; i < width; ++i) {
          part[0][i] += part[0][i + width];
          part[1][i] += part[1][i + width];
        }
      }
    } else {
      fold_pairs<kCols / 8>(part, [](float a, float b) { return a + b; });
    }
    row_sum[mt][0] = fmaf(row_sum[mt][0], correction[mt][0], part[0][0]);
    row_sum[mt][1] = fmaf(row_sum[mt][1], correction[mt][1], part[1][0]);
  }
}

// Rescales the accumulators by the softmax corrections. Once the row maxima settle (most tiles
// of a long row) every correction is exactly 1: skipped when the whole warp agrees.
template <int D, int MT>
__device__ __forceinline__ void rescale_rows(float (&o)[MT][D / 8][4], const float (&correction)[MT][2]) {
  bool rescale = false;
#pragma unroll
  for (int mt = 0; mt < MT; ++mt) rescale = rescale || correction[mt][0] != 1.0f || correction[mt][1] != 1.0f;
  if (__any_sync(0xffffffffu, rescale)) {
#pragma unroll
    for (int mt = 0; mt < MT; ++mt) {
#pragma unroll
      for (int dt = 0; dt < D / 8; ++dt) {
        o[mt][dt][0] *= correction[mt][0];
        o[mt][dt][1] *= correction[mt][0];
        o[mt][dt][2] *= correction[mt][1];
        o[mt][dt][3] *= correction[mt][1];
      }
    }
  }
}

// P as the A operand of the P·V product (bf16 pairs in the mma.sync A-fragment layout) from one
// 16-row tile's weights (kCols columns).
template <int kCols = kKeys>
__device__ __forceinline__ void pack_weights(const float (&s)[kCols / 8][4], uint32_t (&a)[kCols / 16][4]) {
#pragma unroll
  for (int kk = 0; kk < kCols / 16; ++kk) {
    a[kk][0] = pack_bf16x2(s[2 * kk][0], s[2 * kk][1]);
    a[kk][1] = pack_bf16x2(s[2 * kk][2], s[2 * kk][3]);
    a[kk][2] = pack_bf16x2(s[2 * kk + 1][0], s[2 * kk + 1][1]);
    a[kk][3] = pack_bf16x2(s[2 * kk + 1][2], s[2 * kk + 1][3]);
  }
}

// Epilogue of one warp's 16-row tile whose first row is `row16`: finishes the row sums across
// the quad, then writes the rows or the split partials.
template <int D>
__device__ __forceinline__ void store_rows(const PrefillParams& p, const float (&o)[D / 8][4], const float (&row_max)[2],
                                           float (&row_sum)[2], int row16, int kv_head, int split) {
  const int group_size = p.num_heads / p.num_kv_heads;
  const int lane = threadIdx.x % 32, quad_row = lane / 4, quad_col = lane % 4;
#pragma unroll
  for (int half = 0; half < 2; ++half) {
    row_sum[half] += __shfl_xor_sync(0xffffffffu, row_sum[half], 1);
    row_sum[half] += __shfl_xor_sync(0xffffffffu, row_sum[half], 2);
    const int row = row16 + quad_row + half * 8;
    const int token = row / group_size;
    if (token >= p.n) continue;  // row past rows_total (not kept live across the loop)
    const int64_t out_row = int64_t(token) * p.num_heads + kv_head * group_size + row % group_size;
    if (p.num_splits == 1) {
      const float inv_sum = row_sum[half] > 0.0f ? 1.0f / row_sum[half] : 0.0f;
      __nv_bfloat16* out = reinterpret_cast<__nv_bfloat16*>(p.out) + out_row * D;
#pragma unroll
      for (int dt = 0; dt < D / 8; ++dt) {
        *reinterpret_cast<uint32_t*>(out + dt * 8 + quad_col * 2) =
            pack_bf16x2(o[dt][half * 2] * inv_sum, o[dt][half * 2 + 1] * inv_sum);
      }
    } else {
      const int64_t slot = out_row * p.num_splits + split;
      float* out = p.partial_o + slot * D;
#pragma unroll
      for (int dt = 0; dt < D / 8; ++dt) {
        *reinterpret_cast<float2*>(out + dt * 8 + quad_col * 2) = make_float2(o[dt][half * 2], o[dt][half * 2 + 1]);
      }
      if (quad_col == 0) {
        p.partial_ml[slot * 2] = row_max[half];
        p.partial_ml[slot * 2 + 1] = row_sum[half];
      }
    }
  }
}

// MT: 16-row MMA tiles per warp (2 halves the shared-memory traffic per MMA of K and V).
// WG (MT 1, D 64 or 128): QK^T and P·V as wgmma of each warpgroup's 64 rows (sm_90a only).
template <int D, int MT, bool LAZY, bool WG>
__device__ __forceinline__ void prefill_body(const PrefillParams& p) {
  constexpr int kW = kernel_warps<WG>();
  constexpr int kLd = tile_row_elements<D, WG>();  // mma.sync: padded, ldmatrix rows in distinct banks
  constexpr int kRows = rows_per_cta<MT, WG>();
  static_assert(!WG || (MT == 1 && (D == 64 || D == 128)), "wgmma: one 16-row tile a warp, D 64 or 128");
  extern __shared__ __align__(16) uint8_t smem[];
  uint8_t* tiles = smem;
  if constexpr (WG) tiles += (1024 - (smem_addr(smem) & 1023)) & 1023;
  __nv_bfloat16* q_s = reinterpret_cast<__nv_bfloat16*>(tiles);
  __nv_bfloat16* k_s = q_s + kRows * kLd;            // [2][kKeys][kLd]
  __nv_bfloat16* v_s = k_s + 2 * kKeys * kLd;        // [2][kKeys][kLd]
  // Block-table metadata staged by cp.async a tile ahead of the K/V loads that need it.
  KvEntry* meta = reinterpret_cast<KvEntry*>(v_s + 2 * kKeys * kLd);  // [2][kKeys]: entries of a staged tile
  KvTile* ring = reinterpret_cast<KvTile*>(meta + 2 * kKeys);         // [4]: descriptor of tile t at t & 3
  int* col_key = reinterpret_cast<int*>(ring + 4);                    // [2][kKeys], INT_MAX = empty
  int* row_key_limit = col_key + 2 * kKeys;                      // [kRows]: last key each row sees

  const int group_size = p.num_heads / p.num_kv_heads;
  const CtaWork work = cta_work<D, LAZY, kW * 32>(p, kRows);
  const int kv_head = work.kv_head, split = work.split, row0 = work.row0;
  const int tile_begin = work.tile_begin, tile_end = work.tile_end;
  const int rows_total = p.n * group_size;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;

  // Causal limits of the CTA's rows in shared memory (read only by masked tiles; the loop's first
  // barrier publishes them).
  for (int r = threadIdx.x; r < kRows; r += blockDim.x) {
    const int row = row0 + r;
    row_key_limit[r] = row < rows_total ? p.prior + row / group_size : -1;
  }

  // Pipeline of one tile t (stage = (t − tile_begin) & 1): its descriptor is copied into ring
  // three tiles ahead, its entries into meta[stage] two tiles ahead, its K/V one tile ahead, each
  // step reading only what an earlier barrier published.
  auto copy_desc = [&](int t) { cp_async16(ring + (t & 3), p.tiles + t, 16); };  // one thread
  auto copy_entries = [&](int t, int stage) {
    const KvTile tile = ring[t & 3];
    if (int(threadIdx.x) < tile.entry_count) {
      cp_async16(meta + stage * kKeys + threadIdx.x, p.entries + tile.entry_begin + threadIdx.x, 16);
    }
  };
  // Block sizes divide the 64-key tile, so they are powers of two: shifts instead of divisions.
  const int block_shift = __ffs(p.block_size) - 1;
  // Each thread copies kCpt consecutive columns at one 16-byte slice of the head dimension; when a
  // block holds at least kCpt slots they share one entry (one metadata read, then fixed strides).
  constexpr int kChunks = D / 8;                       // 16-byte pieces per key row
  constexpr int kCpt = kKeys * kChunks / (kW * 32);  // columns per thread
  static_assert(kCpt >= 1 && kKeys * kChunks % (kW * 32) == 0, "tile copy mapping");
  const int copy_dim = (threadIdx.x % kChunks) * 8;
  const int copy_col0 = (threadIdx.x / kChunks) * kCpt;
  auto load_tile = [&](int tile_index, int stage) {
    const int entry_count = ring[tile_index & 3].entry_count;
    __nv_bfloat16* k_dst = k_s + stage * kKeys * kLd;
    __nv_bfloat16* v_dst = v_s + stage * kKeys * kLd;
    auto at = [&](int j) { return tile_at<D, WG>(copy_col0 + j, copy_dim, kKeys); };
    int* key_dst = col_key + stage * kKeys + copy_col0;
    if (p.block_size >= kCpt) {
      const int entry = copy_col0 >> block_shift, slot0 = copy_col0 & (p.block_size - 1);
      KvEntry ref{0, 0, 0, 0};  // valid 0: every column empty
      if (entry < entry_count) ref = meta[stage * kKeys + entry];
      // Empty columns copy 0 bytes (zero fill) from an address that still lies inside the pool
      // (block 0 for a missing entry, a slot of the block otherwise): no select per column.
      const int64_t base = ((int64_t(ref.block) * p.num_kv_heads + kv_head) * p.block_size + slot0) * D + copy_dim;
      const bf16_bits* k_src = p.k_pool + base;
      const bf16_bits* v_src = p.v_pool + base;
#pragma unroll
      for (int j = 0; j < kCpt; ++j) {
        const bool valid = slot0 + j < ref.valid;
        cp_async16(k_dst + at(j), k_src + j * D, valid ? 16 : 0);
        cp_async16(v_dst + at(j), v_src + j * D, valid ? 16 : 0);
        if (copy_dim == 0) key_dst[j] = valid ? ref.key_start + slot0 + j : INT_MAX;
      }
    } else {
      // Blocks smaller than kCpt slots: one entry per column (a rolled loop: nothing hoisted).
#pragma unroll 1
      for (int j = 0; j < kCpt; ++j) {
        const int col = copy_col0 + j;
        const int entry = col >> block_shift, slot = col & (p.block_size - 1);
        KvEntry ref{0, 0, 0, 0};
        if (entry < entry_count) ref = meta[stage * kKeys + entry];
        const bool valid = slot < ref.valid;
        const int64_t offset = ((int64_t(ref.block) * p.num_kv_heads + kv_head) * p.block_size + slot) * D + copy_dim;
        cp_async16(k_dst + at(j), p.k_pool + offset, valid ? 16 : 0);
        cp_async16(v_dst + at(j), p.v_pool + offset, valid ? 16 : 0);
        if (copy_dim == 0) key_dst[j] = valid ? ref.key_start + slot : INT_MAX;
      }
    }
  };

  // Stages the CTA's query rows (bf16, rotated) into q_s with cp.async (caller commits).
  auto stage_q = [&](const bf16_bits* q, int64_t row_stride) {
    constexpr int kChunks = D / 8;
    for (int idx = threadIdx.x; idx < kRows * kChunks; idx += blockDim.x) {
      const int r = idx / kChunks, dim = (idx % kChunks) * 8;
      const int row = row0 + r;
      const bool valid = row < rows_total;
      const int token = valid ? row / group_size : 0;
      const int head = kv_head * group_size + (valid ? row % group_size : 0);
      cp_async16(q_s + tile_at<D, WG>(r, dim, kRows), q + token * row_stride + head * D + dim, valid ? 16 : 0);
    }
  };

  float o[MT][D / 8][4];
  float row_max[MT][2], row_sum[MT][2];
#pragma unroll
  for (int mt = 0; mt < MT; ++mt) {
#pragma unroll
    for (int i = 0; i < D / 8; ++i) o[mt][i][0] = o[mt][i][1] = o[mt][i][2] = o[mt][i][3] = 0.0f;
    row_max[mt][0] = row_max[mt][1] = -INFINITY;
    row_sum[mt][0] = row_sum[mt][1] = 0.0f;
  }
  if (tile_begin < tile_end) {
    if constexpr (LAZY) {
      // This range's shift: its query rows, rotated by (m − δ) in the pre-pass.
      const int run = p.tile_shift_index[tile_begin];
      stage_q(p.q_rotated + int64_t(run) * p.n * p.num_heads * D, int64_t(p.num_heads) * D);
    } else {
      stage_q(p.q, p.q_row_stride);  // plain: rotated at write time
    }
    // Descriptors up to tile_end (the last tile's mask test reads the next tile's key_start).
    const int desc_end = min(tile_end + 1, p.num_tiles);  // prologue only
    if (threadIdx.x == 0) {
      for (int t = tile_begin; t < min(tile_begin + 3, desc_end); ++t) copy_desc(t);
    }
    cp_async_commit();
    cp_async_wait<0>();
    __syncthreads();
    copy_entries(tile_begin, 0);
    if (tile_begin + 1 < tile_end) copy_entries(tile_begin + 1, 1);
    cp_async_commit();
    cp_async_wait<0>();
    __syncthreads();
    load_tile(tile_begin, 0);
    cp_async_commit();
    for (int ti = tile_begin, stage = 0; ti < tile_end; ++ti, stage ^= 1) {  // stage = (ti − tile_begin) & 1
      // One barrier per tile: it publishes tile ti's K/V (and the next tiles' metadata), and every
      // warp has finished tile ti − 1, so its stage (stage ^ 1) may be refilled now.
      cp_async_wait<0>();
      if constexpr (WG) fence_proxy_async_shared();  // the copies are read by the tensor cores next
      __syncthreads();
      // Mask only where needed: a tile with empty slots, or one reaching past some row's causal limit.
      // row_key_limit[0]: the CTA's first row sees the fewest keys; a full tile at or below it needs
      // no mask (read from shared memory: no register held across the loop).
      const int tile_keys_end = ti + 1 < p.num_tiles ? ring[(ti + 1) & 3].key_start : p.prior + p.n;
      const int tile_keys_begin = ring[ti & 3].key_start;
      const bool needs_mask = tile_keys_end - tile_keys_begin != kKeys || tile_keys_begin + kKeys - 1 > row_key_limit[0];
      const __nv_bfloat16* k_tile = k_s + stage * kKeys * kLd;
      const __nv_bfloat16* v_tile = v_s + stage * kKeys * kLd;
      const int* keys = col_key + stage * kKeys;

      float s[MT][kKeys / 8][4];
#pragma unroll
      for (int mt = 0; mt < MT; ++mt) {
#pragma unroll
        for (int i = 0; i < kKeys / 8; ++i) s[mt][i][0] = s[mt][i][1] = s[mt][i][2] = s[mt][i][3] = 0.0f;
      }
      if constexpr (WG) {
        // This warpgroup's 64 query rows (A) against the tile's 64 keys (B), both K-major.
        const __nv_bfloat16* q_wg = q_s + (warp / 4) * 64 * 64;
        uint64_t a_desc[D / 16], b_desc[D / 16];
#pragma unroll
        for (int kk = 0; kk < D / 16; ++kk) {
          a_desc[kk] = swizzled_desc(q_wg + (kk / 4) * kRows * 64 + (kk % 4) * 16, 16, 1024);
          b_desc[kk] = swizzled_desc(k_tile + (kk / 4) * kKeys * 64 + (kk % 4) * 16, 16, 1024);
        }
        wgmma_scores<D>(s[0], a_desc, b_desc);
      } else {
#pragma unroll
        for (int kk = 0; kk < D / 16; ++kk) {
          uint32_t a[MT][4];
#pragma unroll
          for (int mt = 0; mt < MT; ++mt) {
            ldmatrix_x4(a[mt], q_s + ((warp * MT + mt) * 16 + lane % 16) * kLd + kk * 16 + (lane / 16) * 8);
          }
#pragma unroll
          for (int np = 0; np < kKeys / 16; ++np) {
            uint32_t b[4];
            ldmatrix_x4(b, k_tile + (np * 16 + lane % 8 + (lane / 16) * 8) * kLd + kk * 16 + ((lane / 8) % 2) * 8);
#pragma unroll
            for (int mt = 0; mt < MT; ++mt) {
              mma_bf16_16816(s[mt][2 * np], a[mt], b[0], b[1]);
              mma_bf16_16816(s[mt][2 * np + 1], a[mt], b[2], b[3]);
            }
          }
        }
      }
      // The next tiles' copies, issued after QK^T: the MMAs start right after the barrier and the
      // copies have softmax + P·V to land.
      if (ti + 1 < tile_end) load_tile(ti + 1, stage ^ 1);
      if (ti + 2 < tile_end) copy_entries(ti + 2, stage);  // meta[stage] held tile ti's, already used
      if (threadIdx.x == 0 && ti + 3 <= tile_end && ti + 3 < p.num_tiles) copy_desc(ti + 3);  // slot of tile ti − 1
      cp_async_commit();
      float correction[MT][2];
      if (needs_mask) {
        softmax_scores<D, MT, true>(s, keys, row_key_limit, warp * MT * 16, row_max, row_sum, correction);
      } else {
        softmax_scores<D, MT, false>(s, keys, row_key_limit, warp * MT * 16, row_max, row_sum, correction);
      }
      rescale_rows<D, MT>(o, correction);
      if constexpr (WG) {
        uint32_t pa[kKeys / 16][4];
        pack_weights(s[0], pa);
        // V [keys][D] as the MN-major B operand: 16 keys (two 8-row groups) a k-step, the D halves
        // kKeys rows apart.
        uint64_t v_desc[kKeys / 16];
#pragma unroll
        for (int kk = 0; kk < kKeys / 16; ++kk) v_desc[kk] = swizzled_desc(v_tile + kk * 16 * 64, kKeys * 128, 1024);
        wgmma_values<D>(o[0], pa, v_desc);
      } else {
#pragma unroll
        for (int kk = 0; kk < kKeys / 16; ++kk) {
          uint32_t a[MT][4];
#pragma unroll
          for (int mt = 0; mt < MT; ++mt) {
            a[mt][0] = pack_bf16x2(s[mt][2 * kk][0], s[mt][2 * kk][1]);
            a[mt][1] = pack_bf16x2(s[mt][2 * kk][2], s[mt][2 * kk][3]);
            a[mt][2] = pack_bf16x2(s[mt][2 * kk + 1][0], s[mt][2 * kk + 1][1]);
            a[mt][3] = pack_bf16x2(s[mt][2 * kk + 1][2], s[mt][2 * kk + 1][3]);
          }
#pragma unroll
          for (int dp = 0; dp < D / 16; ++dp) {
            uint32_t b[4];
            ldmatrix_x4_trans(b, v_tile + (kk * 16 + lane % 8 + ((lane / 8) % 2) * 8) * kLd + dp * 16 + (lane / 16) * 8);
#pragma unroll
            for (int mt = 0; mt < MT; ++mt) {
              mma_bf16_16816(o[mt][2 * dp], a[mt], b[0], b[1]);
              mma_bf16_16816(o[mt][2 * dp + 1], a[mt], b[2], b[3]);
            }
          }
        }
      }
    }
    cp_async_wait<0>();  // no copy outlives the CTA
  }

  // Epilogue: the row sums finished across the quad, then rows or split partials written.
#pragma unroll
  for (int mt = 0; mt < MT; ++mt) {
    store_rows<D>(p, o[mt], row_max[mt], row_sum[mt], row0 + (warp * MT + mt) * 16, kv_head, split);
  }
}

template <int D, int MT, bool LAZY>
__global__ void __launch_bounds__(kWarps * 32) prefill_kernel(PrefillParams p) {
  prefill_body<D, MT, LAZY, false>(p);
}

// wgmma: two CTAs an SM, so at most 128 registers a thread (with 136, one CTA an SM ran 1.3-1.45x
// slower than the lazy variant's 128 at two; bench/cuda/NOTES.md).
template <int D, bool LAZY>
__global__ void __launch_bounds__(kernel_warps<true>() * 32, 2) prefill_kernel_wgmma(PrefillParams p) {
  prefill_body<D, 1, LAZY, true>(p);
}

}  // namespace
}  // namespace lazyscope::cuda

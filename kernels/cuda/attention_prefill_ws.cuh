#pragma once
// The warp-specialised wgmma prefill attention kernel (sm_90a; attention_prefill_sm90a.cu).
// A CTA of three warpgroups owns 128 rows of (query token, group head) pairs of one KV head, as
// the other kernels do. Warpgroup 0 produces: it gathers each 64-key K/V tile from the paged pool
// with cp.async into a ring of stages (block-table metadata read a tile ahead into registers); the
// copies themselves arrive on the stage's mbarrier when they land (cp.async.mbarrier.arrive), so
// the producer only ever waits for a free stage. Warpgroups 1 and 2 consume, 64 rows
// each, with the query in registers: S = QK^T and O += PV as wgmma from registers, and the softmax
// of tile t runs while the tensor cores compute P(t-1)·V(t-1); a stage goes back to the producer
// when its P·V is done. setmaxnreg moves registers from the producer to the consumers. Lazy: a
// CTA's range of tiles may cross shift runs (splits are even, as plain ones are); at a change of
// shift the producer stages that shift's rotated query in shared memory tiles ahead, and the
// consumers take it into registers when they reach it (PrefillParams::split_ranges is not read).
#include "kernels/cuda/attention_prefill_kernel.cuh"

namespace lazyscope::cuda {
namespace {

using namespace detail;

constexpr int kWsConsumers = 2;                    // consumer warpgroups, 64 rows each
constexpr int kWsRows = 64 * kWsConsumers;         // rows a CTA
constexpr int kWsThreads = 128 * (kWsConsumers + 1);

template <int D>
constexpr int ws_stages() {  // K/V ring depth: 32 KB a stage at D 128, 16 KB at D 64
  return D == 128 ? 5 : 8;
}
template <int D>
constexpr int ws_smem_bytes() {
  return 1024 + ws_stages<D>() * 2 * kKeys * D * 2 + kWsRows * (D + 8) * 2 + 2 * ws_stages<D>() * 8 +
         ws_stages<D>() * (kKeys + 1) * 4 + kWsRows * 4 + 2 * 8;
}

#ifdef LAZYSCOPE_WGMMA_CODE
__device__ __forceinline__ void mbar_init(uint64_t* bar, int count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(smem_addr(bar)), "r"(count) : "memory");
}
// Release: the arriving thread's earlier shared-memory writes are visible to a thread whose wait
// sees the phase complete.
__device__ __forceinline__ void mbar_arrive(uint64_t* bar) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(smem_addr(bar)) : "memory");
}
// Arrives on the barrier once every cp.async this thread issued so far has landed (no count
// increment: the arrival is one of the phase's expected ones).
__device__ __forceinline__ void mbar_arrive_on_copies(uint64_t* bar) {
  asm volatile("cp.async.mbarrier.arrive.noinc.shared::cta.b64 [%0];\n" ::"r"(smem_addr(bar)) : "memory");
}
__device__ __forceinline__ void mbar_wait(uint64_t* bar, int parity) {
  asm volatile(
      "{\n.reg .pred done;\nLAB_WAIT:\n"
      "mbarrier.try_wait.parity.shared::cta.b64 done, [%0], %1;\n"
      "@done bra DONE;\nbra LAB_WAIT;\nDONE:\n}\n" ::"r"(smem_addr(bar)),
      "r"(parity)
      : "memory");
}
// Whether the phase of the given parity has completed (no waiting).
__device__ __forceinline__ bool mbar_test(uint64_t* bar, int parity) {
  uint32_t done;
  asm volatile(
      "{\n.reg .pred p;\n"
      "mbarrier.test_wait.parity.shared::cta.b64 p, [%1], %2;\n"
      "selp.u32 %0, 1, 0, p;\n}\n"
      : "=r"(done)
      : "r"(smem_addr(bar)), "r"(parity)
      : "memory");
  return done != 0;
}
// bar.sync on named barrier ID by one warpgroup's 128 threads.
template <int ID>
__device__ __forceinline__ void named_sync() {
  asm volatile("bar.sync %0, 128;\n" ::"n"(ID) : "memory");
}
#endif

// Lazy: the first tile of the shift run after the one holding tile ti, relative to the CTA's
// range (its length if the range ends first).
__device__ __forceinline__ int run_change(const PrefillParams& p, const CtaWork& work, int ti) {
  return min(p.tile_run_end[ti], work.tile_end) - work.tile_begin;
}

template <int D, bool LAZY>
__global__ void __launch_bounds__(kWsThreads, 1) prefill_kernel_ws(PrefillParams p) {
#ifdef LAZYSCOPE_WGMMA_CODE
  constexpr int kStages = ws_stages<D>();
  constexpr int kTile = kKeys * D;  // elements of one K or V tile
  constexpr int kQLd = D + 8;       // query staging rows, padded for ldmatrix
  // Registers a thread (setmaxnreg), within what the launch allocated (168 a thread: producer +
  // 2 x consumer <= 504, or the consumers' increase never returns): the lazy producer's query
  // copies need 8 more (at 72 it spills), taken from the consumers (208 is spill-free there).
  constexpr int kProducerRegs = LAZY ? 80 : 72, kConsumerRegs = LAZY ? 208 : 216;
  extern __shared__ __align__(16) uint8_t smem[];
  uint8_t* tiles = smem + ((1024 - (smem_addr(smem) & 1023)) & 1023);
  __nv_bfloat16* k_s = reinterpret_cast<__nv_bfloat16*>(tiles);  // [kStages][D/64][kKeys][64], swizzled
  __nv_bfloat16* v_s = k_s + kStages * kTile;
  __nv_bfloat16* q_s = v_s + kStages * kTile;                       // [kWsRows][kQLd]
  uint64_t* full = reinterpret_cast<uint64_t*>(q_s + kWsRows * kQLd);  // [kStages]: stage holds its tile
  uint64_t* empty = full + kStages;                                // [kStages]: stage may be refilled
  // Lazy: q_s holds the next shift's rotated query, written by the producer (q_full) once the
  // consumers have taken the previous one into registers (q_empty).
  uint64_t* q_full = empty + kStages;
  uint64_t* q_empty = q_full + 1;
  int* col_key = reinterpret_cast<int*>(q_empty + 1);              // [kStages][kKeys], INT_MAX = empty
  int* masked = col_key + kStages * kKeys;                         // [kStages]: the tile needs the mask
  int* row_key_limit = masked + kStages;                           // [kWsRows]: last key each row sees

  const int group_size = p.num_heads / p.num_kv_heads;
  const int rows_total = p.n * group_size;
  const CtaWork work = cta_work<D, false, kWsThreads>(p, kWsRows);  // even splits, lazy ones too
  const int count = work.tile_end - work.tile_begin;
  for (int r = threadIdx.x; r < kWsRows; r += kWsThreads) {
    const int row = work.row0 + r;
    row_key_limit[r] = row < rows_total ? p.prior + row / group_size : -1;
  }
  if (threadIdx.x == 0) {
    for (int i = 0; i < kStages; ++i) {
      mbar_init(&full[i], 2 * 128);  // every producer thread twice: its stores, then its copies landed
      mbar_init(&empty[i], 128 * kWsConsumers);  // every consumer thread, its reads of the stage done
    }
    mbar_init(q_full, 128);                 // every producer thread, its query copies landed
    mbar_init(q_empty, 128 * kWsConsumers);  // every consumer thread, its query rows in registers
  }
  __syncthreads();
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;

  if (warp < 4) {
    // Producer. Thread t copies kCpt consecutive columns at one 16-byte slice of the head dim.
    setmaxnreg_dec<kProducerRegs>();
    if (count == 0) return;
    constexpr int kChunks = D / 8, kCpt = kKeys * kChunks / 128;
    const int t = threadIdx.x;
    const int copy_dim = (t % kChunks) * 8, copy_col0 = (t / kChunks) * kCpt;
    const int block_shift = __ffs(p.block_size) - 1;  // block sizes divide 64: powers of two
    const bool shared_entry = p.block_size >= kCpt;   // the thread's columns lie in one block
    const int entry = copy_col0 >> block_shift, slot0 = copy_col0 & (p.block_size - 1);
    KvTile end_desc;
    end_desc.key_start = p.prior + p.n;
    auto desc_of = [&](int ti) { return ti < p.num_tiles ? p.tiles[ti] : end_desc; };
    auto entry_of = [&](const KvTile& d) {
      return shared_entry && entry < d.entry_count ? p.entries[d.entry_begin + entry] : KvEntry{0, 0, 0, 0};
    };
    KvTile cur = desc_of(work.tile_begin), next = desc_of(work.tile_begin + 1);
    KvEntry ref = entry_of(cur);
    // Lazy: the next change of shift in this range (count: none), its shift's index and the
    // change after it, each read a change ahead; the consumers stage the first query themselves.
    int next_change = count, next_run = 0, change_after = count, query_loads = 0, last_change = 0;
    auto look_ahead = [&] {
      if (next_change < count) {
        next_run = p.tile_shift_index[work.tile_begin + next_change];
        change_after = run_change(p, work, work.tile_begin + next_change);
      }
    };
    if constexpr (LAZY) {
      next_change = run_change(p, work, work.tile_begin);
      look_ahead();
    }
    for (int i = 0; i < count; ++i) {
      const int ti = work.tile_begin + i, stage = i % kStages;
      // Metadata of the next iterations, loaded now and used there.
      const KvTile after = desc_of(ti + 2);
      const KvEntry next_ref = i + 1 < count ? entry_of(next) : KvEntry{0, 0, 0, 0};
      if (i >= kStages) mbar_wait(&empty[stage], (i / kStages - 1) & 1);
      __nv_bfloat16* k_dst = k_s + stage * kTile;
      __nv_bfloat16* v_dst = v_s + stage * kTile;
      int* key_dst = col_key + stage * kKeys + copy_col0;
      if (shared_entry) {
        // Empty columns copy 0 bytes (zero fill) from an address inside the pool.
        const int64_t base = ((int64_t(ref.block) * p.num_kv_heads + work.kv_head) * p.block_size + slot0) * D + copy_dim;
#pragma unroll
        for (int j = 0; j < kCpt; ++j) {
          const bool valid = slot0 + j < ref.valid;
          const int at = tile_at<D, true>(copy_col0 + j, copy_dim, kKeys);
          cp_async16(k_dst + at, p.k_pool + base + j * D, valid ? 16 : 0);
          cp_async16(v_dst + at, p.v_pool + base + j * D, valid ? 16 : 0);
          if (copy_dim == 0) key_dst[j] = valid ? ref.key_start + slot0 + j : INT_MAX;
        }
      } else {
        // Blocks smaller than kCpt slots: one entry per column (rare; nothing prefetched).
#pragma unroll 1
        for (int j = 0; j < kCpt; ++j) {
          const int col = copy_col0 + j;
          const int e = col >> block_shift, slot = col & (p.block_size - 1);
          const KvEntry r = e < cur.entry_count ? p.entries[cur.entry_begin + e] : KvEntry{0, 0, 0, 0};
          const bool valid = slot < r.valid;
          const int64_t offset = ((int64_t(r.block) * p.num_kv_heads + work.kv_head) * p.block_size + slot) * D + copy_dim;
          const int at = tile_at<D, true>(col, copy_dim, kKeys);
          cp_async16(k_dst + at, p.k_pool + offset, valid ? 16 : 0);
          cp_async16(v_dst + at, p.v_pool + offset, valid ? 16 : 0);
          if (copy_dim == 0) key_dst[j] = valid ? r.key_start + slot : INT_MAX;
        }
      }
      // Mask only a tile with empty slots or one reaching past the CTA's first row's causal limit.
      if (t == 0) masked[stage] = next.key_start - cur.key_start != kKeys || cur.key_start + kKeys - 1 > row_key_limit[0];
      mbar_arrive(&full[stage]);            // releases this thread's key and mask stores
      mbar_arrive_on_copies(&full[stage]);  // and this when its copies have landed
      // Lazy: the next shift's rotated query into q_s as soon as the consumers hold the last one
      // (tested without waiting once this thread has issued the tile of that last change), at the
      // latest before the tile that needs it: tiles before they reach it, off their path.
      if (LAZY && next_change < count && i >= last_change &&
          (i + 1 >= next_change ? (mbar_wait(q_empty, query_loads & 1), true) : mbar_test(q_empty, query_loads & 1))) {
        const bf16_bits* q = p.q_rotated + int64_t(next_run) * p.n * p.num_heads * D;
        // Thread t stages dims q_dim.. of rows q_row0, q_row0 + kQRowStep, ...; their (token,
        // head) advance by a fixed step (no division in the copy loop).
        constexpr int kQRowStep = 128 / kChunks;
        const int q_dim = (t % kChunks) * 8, q_row0 = t / kChunks;
        const int q_token_step = kQRowStep / group_size, q_head_step = kQRowStep % group_size;
        int row = work.row0 + q_row0, token = row / group_size, head = work.kv_head * group_size + row % group_size;
#pragma unroll 1
        for (int r = q_row0; r < kWsRows; r += kQRowStep) {
          const bool valid = row < rows_total;
          cp_async16(q_s + r * kQLd + q_dim, q + (int64_t(valid ? token : 0) * p.num_heads + head) * D + q_dim,
                     valid ? 16 : 0);
          row += kQRowStep;
          token += q_token_step;
          head += q_head_step;
          if (head >= (work.kv_head + 1) * group_size) {
            head -= group_size;
            ++token;
          }
        }
        mbar_arrive_on_copies(q_full);
        ++query_loads;
        last_change = next_change;
        next_change = change_after;
        look_ahead();
      }
      cur = next;
      next = after;
      ref = next_ref;
    }
    cp_async_wait<0>();  // no copy outlives its thread
    return;
  }

  // Consumers: warp c (0..7) owns rows 16c..16c+15 of the CTA, its warpgroup the 64 around them.
  setmaxnreg_inc<kConsumerRegs>();
  const int cw = warp - 4;
  float o[1][D / 8][4];
  float row_max[1][2] = {{-INFINITY, -INFINITY}}, row_sum[1][2] = {{0.0f, 0.0f}};
#pragma unroll
  for (int i = 0; i < D / 8; ++i) o[0][i][0] = o[0][i][1] = o[0][i][2] = o[0][i][3] = 0.0f;
  if (count > 0) {
    // The first query rows of this warpgroup (lazy: of the first tile's shift, rotated) through
    // shared memory into registers; each warpgroup stages its own 64 rows (named barrier 2 + wg).
    const int wg = cw / 4;
    uint32_t qa[D / 16][4];
    auto rows_to_registers = [&] {
#pragma unroll
      for (int kk = 0; kk < D / 16; ++kk) {
        ldmatrix_x4(qa[kk], q_s + (cw * 16 + lane % 16) * kQLd + kk * 16 + (lane / 16) * 8);
      }
    };
    // Lazy: the next change of shift (count: none) and the one after it, read a change ahead.
    int next_change = count, change_after = count, query_loads = 0;
    if constexpr (LAZY) {
      next_change = run_change(p, work, work.tile_begin);
      if (next_change < count) change_after = run_change(p, work, work.tile_begin + next_change);
    }
    {
      const bf16_bits* q = p.q;
      int64_t q_stride = p.q_row_stride;
      if constexpr (LAZY) {
        q = p.q_rotated + int64_t(p.tile_shift_index[work.tile_begin]) * p.n * p.num_heads * D;
        q_stride = int64_t(p.num_heads) * D;
      }
      constexpr int kChunks = D / 8;
      for (int idx = threadIdx.x % 128; idx < 64 * kChunks; idx += 128) {
        const int r = wg * 64 + idx / kChunks, dim = (idx % kChunks) * 8;
        const int row = work.row0 + r;
        const bool valid = row < rows_total;
        const int token = valid ? row / group_size : 0;
        const int head = work.kv_head * group_size + (valid ? row % group_size : 0);
        cp_async16(q_s + r * kQLd + dim, q + token * q_stride + head * D + dim, valid ? 16 : 0);
      }
      cp_async_commit();
      cp_async_wait<0>();
      wg == 0 ? named_sync<2>() : named_sync<3>();
      rows_to_registers();
      if constexpr (LAZY) mbar_arrive(q_empty);  // q_s may take the next shift's rows
    }

    float s[1][kKeys / 8][4];
#pragma unroll
    for (int i = 0; i < kKeys / 8; ++i) s[0][i][0] = s[0][i][1] = s[0][i][2] = s[0][i][3] = 0.0f;
    uint32_t pa[kKeys / 16][4];
    float correction[1][2];
    auto issue_scores = [&](int stage) {  // S = Q K^T, K K-major
      const __nv_bfloat16* k_tile = k_s + stage * kTile;
      uint64_t desc[D / 16];
#pragma unroll
      for (int kk = 0; kk < D / 16; ++kk) desc[kk] = swizzled_desc(k_tile + (kk / 4) * kKeys * 64 + (kk % 4) * 16, 16, 1024);
      wgmma_rs_n64_kmajor<false>(s[0], qa[0], desc[0]);
#pragma unroll
      for (int kk = 1; kk < D / 16; ++kk) wgmma_rs_n64_kmajor<true>(s[0], qa[kk], desc[kk]);
      wgmma_commit();
      wgmma_pin(s[0]);
    };
    auto issue_values = [&](int stage) {  // O += P V, V MN-major (16 keys a k-step, D halves kKeys rows apart)
      const __nv_bfloat16* v_tile = v_s + stage * kTile;
      uint64_t desc[kKeys / 16];
#pragma unroll
      for (int kk = 0; kk < kKeys / 16; ++kk) desc[kk] = swizzled_desc(v_tile + kk * 16 * 64, kKeys * 128, 1024);
#pragma unroll
      for (int kk = 0; kk < kKeys / 16; ++kk) {
        if constexpr (D == 128) {
          wgmma_rs_n128_mnmajor(o[0], pa[kk], desc[kk]);
        } else {
          wgmma_rs_n64_mnmajor(o[0], pa[kk], desc[kk]);
        }
      }
      wgmma_commit();
      wgmma_pin(o[0]);
    };
    auto softmax = [&](int stage) {
      if (masked[stage]) {
        softmax_scores<D, 1, true>(s, col_key + stage * kKeys, row_key_limit, cw * 16, row_max, row_sum, correction);
      } else {
        softmax_scores<D, 1, false>(s, col_key + stage * kKeys, row_key_limit, cw * 16, row_max, row_sum, correction);
      }
    };
    // Each thread releases its own reads (keys, mask flag; its warpgroup's products are waited for).
    auto release = [&](int stage) { mbar_arrive(&empty[stage]); };

    mbar_wait(&full[0], 0);
    fence_proxy_async_shared();  // the tile's generic-proxy copies, seen here, to the tensor cores
    wgmma_fence();
    issue_scores(0);
    wgmma_wait<0>();
    softmax(0);  // O is still zero: nothing to rescale
    pack_weights(s[0], pa);
    for (int i = 1; i < count; ++i) {
      const int stage = i % kStages, prev = (i - 1) % kStages;
      if (LAZY && i == next_change) {
        // The range crosses into another shift run: its rotated query, staged by the producer.
        mbar_wait(q_full, query_loads & 1);
        rows_to_registers();
        mbar_arrive(q_empty);
        ++query_loads;
        next_change = change_after;
        if (next_change < count) change_after = run_change(p, work, work.tile_begin + next_change);
      }
      mbar_wait(&full[stage], (i / kStages) & 1);
      fence_proxy_async_shared();
      wgmma_fence();
      issue_scores(stage);
      issue_values(prev);  // P(i-1)·V(i-1) runs under this tile's softmax
      wgmma_wait<1>();
      softmax(stage);
      wgmma_wait<0>();
      release(prev);
      pack_weights(s[0], pa);  // after the wait: P(i-1) was the product's operand until now
      rescale_rows<D, 1>(o, correction);
    }
    wgmma_fence();
    issue_values((count - 1) % kStages);
    wgmma_wait<0>();
  }
  store_rows<D>(p, o[0], row_max[0], row_sum[0], work.row0 + cw * 16, work.kv_head, work.split);
#else
  (void)p;
  __trap();
#endif
}

}  // namespace
}  // namespace lazyscope::cuda

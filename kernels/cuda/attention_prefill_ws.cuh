#pragma once
// The warp-specialised wgmma prefill attention kernel (sm_90a; attention_prefill_sm90a.cu).
// A CTA of three warpgroups owns 128 rows of (query token, group head) pairs of one KV head, as
// the other kernels do, and walks its K/V in steps of 128 keys: two 64-key host tiles of one
// shift run (one alone at the end of a run or of the range). Warpgroup 0 produces: it gathers each
// step's K, then its V, from the paged pool with cp.async into rings of 128-key stages (block-table
// metadata read a step ahead into registers); the copies themselves arrive on the stage's K or V
// mbarrier when they land (cp.async.mbarrier.arrive), so the producer only ever waits for a free
// stage. Warpgroups 1 and 2 consume, 64 rows each, with the query in shared memory: S = QK^T as
// m64n128 wgmma from shared memory, O += PV from registers, and the softmax of step t runs while
// the tensor cores compute P(t-1)·V(t-1); the two consumer warpgroups take turns issuing their
// products. K and V go back to the producer separately (K once its scores and keys are read, V
// once its product is done, a step later: at D 128 V has a stage more). setmaxnreg moves
// registers from the producer to the consumers. Splits have an even number of tiles (a step of
// one tile costs a whole step) and, one CTA an SM, fill at most one wave. Lazy: a CTA's range may
// cross shift runs (splits are even, as plain ones are); at a change of shift the producer stages
// that shift's rotated query in the other query buffer steps ahead (one tensor-map copy by the
// tensor memory accelerator where the group size divides 128, else cp.async in pieces), and the
// consumers switch buffers when they reach it (PrefillParams::split_ranges is not read). A CTA
// whose range holds one shift run walks as a plain one does.
#include <cuda.h>

#include "kernels/cuda/attention_prefill_kernel.cuh"

namespace lazyscope::cuda {
namespace {

using namespace detail;

constexpr int kWsConsumers = 2;                    // consumer warpgroups, 64 rows each
constexpr int kWsRows = 64 * kWsConsumers;         // rows a CTA
constexpr int kWsThreads = 128 * (kWsConsumers + 1);
constexpr int kStepKeys = 2 * kKeys;               // keys a step: two host tiles

// Ring depths in 128-key steps, K and V apart (32 KB of K or V a stage at D 128, 16 KB at D 64).
// A step's P·V is issued one step after its scores, so V is held a step longer than K: at D 128 a
// third V stage lets the producer start the next V a step earlier (H100, against two: plain causal
// 8K 1,094-1,110 -> 1,076-1,078 µs, the 512-token RAG shape 170-171 -> 152-153 µs), where a third
// K stage gained nothing. Three of each do not fit beside the query.
template <int D>
constexpr int ws_k_stages() {
  return D == 128 ? 2 : 4;
}
template <int D>
constexpr int ws_v_stages() {
  return D == 128 ? 3 : 4;
}
// Query buffers: one, or two (lazy: the next shift's rows land while the current ones are read;
// persistent: the next row tile's).
template <bool TWO_QUERIES>
constexpr int ws_query_buffers() {
  return TWO_QUERIES ? 2 : 1;
}
// Shared memory: the barriers, column keys and row limits first, then the tiles from the next 1 KB
// boundary (the 128-byte swizzle repeats every 1 KB). Dynamic shared memory starts 1 KB-aligned
// (after the block's reserved 1 KB, none of it static here), so the metadata takes the tiles' pad;
// the kernel checks that.
template <int D>
constexpr int ws_meta_bytes() {
  constexpr int kK = ws_k_stages<D>(), kV = ws_v_stages<D>();
  return (2 * kK + 2 * kV + 2) * 8 + kK * (kStepKeys + 2) * 4 + kWsRows * 4;
}
template <int D, bool TWO_QUERIES>
constexpr int ws_tile_bytes() {
  return (ws_k_stages<D>() + ws_v_stages<D>()) * kStepKeys * D * 2 +
         ws_query_buffers<TWO_QUERIES>() * kWsRows * D * 2;
}
template <int D, bool TWO_QUERIES>
constexpr int ws_smem_bytes() {
  constexpr int kBytes = (ws_meta_bytes<D>() + 1023) / 1024 * 1024 + ws_tile_bytes<D, TWO_QUERIES>();
  static_assert(kBytes <= 227 * 1024, "beyond the shared memory a Hopper block may opt into");
  return kBytes;
}

#ifdef LAZYSCOPE_WGMMA_CODE
// mbar_init, mbar_arrive, mbar_arrive_expect_tx and mbar_wait: device_util.cuh.
// Arrives on the barrier once every cp.async this thread issued so far has landed (no count
// increment: the arrival is one of the phase's expected ones).
__device__ __forceinline__ void mbar_arrive_on_copies(uint64_t* bar) {
  asm volatile("cp.async.mbarrier.arrive.noinc.shared::cta.b64 [%0];\n" ::"r"(smem_addr(bar)) : "memory");
}
// One box of a 4-D tensor (map: a __grid_constant__ kernel parameter) into shared memory by the
// tensor memory accelerator; its bytes complete on `bar`.
__device__ __forceinline__ void tma_load_4d(void* dst, const CUtensorMap* map, int c0, int c1, int c2, int c3,
                                            uint64_t* bar) {
  asm volatile(
      "cp.async.bulk.tensor.4d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3, %4, %5}], "
      "[%6];\n" ::"r"(smem_addr(dst)),
      "l"(map), "r"(c0), "r"(c1), "r"(c2), "r"(c3), "r"(smem_addr(bar))
      : "memory");
}
// bar.sync on named barrier ID by one warpgroup's 128 threads.
template <int ID>
__device__ __forceinline__ void named_sync() {
  asm volatile("bar.sync %0, 128;\n" ::"n"(ID) : "memory");
}
// Named barrier `id` shared by both consumer warpgroups (256 threads): wait there, or only arrive.
__device__ __forceinline__ void pair_sync(int id) { asm volatile("bar.sync %0, 256;\n" ::"r"(id) : "memory"); }
__device__ __forceinline__ void pair_arrive(int id) { asm volatile("bar.arrive %0, 256;\n" ::"r"(id) : "memory"); }
#endif

// x from lane 0 to the whole warp: a value the compiler then knows to be warp-uniform, so what is
// computed from it (loop counters, matrix descriptors) stays in uniform registers. Every lane of
// the warp must call it together.
__device__ __forceinline__ int warp_uniform(int x) { return __shfl_sync(0xffffffffu, x, 0); }

// Lazy: the first tile of the shift run after the one holding tile ti, relative to the CTA's
// range (its length if the range ends first).
__device__ __forceinline__ int run_change(const PrefillParams& p, const CtaWork& work, int ti) {
  return min(p.tile_run_end[ti], work.tile_end) - work.tile_begin;
}

// Persistent: the tiles of the table whose first key is at most key_limit (key_start ascends, tile
// 0 starts at key 0), counted by one warp on its own: 32 samples a round narrow the range 32-fold,
// then one ballot over what is left (a table of 8K keys: two round trips).
__device__ __forceinline__ int warp_visible_tiles(const PrefillParams& p, int key_limit) {
  const int lane = threadIdx.x % 32;
  int lo = 0, hi = p.num_tiles;  // tiles before lo are visible, tiles from hi on are not
  while (hi - lo > 32) {
    const int stride = (hi - lo + 31) / 32, at = lo + lane * stride;
    const int seen = __popc(__ballot_sync(0xffffffffu, at < hi && p.tiles[at].key_start <= key_limit));
    if (seen == 0) return lo;
    hi = min(hi, lo + seen * stride);  // the first sample past the limit
    lo += (seen - 1) * stride;         // the last one within it
  }
  return lo + __popc(__ballot_sync(0xffffffffu, lo + lane < hi && p.tiles[lo + lane].key_start <= key_limit));
}

// Persistent: the work item of this CTA's round r, or past `items` when it has none. Items are
// ordered heaviest first; rounds alternate direction over the grid (a snake), so every CTA's
// sum of causal lengths comes out near the same.
__device__ __forceinline__ int persistent_item(int round) {
  return round * gridDim.x + (round % 2 == 0 ? blockIdx.x : gridDim.x - 1 - blockIdx.x);
}

// QMAP (lazy only): the producer loads each later shift's query through q_map, q_rotated as a 4-D
// tensor [shift][token][head][dim] whose box is one 64-dim half of a CTA's query rows, 128-byte
// swizzled as the query buffers are (ws_query_map); else with cp.async.
// PERSIST (plain calls without splits): a grid of at most one CTA an SM, each CTA walking several
// row tiles (persistent_item) with its rings and barriers running on from one to the next, so the
// next tile's first K/V copies and its query (the second query buffer) land while this tile's
// last steps are computed, instead of after a new CTA's start.
template <int D, bool LAZY, bool QMAP, bool PERSIST>
__global__ void __launch_bounds__(kWsThreads, 1)
    prefill_kernel_ws(PrefillParams p, const __grid_constant__ CUtensorMap q_map) {
#ifdef LAZYSCOPE_WGMMA_CODE
  static_assert(!(LAZY && PERSIST), "persistent CTAs walk plain calls only");
  constexpr bool kTwoQueries = LAZY || PERSIST;
  constexpr int kKStages = ws_k_stages<D>(), kVStages = ws_v_stages<D>();
  constexpr int kStage = kStepKeys * D;  // elements of one K or V stage
  constexpr int kQTile = kWsRows * D;    // elements of one query buffer
  // Registers a thread (setmaxnreg), within what the launch allocated (168 a thread: producer +
  // 2 x consumer <= 504, or the consumers' increase never returns). With the matrix descriptors in
  // uniform registers the consumers need no more than 192; the producer, given 96, no longer
  // spills, and its copies reach the consumers sooner (lazy at 80 or 72: 2-6 % slower).
  constexpr int kProducerRegs = 96, kConsumerRegs = 192;
  extern __shared__ __align__(16) uint8_t smem[];
  uint64_t* full_k = reinterpret_cast<uint64_t*>(smem);  // [kKStages]
  uint64_t* full_v = full_k + kKStages;                   // [kVStages]: the stage holds its step's K / V
  uint64_t* empty_k = full_v + kVStages;                  // [kKStages]: the stage's K / V may be refilled
  uint64_t* empty_v = empty_k + kKStages;                 // [kVStages]
  // Lazy: the producer writes the next shift's rotated query into the other buffer (q_full) once
  // the consumers are done with the query before it there (q_empty).
  uint64_t* q_full = empty_v + kVStages;
  uint64_t* q_empty = q_full + 1;
  int* col_key = reinterpret_cast<int*>(q_empty + 1);  // [kKStages][kStepKeys], INT_MAX = empty
  int* masked = col_key + kKStages * kStepKeys;        // [kKStages]: the step needs the mask
  int* step_tiles = masked + kKStages;                 // [kKStages]: persistent, the step's row tile's tile count
  int* row_key_limit = step_tiles + kKStages;          // [kWsRows]: last key each row sees
  const uint32_t meta_end = smem_addr(row_key_limit + kWsRows);
  uint8_t* tiles = smem + (((meta_end + 1023) & ~1023u) - smem_addr(smem));
  // A start not 1 KB-aligned would push the tiles past the allocation.
  if (tiles + ws_tile_bytes<D, kTwoQueries>() > smem + ws_smem_bytes<D, kTwoQueries>()) __trap();
  __nv_bfloat16* k_s = reinterpret_cast<__nv_bfloat16*>(tiles);  // [kKStages][D/64][kStepKeys][64], swizzled
  __nv_bfloat16* v_s = k_s + kKStages * kStage;                      // [kVStages][...]
  __nv_bfloat16* q_s = v_s + kVStages * kStage;  // [buffers][D/64][kWsRows][64], swizzled as the stages

  const int group_size = p.num_heads / p.num_kv_heads;
  const int rows_total = p.n * group_size;
  // The CTA's work and its tile count: its one row tile, or (PERSIST) each round's, set where the
  // round starts (the consumers read the count from the round's first step).
  CtaWork work{0, 0, 0, 0, 0};
  int count = 0;
  const int row_tiles = (rows_total + kWsRows - 1) / kWsRows, items = row_tiles * p.num_kv_heads;
  if constexpr (!PERSIST) {
    work = cta_work<D, false, kWsThreads, 2>(p, kWsRows);  // even splits, lazy ones too
    count = warp_uniform(work.tile_end - work.tile_begin);
    for (int r = threadIdx.x; r < kWsRows; r += kWsThreads) {
      const int row = work.row0 + r;
      row_key_limit[r] = row < rows_total ? p.prior + row / group_size : -1;
    }
  }
  if (threadIdx.x == 0) {
    for (int i = 0; i < kKStages; ++i) {
      mbar_init(&full_k[i], 2 * 128);  // every producer thread twice: its key stores, then its copies landed
      mbar_init(&empty_k[i], 128 * kWsConsumers);  // every consumer thread, its reads of the stage done
    }
    for (int i = 0; i < kVStages; ++i) {
      mbar_init(&full_v[i], 128);  // every producer thread, its copies landed
      mbar_init(&empty_v[i], 128 * kWsConsumers);
    }
    mbar_init(q_full, QMAP ? 1 : 128);  // producer thread 0's bulk copy, or every producer thread's copies
    mbar_init(q_empty, 128 * kWsConsumers);  // every consumer thread, done with a query buffer
  }
  __syncthreads();
  const int warp = threadIdx.x / 32;

  if (warp < 4) {
    // Producer. Thread t copies kCpt consecutive columns of each 64-key tile at one 16-byte slice
    // of the head dim.
    setmaxnreg_dec<kProducerRegs>();
    if (!PERSIST && count <= 0) return;  // an empty split (a range past the visible tiles)
    constexpr int kChunks = D / 8, kCpt = kKeys * kChunks / 128;
    const int t = threadIdx.x;
    const int copy_dim = (t % kChunks) * 8, copy_col0 = (t / kChunks) * kCpt;
    const int block_shift = __ffs(p.block_size) - 1;  // block sizes divide 64: powers of two
    const bool shared_entry = p.block_size >= kCpt;   // the thread's columns lie in one block
    const int entry = copy_col0 >> block_shift, slot0 = copy_col0 & (p.block_size - 1);
    KvTile end_desc;
    end_desc.key_start = p.prior + p.n;
    int first_row_limit = p.prior + work.row0 / group_size;  // the last key the row tile's first row sees
    auto desc_of = [&](int i) {
      const int ti = work.tile_begin + i;
      return ti < p.num_tiles ? p.tiles[ti] : end_desc;
    };
    auto entry_of = [&](const KvTile& d) {
      return shared_entry && entry < d.entry_count ? p.entries[d.entry_begin + entry] : KvEntry{0, 0, 0, 0};
    };
    // This thread's columns of tile d (its shared entry ref) from pool into rows half * kKeys + ...
    // of the stage at dst, and their keys (key_dst: null, or this thread's first column's slot).
    // Empty columns copy 0 bytes (zero fill) from an address inside the pool.
    auto copy_tile = [&](const bf16_bits* pool, __nv_bfloat16* dst, int half, const KvTile& d, const KvEntry& ref,
                         int* key_dst) {
      if (shared_entry) {
        const bf16_bits* src =
            pool + ((int64_t(ref.block) * p.num_kv_heads + work.kv_head) * p.block_size + slot0) * D + copy_dim;
        if (ref.valid == p.block_size) {
          // A full block (the common case): every column a key, so the copies go back to back, with
          // no zero-fill predicate (ptxas pads each copy it interleaves with other work with three
          // issue slots of no-ops).
#pragma unroll
          for (int j = 0; j < kCpt; ++j) {
            cp_async16(dst + tile_at<D, true>(half * kKeys + copy_col0 + j, copy_dim, kStepKeys), src + j * D);
          }
          if (key_dst != nullptr) {
#pragma unroll
            for (int j = 0; j < kCpt; ++j) key_dst[j] = ref.key_start + slot0 + j;
          }
          return;
        }
#pragma unroll
        for (int j = 0; j < kCpt; ++j) {
          const bool valid = slot0 + j < ref.valid;
          cp_async16(dst + tile_at<D, true>(half * kKeys + copy_col0 + j, copy_dim, kStepKeys), src + j * D,
                     valid ? 16 : 0);
          if (key_dst != nullptr) key_dst[j] = valid ? ref.key_start + slot0 + j : INT_MAX;
        }
      } else {
        // Blocks smaller than kCpt slots: one entry per column (rare; nothing prefetched).
#pragma unroll 1
        for (int j = 0; j < kCpt; ++j) {
          const int col = copy_col0 + j;
          const int e = col >> block_shift, slot = col & (p.block_size - 1);
          const KvEntry r = e < d.entry_count ? p.entries[d.entry_begin + e] : KvEntry{0, 0, 0, 0};
          const bool valid = slot < r.valid;
          const int64_t offset =
              ((int64_t(r.block) * p.num_kv_heads + work.kv_head) * p.block_size + slot) * D + copy_dim;
          cp_async16(dst + tile_at<D, true>(half * kKeys + col, copy_dim, kStepKeys), pool + offset, valid ? 16 : 0);
          if (key_dst != nullptr) key_dst[j] = valid ? r.key_start + slot : INT_MAX;
        }
      }
    };
    // Lazy: the end of the K/V walk's current shift run (count: none) and of the next one.
    int run_end = count, run_end_next = count;
    // Lazy: the next change of shift in this range for the query copies (count: none), its shift's
    // index and the change after it, each read a change ahead; the consumers stage the first query
    // themselves. What is read ahead (the same in every lane) is made warp-uniform only where it
    // is used, so no load is waited for at once.
    int next_change = count, next_run = 0, change_after = count, query_loads = 0, last_change = 0;
    auto look_ahead = [&] {
      if (next_change < count) {
        next_run = p.tile_shift_index[work.tile_begin + next_change];
        change_after = run_change(p, work, work.tile_begin + next_change);
      }
    };
    if constexpr (LAZY) {
      run_end = next_change = warp_uniform(run_change(p, work, work.tile_begin));
      if (run_end < count) run_end_next = run_change(p, work, work.tile_begin + run_end);
      look_ahead();
    }
    // The step's tile descriptors (d2: the one after, for its key count) and shared entries.
    KvTile d0 = desc_of(0), d1 = desc_of(1), d2 = desc_of(2);
    KvEntry e0 = entry_of(d0), e1 = entry_of(d1);
    int i = 0, step = 0;
    // One step: tiles i and (if it is in the same shift run) i + 1.
    auto issue_step = [&] {
      const int stage = step % kKStages, v_stage = step % kVStages;
      const bool wide = i + 1 < run_end;
      __nv_bfloat16* k_dst = k_s + stage * kStage;
      __nv_bfloat16* v_dst = v_s + v_stage * kStage;
      int* key_dst = copy_dim == 0 ? col_key + stage * kStepKeys + copy_col0 : nullptr;
      if (step >= kKStages) mbar_wait(&empty_k[stage], (step / kKStages - 1) & 1);
      copy_tile(p.k_pool, k_dst, 0, d0, e0, key_dst);
      if (wide) {
        copy_tile(p.k_pool, k_dst, 1, d1, e1, key_dst == nullptr ? nullptr : key_dst + kKeys);
      } else if (key_dst != nullptr) {
#pragma unroll
        for (int j = 0; j < kCpt; ++j) key_dst[kKeys + j] = INT_MAX;  // no second tile: masked
      }
      // Mask a step with one tile, with empty slots, or reaching past the CTA's first row's causal limit.
      if (t == 0) {
        masked[stage] = !wide || d1.key_start - d0.key_start != kKeys || d2.key_start - d1.key_start != kKeys ||
                        d1.key_start + kKeys - 1 > first_row_limit;
        if constexpr (PERSIST) step_tiles[stage] = count;
      }
      mbar_arrive(&full_k[stage]);            // releases this thread's key and mask stores
      mbar_arrive_on_copies(&full_k[stage]);  // and this when its copies have landed
      if (step >= kVStages) mbar_wait(&empty_v[v_stage], (step / kVStages - 1) & 1);
      copy_tile(p.v_pool, v_dst, 0, d0, e0, nullptr);
      if (wide) {
        copy_tile(p.v_pool, v_dst, 1, d1, e1, nullptr);
      } else {
        // A step of one tile still multiplies the whole stage (a branch around the products would
        // serialise them): the missing tile's values as zeros, as its weights are (0 times stale
        // bits may be NaN), and its keys masked.
#pragma unroll
        for (int j = 0; j < kCpt; ++j) {
          cp_async16(v_dst + tile_at<D, true>(kKeys + copy_col0 + j, copy_dim, kStepKeys), p.v_pool, 0);
        }
      }
      mbar_arrive_on_copies(&full_v[v_stage]);
      i += wide ? 2 : 1;
      ++step;
      // Metadata of the next step, loaded now and used there.
      d0 = wide ? d2 : d1;
      d1 = desc_of(i + 1);
      d2 = desc_of(i + 2);
      e0 = entry_of(d0);
      e1 = entry_of(d1);
    };
    if constexpr (PERSIST) {
      // Round after round, the steps running on through the rings; the next round's visible tiles
      // are counted once this round's first step is out (the producer would wait for a free stage
      // there anyway). The grid is at most the item count, so round 0 always has one.
      auto work_of = [&](int item) {
        const int2 tile_head = item_tile_head<D>(p, item, row_tiles);
        CtaWork w{tile_head.y, 0, tile_head.x * kWsRows, 0, 0};
        const int last_token = (min(rows_total, w.row0 + kWsRows) - 1) / group_size;
        w.tile_end = warp_visible_tiles(p, p.prior + last_token);
        return w;
      };
      int item = persistent_item(0);
      CtaWork next = work_of(item);
      for (int round = 0; item < items;) {
        work = next;
        count = run_end = warp_uniform(work.tile_end);
        first_row_limit = p.prior + work.row0 / group_size;
        i = 0;
        d0 = desc_of(0);
        d1 = desc_of(1);
        d2 = desc_of(2);
        e0 = entry_of(d0);
        e1 = entry_of(d1);
        issue_step();
        item = persistent_item(++round);
        if (item < items) next = work_of(item);
        while (i < count) issue_step();
      }
    } else if (!LAZY || next_change >= count) {
      // Plain calls, and lazy CTAs whose range holds one shift run, walk the steps alone: the lazy
      // loop's query code around them, even where never taken, made the producer slower (causal
      // prompts, lazy over plain on an H100: +1.3-2.4 % with it, +0.8-0.9 % without).
      while (i < count) issue_step();
    } else if constexpr (LAZY) {
      // Lazy: the steps run in pieces that end at a change of shift or where the next change's
      // query is due, so the loop over steps holds nothing but the copies (with the query code
      // inside it, the producer ran 3 % slower even where no change is ever taken). The next
      // shift's rotated query goes into the other buffer once the consumers are done with the
      // query before it there: the first change's after the first step, each later one
      // 2 * kKStages + 2 tiles after the change before it (the ring then proves the consumers past
      // that change, so the wait returns at once), or at the change itself if that comes first.
      // Thread t stages dims q_dim.. of rows q_row0, q_row0 + kQRowStep, ...; their (token, head)
      // advance by a fixed step (no division in the copy loop). A query goes in kQPieces pieces,
      // one after each step (all at once close to its change): in one burst it delayed the K/V
      // copies behind it (512-token RAG shape, lazy over plain: +6.0-6.3 % -> +4.7-4.9 %).
      constexpr int kQRowStep = 128 / kChunks, kQIters = kWsRows / kQRowStep, kQPieces = 4;
      static_assert(kQIters % kQPieces == 0, "a query's rows split evenly into its pieces");
      const int q_dim = (t % kChunks) * 8, q_row0 = t / kChunks;
      const int q_token_step = kQRowStep / group_size, q_head_step = kQRowStep % group_size;
      const bf16_bits* q = nullptr;
      __nv_bfloat16* q_dst = nullptr;
      int row = 0, token = 0, head = 0, piece = 0;
      int load_at = next_change < count ? 1 : count;
      while (i < count) {
        const int stop = min(run_end, load_at);
        while (i < stop) issue_step();
        if (QMAP && i >= load_at) {
          // The whole query through the tensor memory accelerator, issued by thread 0, so the K/V
          // copies keep the producer's issue slots (a query through cp.async took ~35 instructions
          // a 16-byte copy; 512-token RAG shape, lazy over plain: +7.3-7.5 % -> +5.6-5.7 %, H100).
          // In eight boxes, one after each step, it was slower (+7.0-7.1 %).
          if (t == 0) {
            if (query_loads > 0) mbar_wait(q_empty, (query_loads - 1) & 1);
            __nv_bfloat16* dst = q_s + ((query_loads + 1) & 1) * kQTile;
            mbar_arrive_expect_tx(q_full, kWsRows * D * 2);
            const int token0 = work.row0 / group_size;
#pragma unroll
            for (int half = 0; half < D / 64; ++half) {
              tma_load_4d(dst + half * kWsRows * 64, &q_map, half * 64, work.kv_head * group_size, token0, next_run,
                          q_full);
            }
          }
          ++query_loads;
          last_change = next_change;
          next_change = warp_uniform(change_after);
          look_ahead();
          load_at = next_change < count ? min(next_change, last_change + 2 * kKStages + 2) : count;
        } else if (!QMAP && i >= load_at) {
          if (piece == 0) {
            if (query_loads > 0) mbar_wait(q_empty, (query_loads - 1) & 1);
            q = p.q_rotated + int64_t(next_run) * p.n * p.num_heads * D;
            // Rows kQRowStep (a multiple of 8) apart keep their swizzle: 64 elements a row further on.
            q_dst = q_s + ((query_loads + 1) & 1) * kQTile + tile_at<D, true>(q_row0, q_dim, kWsRows);
            row = work.row0 + q_row0;
            token = row / group_size;
            head = work.kv_head * group_size + row % group_size;
          }
          const int pieces = next_change - i <= 2 * kQPieces + 2 ? kQPieces - piece : 1;
#pragma unroll 1
          for (int it = 0; it < pieces * (kQIters / kQPieces); ++it, q_dst += kQRowStep * 64) {
            const bool valid = row < rows_total;
            cp_async16(q_dst, q + (int64_t(valid ? token : 0) * p.num_heads + head) * D + q_dim, valid ? 16 : 0);
            row += kQRowStep;
            token += q_token_step;
            head += q_head_step;
            if (head >= (work.kv_head + 1) * group_size) {
              head -= group_size;
              ++token;
            }
          }
          piece += pieces;
          if (piece == kQPieces) {
            piece = 0;
            mbar_arrive_on_copies(q_full);
            ++query_loads;
            last_change = next_change;
            next_change = warp_uniform(change_after);
            look_ahead();
            load_at = next_change < count ? min(next_change, last_change + 2 * kKStages + 2) : count;
          } else {
            load_at = i + 1;
          }
        }
        if (i == run_end && i < count) {
          run_end = warp_uniform(run_end_next);
          run_end_next = run_end < count ? run_change(p, work, work.tile_begin + run_end) : count;
        }
      }
    }
    cp_async_wait<0>();  // no copy outlives its thread
    return;
  }

  // Consumers: warp c (0..7) owns rows 16c..16c+15 of the CTA, its warpgroup the 64 around them.
  setmaxnreg_inc<kConsumerRegs>();
  const int cw = warp - 4;
  const int wg = warp_uniform(cw / 4);
  float o[1][D / 8][4];
  float row_max[1][2], row_sum[1][2];
  auto reset_rows = [&] {
    row_max[0][0] = row_max[0][1] = -INFINITY;
    row_sum[0][0] = row_sum[0][1] = 0.0f;
#pragma unroll
    for (int i = 0; i < D / 8; ++i) o[0][i][0] = o[0][i][1] = o[0][i][2] = o[0][i][3] = 0.0f;
  };
  reset_rows();
  // This warpgroup's 64 query rows of `at` (lazy: of the first tile's shift, rotated) into query
  // buffer `buffer` by cp.async; query_landed() waits for them (named barrier 2 + wg, 128 threads).
  auto stage_query = [&](int buffer, const CtaWork& at) {
    const bf16_bits* q = p.q;
    int64_t q_stride = p.q_row_stride;
    if constexpr (LAZY) {
      q = p.q_rotated + int64_t(p.tile_shift_index[at.tile_begin]) * p.n * p.num_heads * D;
      q_stride = int64_t(p.num_heads) * D;
    }
    constexpr int kChunks = D / 8;
    for (int idx = threadIdx.x % 128; idx < 64 * kChunks; idx += 128) {
      const int r = wg * 64 + idx / kChunks, dim = (idx % kChunks) * 8;
      const int row = at.row0 + r;
      const bool valid = row < rows_total;
      const int token = valid ? row / group_size : 0;
      const int head = at.kv_head * group_size + (valid ? row % group_size : 0);
      cp_async16(q_s + buffer * kQTile + tile_at<D, true>(r, dim, kWsRows), q + token * q_stride + head * D + dim,
                 valid ? 16 : 0);
    }
    cp_async_commit();
  };
  auto query_landed = [&] {
    cp_async_wait<0>();
    fence_proxy_async_shared();  // the rows are read by the tensor cores next
    wg == 0 ? named_sync<2>() : named_sync<3>();
  };
  // Steps taken so far (every barrier's stage and phase; persistent: over all the CTA's rounds)
  // and the query buffer of the current rows (lazy: the next shift's goes to the other one).
  int step = 0, q_buffer = 0;
  // One row tile's walk over its `count` tiles, its query in buffer q_buffer (PERSIST: the count
  // is read from the first step). Lazy: next_change is the next change of shift (count: none) and
  // change_after the one after it, read a change ahead (the same in every lane).
  auto walk = [&](int next_change, int change_after) {
    float s[1][kStepKeys / 8][4];
#pragma unroll
    for (int i = 0; i < kStepKeys / 8; ++i) s[0][i][0] = s[0][i][1] = s[0][i][2] = s[0][i][3] = 0.0f;
    uint32_t pa[kStepKeys / 16][4];
    float correction[1][2];
    // Matrix descriptors' low words built once; a stage, query buffer or k-step moves the start
    // address, which counts 16 bytes (8 elements), by its element offset / 8 (shared addresses stay
    // below 2^18, so the 14-bit field never carries into the next).
    const uint32_t q_lo0 = swizzled_desc_lo(q_s + wg * 64 * 64, 16);
    const uint32_t k_lo0 = swizzled_desc_lo(k_s, 16);
    const uint32_t v_lo0 = swizzled_desc_lo(v_s, kStepKeys * 128);
    auto issue_scores = [&](int stage) {  // S = Q K^T, Q and K K-major in shared memory
      const uint32_t q_lo = q_lo0 + (kTwoQueries ? q_buffer * (kQTile / 8) : 0);
      const uint32_t k_lo = k_lo0 + stage * (kStage / 8);
      auto step = [](int kk, int rows) { return ((kk / 4) * rows * 64 + (kk % 4) * 16) / 8; };
      wgmma_ss_n128_kmajor<false>(s[0], q_lo, k_lo);
#pragma unroll
      for (int kk = 1; kk < D / 16; ++kk) {
        wgmma_ss_n128_kmajor<true>(s[0], q_lo + step(kk, kWsRows), k_lo + step(kk, kStepKeys));
      }
      wgmma_commit();
      wgmma_pin(s[0]);
    };
    auto issue_values = [&](int stage) {  // O += P V, V MN-major (16 keys a k-step, D halves kStepKeys rows apart)
      const uint32_t v_lo = v_lo0 + stage * (kStage / 8);
#pragma unroll
      for (int kk = 0; kk < kStepKeys / 16; ++kk) {
        if constexpr (D == 128) {
          wgmma_rs_n128_mnmajor(o[0], pa[kk], v_lo + kk * 16 * 64 / 8);
        } else {
          wgmma_rs_n64_mnmajor(o[0], pa[kk], v_lo + kk * 16 * 64 / 8);
        }
      }
      wgmma_commit();
      wgmma_pin(o[0]);
    };
    auto softmax = [&](int stage) {
      if (masked[stage]) {
        softmax_scores<D, 1, true, kStepKeys>(s, col_key + stage * kStepKeys, row_key_limit, cw * 16, row_max,
                                              row_sum, correction);
      } else {
        softmax_scores<D, 1, false, kStepKeys>(s, col_key + stage * kStepKeys, row_key_limit, cw * 16, row_max,
                                               row_sum, correction);
      }
    };
    // A step takes two tiles unless the second is past the range or in another shift run.
    auto step_width = [&](int i) { return i + 1 < next_change ? 2 : 1; };

    // The two consumer warpgroups take turns issuing their products (named barriers 4 and 5, each
    // waited at by one warpgroup and arrived at by the other), so one's softmax runs under the
    // other's matrix work.
    auto my_turn = [&] { pair_sync(4 + wg); };
    auto their_turn = [&] { pair_arrive(5 - wg); };
    if (wg == 1) pair_arrive(4);  // warpgroup 0 goes first
    // The first step: its scores and weights; O is still zero, nothing to rescale.
    int stage = step % kKStages;
    mbar_wait(&full_k[stage], (step / kKStages) & 1);
    if constexpr (PERSIST) next_change = count = warp_uniform(step_tiles[stage]);
    fence_proxy_async_shared();  // the stage's generic-proxy copies, seen here, to the tensor cores
    my_turn();
    wgmma_fence();
    issue_scores(stage);
    their_turn();
    wgmma_wait<0>();
    softmax(stage);
    mbar_arrive(&empty_k[stage]);  // each thread releases its own reads (scores waited for, keys read)
    pack_weights<kStepKeys>(s[0], pa);
    int prev = step % kVStages;
    ++step;
    for (int i = step_width(0); i < count; ++step) {
      stage = step % kKStages;
      if (LAZY && i == next_change) {
        // The range crosses into another shift run: its rotated query, staged by the producer in
        // the other buffer; no product reads the current one any more (all waited for).
        mbar_wait(q_full, q_buffer);  // the buffer flips with each query, so its index is the phase
        mbar_arrive(q_empty);
        q_buffer ^= 1;
        // change_after was read a change ago; made warp-uniform only here, so its load is never
        // waited for on the way to a product.
        next_change = warp_uniform(change_after);
        if (next_change < count) change_after = run_change(p, work, work.tile_begin + next_change);
      }
      const int width = step_width(i);
      mbar_wait(&full_k[stage], (step / kKStages) & 1);
      mbar_wait(&full_v[prev], ((step - 1) / kVStages) & 1);
      fence_proxy_async_shared();  // also covers the query rows waited for above
      my_turn();
      wgmma_fence();
      issue_scores(stage);
      issue_values(prev);  // P·V of the previous step runs under this step's softmax
      their_turn();
      wgmma_wait<1>();
      softmax(stage);
      mbar_arrive(&empty_k[stage]);
      wgmma_wait<0>();
      mbar_arrive(&empty_v[prev]);
      pack_weights<kStepKeys>(s[0], pa);  // after the wait: the previous P was the product's operand until now
      rescale_rows<D, 1>(o, correction);
      prev = step % kVStages;
      i += width;
    }
    mbar_wait(&full_v[prev], ((step - 1) / kVStages) & 1);
    fence_proxy_async_shared();
    my_turn();
    wgmma_fence();
    issue_values(prev);
    their_turn();
    if (wg == 0) my_turn();  // warpgroup 1's last arrival: both barriers end balanced
    wgmma_wait<0>();
    // Persistent: the last step's V stage back to the producer, whose next rounds refill it (a CTA
    // a row tile ends here, and its last stage is never waited for).
    if constexpr (PERSIST) mbar_arrive(&empty_v[prev]);
  };

  if constexpr (!PERSIST) {
    if (count > 0) {
      int next_change = count, change_after = count;
      if constexpr (LAZY) {  // read while the query is on its way
        next_change = warp_uniform(run_change(p, work, work.tile_begin));
        if (next_change < count) change_after = run_change(p, work, work.tile_begin + next_change);
      }
      stage_query(0, work);
      query_landed();
      walk(next_change, change_after);
    }
    store_rows<D>(p, o[0], row_max[0], row_sum[0], work.row0 + cw * 16, work.kv_head, work.split);
  } else {
    // Round after round (the producer's order): the next round's query goes into the other buffer
    // while this round is walked.
    auto rows_of = [&](int item) {
      const int2 tile_head = item_tile_head<D>(p, item, row_tiles);
      return CtaWork{tile_head.y, 0, tile_head.x * kWsRows, 0, 0};
    };
    int item = persistent_item(0);
    work = rows_of(item);
    stage_query(0, work);
    query_landed();
    for (int round = 0;;) {
      // This warp's rows' causal limits (the softmax reads only its own 16).
      if (threadIdx.x % 32 < 16) {
        const int row = work.row0 + cw * 16 + threadIdx.x % 32;
        row_key_limit[cw * 16 + threadIdx.x % 32] = row < rows_total ? p.prior + row / group_size : -1;
      }
      __syncwarp();
      const int next_item = persistent_item(++round);
      const CtaWork next = rows_of(next_item);
      if (next_item < items) stage_query(q_buffer ^ 1, next);
      walk(count, count);
      store_rows<D>(p, o[0], row_max[0], row_sum[0], work.row0 + cw * 16, work.kv_head, 0);
      reset_rows();
      // Warpgroup 1 may not arrive at the next round's first turn before warpgroup 0 has passed
      // its last one of this round (a second arrival would complete that barrier alone).
      pair_sync(6);
      if (next_item >= items) break;
      work = next;
      query_landed();
      q_buffer ^= 1;
    }
  }
#else
  (void)p;
  __trap();
#endif
}

}  // namespace
}  // namespace lazyscope::cuda

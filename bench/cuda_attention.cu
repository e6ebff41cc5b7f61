// Decode and prefill attention kernels, lazy vs plain, for Llama-3.1-8B attention shapes
// (32 query / 8 KV heads, head dim 128, 16-token blocks). Prints tables; run on the GPU machine.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <functional>
#include <memory>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "bench/cuda_bench_util.h"
#include "kernels/cuda/attention.h"
#include "kernels/cuda/device_buffer.h"
#include "kernels/cuda/ops.h"
#include "kernels/cuda_entry.h"
#include "base/error.h"
#include "kernels/rope.h"

using namespace lazyscope;
using namespace lazyscope::cuda;

namespace {

constexpr int kHeads = 32, kKvHeads = 8, kDim = 128, kBlock = 16;
constexpr int kDocTokens = 2048;  // lazy tables change shift every document

struct Pool {
  DeviceBuffer k, v;
  int blocks = 0;
};

Pool make_pool(int blocks) {
  Pool pool;
  pool.blocks = blocks;
  const std::size_t elements = std::size_t(blocks) * kKvHeads * kBlock * kDim;
  pool.k.resize(elements * 2);
  pool.v.resize(elements * 2);
  fill_random_bf16(pool.k.as<bf16_bits>(), int64_t(elements), 1, 1.0f, nullptr);
  fill_random_bf16(pool.v.as<bf16_bits>(), int64_t(elements), 2, 1.0f, nullptr);
  return pool;
}

// A table of `tokens` keys over shuffled blocks [first, first + tokens / kBlock); lazy tables
// give every cached document (keys before `cached`) its own shift; new tokens stay at shift 0.
std::vector<KvEntry> make_table(int tokens, int first_block, bool lazy, std::mt19937& rng, int cached = 1 << 30,
                                int doc_tokens = kDocTokens) {
  const int blocks = (tokens + kBlock - 1) / kBlock;
  std::vector<int> order(blocks);
  std::iota(order.begin(), order.end(), first_block);
  std::shuffle(order.begin(), order.end(), rng);
  std::vector<KvEntry> table(blocks);
  for (int b = 0; b < blocks; ++b) {
    const int doc = b * kBlock / doc_tokens;
    const bool shifted = lazy && b * kBlock < cached;
    table[b] = KvEntry{order[b], shifted ? doc * doc_tokens + 3 : 0, std::min(kBlock, tokens - b * kBlock), 0};
  }
  return table;
}

template <typename T>
DeviceBuffer upload(const std::vector<T>& items) {
  DeviceBuffer buffer(items.size() * sizeof(T) + 16);
  LAZYSCOPE_CUDA_CHECK(cudaMemcpy(buffer.as<void>(), items.data(), items.size() * sizeof(T), cudaMemcpyHostToDevice));
  return buffer;
}

// The KV write's fields every call here shares: the shape, the pool and the frequencies.
KvWriteParams kv_write_params(const Pool& pool, const DeviceBuffer& inv_freq) {
  KvWriteParams kw;
  kw.num_heads = kHeads;
  kw.num_kv_heads = kKvHeads;
  kw.head_dim = kDim;
  kw.block_size = kBlock;
  kw.inv_freq = inv_freq.as<float>();
  kw.k_pool = pool.k.as<bf16_bits>();
  kw.v_pool = pool.v.as<bf16_bits>();
  return kw;
}

// One prefill step of one layer as the backend runs it: kv_write (new K/V into the pool and the
// query rotation), then attention. Owns its metadata, query and workspace buffers.
struct PrefillCase {
  DeviceBuffer entries, tiles, shifts, tile_shift, run_end, q_rotated, positions, slots, qkv, out, ranges, po, pml;
  KvWriteParams kw;
  PrefillParams p;
  int splits = 1;
  int kernel_splits[3] = {1, 1, 1};  // plain splits by PrefillParams::Kernel (Auto, MmaSync, Wgmma)

  PrefillCase(const Pool& pool, const std::vector<KvEntry>& table, int n, bool lazy, const DeviceBuffer& inv_freq) {
    AttentionPlan plan;
    append_table(plan, table.data(), int(table.size()), kBlock, lazy);
    const int total = plan.seq_total_keys[0];
    entries = upload(plan.entries);
    tiles = upload(plan.tiles);
    shifts = upload(plan.distinct_shifts);
    tile_shift = upload(plan.tile_shift_index);
    run_end = upload(plan.tile_run_end);
    const int num_shifts = int(plan.distinct_shifts.size());
    q_rotated.resize(lazy ? lazy_query_workspace_elements(n, kHeads, kDim, num_shifts) * 2 : 16);
    std::vector<int32_t> host_positions(n), host_slots(n);
    for (int i = 0; i < n; ++i) {
      host_positions[i] = total - n + i + 5;
      const int key = total - n + i;  // every block but the last is full
      host_slots[i] = table[key / kBlock].block * kBlock + key % kBlock;
    }
    positions = upload(host_positions);
    slots = upload(host_slots);
    // The backend's qkv rows: [q | k | v].
    const int64_t row = int64_t(kHeads + 2 * kKvHeads) * kDim;
    qkv.resize(std::size_t(n) * row * 2);
    out.resize(std::size_t(n) * kHeads * kDim * 2);
    fill_random_bf16(qkv.as<bf16_bits>(), int64_t(n) * row, 5, 1.0f, nullptr);
    // Each kernel's own split count, as the backend would choose it (plain calls; the lazy ones
    // run the default kernel alone).
    for (PrefillParams::Kernel kernel : {PrefillParams::Kernel::Auto, PrefillParams::Kernel::MmaSync,
                                         PrefillParams::Kernel::Wgmma}) {
      PrefillParams probe;
      probe.head_dim = kDim;
      probe.kernel = kernel;
      kernel_splits[int(kernel)] = prefill_num_splits(n, kHeads, kKvHeads, int(plan.tiles.size()), device_sm_count(), probe);
    }
    const int plain_splits = kernel_splits[int(PrefillParams::Kernel::Auto)];
    const std::vector<int32_t> host_ranges = lazy_split_ranges(plan, 0, plain_splits);
    PrefillParams probe;
    probe.head_dim = kDim;
    splits = lazy && prefill_splits_follow_shift_runs(probe) ? int(host_ranges.size() / 2) : plain_splits;
    ranges = upload(host_ranges);
    const int most_splits = std::max({splits, kernel_splits[int(PrefillParams::Kernel::MmaSync)],
                                      kernel_splits[int(PrefillParams::Kernel::Wgmma)]});
    po.resize(split_partial_o_floats(n * kHeads, most_splits, kDim) * 4);
    pml.resize(split_partial_ml_floats(n * kHeads, most_splits) * 4);
    // Pool writes land on this table's own blocks (the pool is shared by the shapes).
    kw = kv_write_params(pool, inv_freq);
    kw.k = qkv.as<bf16_bits>() + kHeads * kDim;
    kw.v = qkv.as<bf16_bits>() + (kHeads + kKvHeads) * kDim;
    kw.row_stride = row;
    kw.q = qkv.as<bf16_bits>();
    kw.q_row_stride = row;
    kw.shifts = lazy ? shifts.as<int32_t>() : nullptr;
    kw.num_shifts = lazy ? num_shifts : 0;
    kw.q_rotated = lazy ? q_rotated.as<bf16_bits>() : nullptr;
    kw.positions = positions.as<int32_t>();
    kw.slots = slots.as<int32_t>();
    kw.n = n;
    p.q = qkv.as<bf16_bits>();
    p.q_row_stride = row;
    p.q_positions = positions.as<int32_t>();
    p.k_pool = pool.k.as<bf16_bits>();
    p.v_pool = pool.v.as<bf16_bits>();
    p.entries = entries.as<KvEntry>();
    p.tiles = tiles.as<KvTile>();
    p.num_tiles = int(plan.tiles.size());
    p.n = n;
    p.prior = total - n;
    p.num_heads = kHeads;
    p.num_kv_heads = kKvHeads;
    p.head_dim = kDim;
    p.block_size = kBlock;
    p.inv_freq = inv_freq.as<float>();
    p.lazy = lazy;
    p.shifts = shifts.as<int32_t>();
    p.tile_shift_index = tile_shift.as<int32_t>();
    p.tile_run_end = run_end.as<int32_t>();
    p.num_shifts = num_shifts;
    p.q_rotated = q_rotated.as<bf16_bits>();
    p.q_rotated_ready = lazy;  // lazy: the fused kv_write fills the copies
    p.split_ranges = ranges.as<int32_t>();
    p.out = out.as<bf16_bits>();
    p.num_splits = splits;
    p.partial_o = po.as<float>();
    p.partial_ml = pml.as<float>();
    kv_write(kw, nullptr);  // lazy: fills q_rotated for the attention-only timing
  }
  void attention() const { prefill_attention(p, nullptr); }
  void attention_on(PrefillParams::Kernel kernel) const {  // a given kernel, whatever the default is here
    PrefillParams forced = p;
    forced.kernel = kernel;
    forced.num_splits = kernel_splits[int(kernel)];
    prefill_attention(forced, nullptr);
  }
  void attention_persistent(bool on) const {  // the default kernel with persistent CTAs, or a CTA a row tile
    PrefillParams chosen = p;
    chosen.persistent = on;
    prefill_attention(chosen, nullptr);
  }
  void step() const {
    kv_write(kw, nullptr);
    prefill_attention(p, nullptr);
  }
  void attention_with_prepass() const {  // lazy: the unfused path (its own rotation pre-pass)
    PrefillParams unfused = p;
    unfused.q_rotated_ready = false;
    prefill_attention(unfused, nullptr);
  }
};

// Plain (a) and lazy (b) timed in alternation, ABBA order over the repeats, so clock drift
// cancels: medians of each, and the median of the per-repeat ratios b / a. A sample runs `inner`
// calls back to back, more where that takes under `min_sample_ms` (short kernels: the events'
// resolution and the first launch's latency then weigh less).
struct PairTimes {
  double a_ms = 0, b_ms = 0, ratio = 1;
};

PairTimes time_pair(const std::function<void()>& a, const std::function<void()>& b, int repeats = 15, int inner = 5,
                    double min_sample_ms = 0.0) {
  cudaEvent_t start, stop;
  LAZYSCOPE_CUDA_CHECK(cudaEventCreate(&start));
  LAZYSCOPE_CUDA_CHECK(cudaEventCreate(&stop));
  auto time_once = [&](const std::function<void()>& body) {
    LAZYSCOPE_CUDA_CHECK(cudaEventRecord(start, nullptr));
    for (int i = 0; i < inner; ++i) body();
    LAZYSCOPE_CUDA_CHECK(cudaEventRecord(stop, nullptr));
    LAZYSCOPE_CUDA_CHECK(cudaEventSynchronize(stop));
    float ms = 0.0f;
    LAZYSCOPE_CUDA_CHECK(cudaEventElapsedTime(&ms, start, stop));
    return double(ms) / inner;
  };
  for (int i = 0; i < 3; ++i) {
    a();
    b();
  }
  LAZYSCOPE_CUDA_CHECK(cudaDeviceSynchronize());
  if (min_sample_ms > 0.0) {
    const double per_call = time_once(a);
    if (per_call > 0.0 && per_call * inner < min_sample_ms) inner = int(std::ceil(min_sample_ms / per_call));
  }
  std::vector<double> ta, tb, ratios;
  for (int r = 0; r < repeats; ++r) {
    double x, y;
    if (r % 2 == 0) {
      x = time_once(a);
      y = time_once(b);
    } else {
      y = time_once(b);
      x = time_once(a);
    }
    ta.push_back(x);
    tb.push_back(y);
    ratios.push_back(y / x);
  }
  LAZYSCOPE_CUDA_CHECK(cudaEventDestroy(start));
  LAZYSCOPE_CUDA_CHECK(cudaEventDestroy(stop));
  auto median = [](std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
  };
  return {median(ta), median(tb), median(ratios)};
}

void prefill_table(const DeviceBuffer& inv_freq, int only_shape) {
  std::printf("\n## Prefill attention (32/8 heads, D 128, block 16; lazy: cached docs shifted, new tokens at shift 0)\n"
              "## attn = attention kernel alone (plain: q rotated at write; lazy: per-shift q copies already written);\n"
              "## step = kv_write + attention (plain: q rotated in place; lazy: fused per-shift rotation);\n"
              "## plain and lazy timed in alternation (ABBA); overhead = median of the per-repeat lazy/plain ratios;\n"
              "## lazy pre-pass = lazy attention with its own rotation pre-pass (the unfused path);\n"
              "## kernel: the default here (%s); last columns: plain attention on the mma.sync kernel and on\n"
              "## the two-CTA wgmma kernel (where there is one), each at its own split count (as the backend\n"
              "## would choose it) and timed in alternation with the default, and the default's time over theirs;\n"
              "## persistent: the default kernel with persistent CTAs (PrefillParams::persistent) against a CTA a\n"
              "## row tile, in alternation, and its time over theirs (calls without splits; the RAG rows split\n"
              "## the keys, so both time the same launch there); a persistent lazy call with one shift (the causal\n"
              "## rows: no cached document) is the plain walk on that shift's rotated query, so its overhead is nil\n",
              [&] {
                PrefillParams probe;
                probe.head_dim = kDim;
                return prefill_kernel_name(probe);
              }());
  std::printf("| shape | keys | splits plain/lazy | plain attn µs | lazy attn µs | attn overhead | plain step µs | "
              "lazy step µs | step overhead | lazy pre-pass µs | plain TFLOP/s | lazy TFLOP/s | mma.sync plain µs | "
              "mma.sync TFLOP/s | default / mma.sync | wgmma plain µs | wgmma TFLOP/s | default / wgmma | persistent plain µs | "
              "a CTA a row tile, plain µs | persistent / a CTA a tile | persistent / a CTA a tile, lazy |\n");
  std::printf("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
              "---:|\n");
  Pool pool = make_pool(16384 / kBlock + 16);
  std::mt19937 rng(7);
  int shapes_seen = 0;
  struct Shape {
    const char* name;
    int prior, n;
    bool causal_full;
  };
  for (Shape s : {Shape{"4 docs x 2K + 64-token query", 4 * 2048, 64, false},
                  Shape{"5 docs x 2K + 512-token query", 5 * 2048, 512, false}, Shape{"causal 4K", 0, 4096, true},
                  Shape{"causal 8K", 0, 8192, true}, Shape{"causal 16K", 0, 16384, true},
                  Shape{"causal 2K", 0, 2048, true}}) {
    const int total = s.prior + s.n;
    const std::mt19937 shape_rng = rng;  // plain and lazy walk the same block order (only the shifts differ)
    rng.discard(1000);
    if (only_shape != 0 && ++shapes_seen != only_shape) continue;  // the same tables as in a full run
    std::vector<std::unique_ptr<PrefillCase>> cases;
    for (int lazy = 0; lazy < 2; ++lazy) {
      std::mt19937 table_rng = shape_rng;
      const std::vector<KvEntry> table = make_table(total, 0, lazy, table_rng, s.prior);
      cases.push_back(std::make_unique<PrefillCase>(pool, table, s.n, lazy, inv_freq));
    }
    const PrefillCase& plain = *cases[0];
    const PrefillCase& lazy = *cases[1];
    // Progress on stderr (unbuffered), so a run stopped by a timeout shows which column it was timing.
    auto phase = [&](const char* what) { std::fprintf(stderr, "bench_cuda_attention: %s: %s\n", s.name, what); };
    phase("attention, plain and lazy");
    const PairTimes attn = time_pair([&] { plain.attention(); }, [&] { lazy.attention(); });
    phase("step");
    const PairTimes step = time_pair([&] { plain.step(); }, [&] { lazy.step(); });
    phase("lazy pre-pass");
    const double prepass = bench::median_ms([&] { lazy.attention_with_prepass(); }, 15, 5, 3);
    using Kernel = PrefillParams::Kernel;
    phase("mma.sync");
    const PairTimes kernels = time_pair([&] { plain.attention_on(Kernel::MmaSync); }, [&] { plain.attention(); });
    phase("two-CTA wgmma");
    const PairTimes two_cta = time_pair([&] { plain.attention_on(Kernel::Wgmma); }, [&] { plain.attention(); });
    phase("persistent CTAs, plain");
    const PairTimes persistent = time_pair([&] { plain.attention_persistent(false); },
                                           [&] { plain.attention_persistent(true); });
    phase("persistent CTAs, lazy");
    const PairTimes persistent_lazy = time_pair([&] { lazy.attention_persistent(false); },
                                                [&] { lazy.attention_persistent(true); });
    // FLOPs: QK^T and PV, 2 each per multiply-add; causal counts the visible half.
    const double pairs = s.causal_full ? double(s.n) * (s.n + 1) / 2.0 : double(s.n) * s.prior + double(s.n) * (s.n + 1) / 2.0;
    const double flops = 4.0 * pairs * kDim * kHeads;
    std::printf("| %s | %d | %d/%d | %.1f | %.1f | %+.1f %% | %.1f | %.1f | %+.1f %% | %.1f | %.1f | %.1f | %.1f | %.1f | "
                "%.3f | %.1f | %.1f | %.3f | %.1f | %.3f | %.1f | %.3f |\n",
                s.name, total, plain.splits, lazy.splits, attn.a_ms * 1e3, attn.b_ms * 1e3, 100.0 * (attn.ratio - 1.0),
                step.a_ms * 1e3, step.b_ms * 1e3, 100.0 * (step.ratio - 1.0), prepass * 1e3,
                flops / (attn.a_ms * 1e-3) / 1e12, flops / (attn.b_ms * 1e-3) / 1e12, kernels.a_ms * 1e3,
                flops / (kernels.a_ms * 1e-3) / 1e12, kernels.ratio, two_cta.a_ms * 1e3,
                flops / (two_cta.a_ms * 1e-3) / 1e12, two_cta.ratio, persistent.b_ms * 1e3, persistent.a_ms * 1e3,
                persistent.ratio, persistent_lazy.ratio);
    std::fflush(stdout);
  }
}

// One decode step's metadata for every replica of the tables (plain, or lazy: a shift per
// document), and how one step runs: the KV write of the new token (plain: q rotated in place;
// lazy, rotating: K/V only; lazy with copies: q rotated once per shift of its sequence), then
// attention.
struct DecodeTables {
  std::vector<DeviceBuffer> entries, offsets, shifts, shift_offsets, slots;
  int max_entries = 0, max_shifts = 0;
};

DecodeTables make_decode_tables(int batch, int context, int replicas, bool lazy, int doc_tokens) {
  DecodeTables t;
  const int blocks_per_seq = context / kBlock;
  std::mt19937 rng(batch * 131 + context);  // plain and lazy walk the same block orders
  for (int r = 0; r < replicas; ++r) {
    AttentionPlan plan;
    std::vector<int32_t> slots;
    for (int s = 0; s < batch; ++s) {
      std::vector<KvEntry> table =
          make_table(context, (r * batch + s) * blocks_per_seq, lazy, rng, 1 << 30, doc_tokens);
      append_table(plan, table.data(), int(table.size()), kBlock, lazy);
      slots.push_back(table.back().block * kBlock + table.back().valid - 1);  // the new token's slot
      const int count = plan.seq_shift_offsets[s + 1] - plan.seq_shift_offsets[s];
      t.max_shifts = std::max(t.max_shifts, count);
    }
    name_query_copies(plan);  // for the copies mode; the rotating and plain kernels do not read them
    t.entries.push_back(upload(plan.entries));
    t.offsets.push_back(upload(plan.seq_entry_offsets));
    t.shifts.push_back(upload(plan.distinct_shifts));
    t.shift_offsets.push_back(upload(plan.seq_shift_offsets));
    t.slots.push_back(upload(slots));
    t.max_entries = plan.max_entries;
  }
  return t;
}

// Plain, lazy (rotating in the kernel) and lazy with query copies timed in alternation with plain
// (time_pair), attention alone and as a step (KV write + attention), each rotating over enough
// copies of its pool tables that the working set is several times the 60 MB L2.
// `only_batch`/`only_context` (> 0) keep one shape (for a profiler run). `doc_tokens`: the lazy
// tables' document length (a shift each); shorter than a split, warps meet changes of shift.
void decode_table(double copy_gbs, const DeviceBuffer& inv_freq, int only_batch, int only_context,
                  bool history_before_wait, int doc_tokens, const std::vector<int>& batches,
                  const std::vector<int>& contexts) {
  std::printf("\n## Decode attention (q_len 1, 32/8 heads, D 128, block 16; KV bytes read = K+V of every key;\n"
              "## lazy: a shift per %d-token document, the query rotated by the attention kernel (rot) or\n"
              "## once per shift by the KV write before it (copies); attn = attention alone, step = KV write of\n"
              "## the new token + attention (plain: q rotated in place; rot: K/V only; copies: K/V and a query\n"
              "## copy per shift); each lazy mode timed in alternation with plain (ABBA), overhead = median of\n"
              "## the per-repeat lazy/plain ratios, each sample >= 0.3 ms of back-to-back calls; plain A/A =\n"
              "## plain timed the same way against itself (the noise floor of the overhead columns); keys\n"
              "## outside each sequence's last entry copied before the wait for the previous kernel where\n"
              "## the grid is one wave: %s)\n",
              doc_tokens, history_before_wait ? "yes" : "no (--kv-after-wait)");
  std::printf("| batch | context | splits | shifts | plain µs | plain %% of copy | plain A/A | rot attn | copies attn | "
              "plain step µs | rot step | copies step |\n");
  std::printf("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n");
  const int sm = device_sm_count();
  const int64_t qkv_row = int64_t(kHeads + 2 * kKvHeads) * kDim;
  for (int batch : batches) {
    for (int context : contexts) {
      if ((only_batch > 0 && batch != only_batch) || (only_context > 0 && context != only_context)) continue;
      const double kv_bytes = double(batch) * context * kKvHeads * kDim * 2 * 2;
      const int replicas = std::max(1, int(std::ceil(512e6 / kv_bytes)));
      Pool pool = make_pool(replicas * batch * (context / kBlock));
      // The backend's qkv rows [q | k | v]: q is the attention's query, k and v the new token's.
      DeviceBuffer qkv(std::size_t(batch) * qkv_row * 2), out(std::size_t(batch) * kHeads * kDim * 2);
      fill_random_bf16(qkv.as<bf16_bits>(), int64_t(batch) * qkv_row, 3, 1.0f, nullptr);
      DeviceBuffer d_positions = upload(std::vector<int32_t>(batch, context - 1 + 10000));
      const DecodeTables tables[2] = {make_decode_tables(batch, context, replicas, false, doc_tokens),
                                      make_decode_tables(batch, context, replicas, true, doc_tokens)};
      const int max_shifts = tables[1].max_shifts;
      DeviceBuffer q_rotated(std::size_t(max_shifts) * batch * kHeads * kDim * 2);
      const int splits = decode_num_splits(batch, kKvHeads, tables[0].max_entries, sm);
      DeviceBuffer po(split_partial_o_floats(batch * kHeads, splits, kDim) * 4);
      DeviceBuffer pml(split_partial_ml_floats(batch * kHeads, splits) * 4);
      enum Mode { kPlain, kRotate, kCopies };
      int next[3] = {0, 0, 0};
      auto write = [&](int mode, int r) {
        const DecodeTables& t = tables[mode == kPlain ? 0 : 1];
        KvWriteParams kw = kv_write_params(pool, inv_freq);
        kw.k = qkv.as<bf16_bits>() + kHeads * kDim;
        kw.v = qkv.as<bf16_bits>() + (kHeads + kKvHeads) * kDim;
        kw.row_stride = qkv_row;
        kw.q = mode == kRotate ? nullptr : qkv.as<bf16_bits>();
        kw.q_row_stride = qkv_row;
        if (mode == kCopies) {
          kw.shifts = t.shifts[r].as<int32_t>();
          kw.token_shift_offsets = t.shift_offsets[r].as<int32_t>();
          kw.num_shifts = max_shifts;
          kw.q_rotated = q_rotated.as<bf16_bits>();
        }
        kw.positions = d_positions.as<int32_t>();
        kw.slots = t.slots[r].as<int32_t>();
        kw.n = batch;
        kv_write(kw, nullptr);
      };
      auto attend = [&](int mode, int r) {
        const DecodeTables& t = tables[mode == kPlain ? 0 : 1];
        DecodeParams p;
        p.q = qkv.as<bf16_bits>();
        p.q_row_stride = qkv_row;
        p.q_positions = d_positions.as<int32_t>();
        p.k_pool = pool.k.as<bf16_bits>();
        p.v_pool = pool.v.as<bf16_bits>();
        p.entries = t.entries[r].as<KvEntry>();
        p.seq_entry_offsets = t.offsets[r].as<int32_t>();
        p.batch = batch;
        p.max_entries = t.max_entries;
        p.num_heads = kHeads;
        p.num_kv_heads = kKvHeads;
        p.head_dim = kDim;
        p.block_size = kBlock;
        p.inv_freq = inv_freq.as<float>();
        p.lazy = mode != kPlain;
        if (mode == kCopies) p.q_rotated = q_rotated.as<bf16_bits>();
        p.out = out.as<bf16_bits>();
        p.num_splits = splits;
        p.partial_o = po.as<float>();
        p.partial_ml = pml.as<float>();
        p.history_before_wait = history_before_wait;  // as the backend's decode steps
        decode_attention(p, nullptr);
      };
      // Every replica's shifts are the same (a shift per document), so one write fills the copies.
      write(kCopies, 0);
      auto run = [&](int mode, bool step) {
        const int r = next[mode];
        if (step) write(mode, r);
        attend(mode, r);
        next[mode] = (r + 1) % replicas;
      };
      constexpr double kMinSampleMs = 0.3;
      auto pair = [&](bool step, int mode) {
        return time_pair([&] { run(kPlain, step); }, [&] { run(mode, step); }, 21, 10, kMinSampleMs);
      };
      const PairTimes control = pair(false, kPlain);
      const PairTimes rot = pair(false, kRotate), copies = pair(false, kCopies);
      const PairTimes rot_step = pair(true, kRotate), copies_step = pair(true, kCopies);
      const double plain_gbs = kv_bytes / (rot.a_ms * 1e-3) / 1e9;
      std::printf("| %d | %d | %d | %d | %.1f | %.0f %% | %+.1f %% | %+.1f %% | %+.1f %% | %.1f | %+.1f %% | %+.1f %% |\n",
                  batch, context, splits, max_shifts, rot.a_ms * 1e3, 100.0 * plain_gbs / copy_gbs,
                  100.0 * (control.ratio - 1.0), 100.0 * (rot.ratio - 1.0), 100.0 * (copies.ratio - 1.0),
                  rot_step.a_ms * 1e3, 100.0 * (rot_step.ratio - 1.0), 100.0 * (copies_step.ratio - 1.0));
      std::fflush(stdout);
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  try {
    if (cuda::device_count() == 0) {
      std::printf("no CUDA GPU visible: nothing to measure\n");
      return 0;
    }
    const double copy_gbs = bench::copy_bandwidth_gbs();
    std::printf("# Attention kernels, %d SMs\n\ndevice-to-device copy: %.0f GB/s (read + write, 2 GiB)\n",
                device_sm_count(), copy_gbs);
    RopeParams rope;
    rope.theta = 500000.0f;
    rope.llama3 = true;
    const std::vector<float> inv = rope_inv_freq(rope, kDim);
    DeviceBuffer inv_freq = upload(inv);
    // `--kv-after-wait` (anywhere): decode copies no key before the wait for the kernel before it
    // (DecodeParams::history_before_wait off), for a comparison with the default.
    bool history_before_wait = true;
    for (int i = 1; i < argc; ++i) {
      if (std::string(argv[i]) == "--kv-after-wait") {
        history_before_wait = false;
        for (int j = i; j + 1 < argc; ++j) argv[j] = argv[j + 1];
        --argc;
        break;
      }
    }
    // `--decode [BATCH CONTEXT]`: the decode table alone (a quick check of a decode-kernel change),
    // or one of its shapes (for a profiler run).
    const bool decode_only = argc > 1 && std::string(argv[1]) == "--decode";
    const int only_batch = decode_only && argc > 3 ? std::stoi(argv[2]) : 0;
    const int only_context = decode_only && argc > 3 ? std::stoi(argv[3]) : 0;
    // `--prefill [SHAPE]`: the prefill table alone, or its row SHAPE (1-6, for a profiler run).
    const bool prefill_only = argc > 1 && std::string(argv[1]) == "--prefill";
    int only_shape = 0;
    if (prefill_only && argc > 2) {
      const std::string arg = argv[2];
      if (arg.size() != 1 || arg[0] < '1' || arg[0] > '6') {
        throw std::runtime_error("--prefill SHAPE: a row of the table, 1-6 (got '" + arg + "')");
      }
      only_shape = arg[0] - '0';
    }
    if (!decode_only) prefill_table(inv_freq, only_shape);
    if (!prefill_only) {
      decode_table(copy_gbs, inv_freq, only_batch, only_context, history_before_wait, kDocTokens, {1, 4, 16, 32, 64},
                   {1024, 4096, 8192, 16384, 32768});
      // RAG-sized documents: shorter than a split at batch 1-4, so warps change shift mid-split.
      decode_table(copy_gbs, inv_freq, only_batch, only_context, history_before_wait, 256, {1, 4, 16},
                   {1024, 4096, 8192});
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_cuda_attention: %s\n", e.what());
    return 1;
  }
  return 0;
}

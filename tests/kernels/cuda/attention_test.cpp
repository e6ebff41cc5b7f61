// GPU attention, KV write and materialize kernels against the CPU reference (kernels/cpu).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "attention_harness.h"
#include "gpu_test_util.h"
#include "kernels/cpu/attention.h"
#include "kernels/cuda/attention.h"
#include "kernels/cuda_arch.h"
#include "kernels/cuda/attention_plan.h"
#include "kernels/overhead_probe.h"
#include "kernels/rope.h"

namespace lazyscope::cuda {
namespace {

using test::AttentionShape;
using test::cpu_kv_write;
using test::cpu_paged_attention;
using test::DevicePrefillPlan;
using test::download_bf16;
using test::poisoned_output;
using test::rotated_queries;
using test::SplitWorkspace;
using test::random_bf16_values;
using test::relative_error;
using test::upload;
using test::upload_as_bf16;

// bf16 inputs, fp32 accumulation, bf16 output: errors land near 1e-3..1e-2.
constexpr double kTolerance = 2e-2;

enum class Shifts { Zero, Small, Large };

struct Case {
  int head_dim;
  int ratio;       // query heads per KV head
  int block_size;
  Shifts shifts;
  bool lazy;
};

std::string case_label(const Case& c) {
  const char* shifts = c.shifts == Shifts::Zero ? "zero" : c.shifts == Shifts::Small ? "small" : "large";
  return "D" + std::to_string(c.head_dim) + "_gqa" + std::to_string(c.ratio) + "_bs" + std::to_string(c.block_size) +
         "_" + shifts + (c.lazy ? "_lazy" : "_plain");
}

std::string case_name(const testing::TestParamInfo<Case>& info) { return case_label(info.param); }

constexpr int kKvHeads = 2;
constexpr int kPoolBlocks = 96;

struct Pool {
  std::vector<float> k, v;
};

Pool random_pool(const Case& c, std::mt19937& rng) {
  const std::size_t count = std::size_t(kPoolBlocks) * kKvHeads * c.block_size * c.head_dim;
  return {random_bf16_values(count, rng), random_bf16_values(count, rng)};
}

int shift_value(Shifts kind, int which) {
  if (kind == Shifts::Zero) return 0;
  if (kind == Shifts::Small) return which * 37 - 11;
  return 65536 + 4500 * which + 7;  // past 16 bits
}

// A table of documents (one repeated at another shift), partial blocks, then the new tokens'
// blocks (shift 0). `first_block` keeps sequences of a batch apart in the pool.
std::vector<BlockRef> make_table(const Case& c, int variant, int new_tokens, int first_block) {
  std::vector<BlockRef> table;
  int next = first_block;
  auto add_doc = [&](int blocks, int last_valid, int shift) {
    std::vector<BlockRef> doc;
    for (int b = 0; b < blocks; ++b) {
      doc.push_back(BlockRef{next++, shift, b + 1 == blocks ? last_valid : c.block_size});
    }
    table.insert(table.end(), doc.begin(), doc.end());
    return doc;
  };
  std::vector<BlockRef> doc_a = add_doc(3 + variant, c.block_size - 5, shift_value(c.shifts, 1));
  add_doc(2, c.block_size, shift_value(c.shifts, 2));
  if (variant != 1) {
    // The same document again, at a different shift: blocks shared, only the shift differs.
    for (BlockRef ref : doc_a) {
      ref.shift = shift_value(c.shifts, 3);
      table.push_back(ref);
    }
  }
  add_doc(1, 3, shift_value(c.shifts, 4));
  // The new tokens' blocks, shift 0, the last one partial.
  int remaining = new_tokens;
  while (remaining > 0) {
    const int take = std::min(remaining, remaining > c.block_size ? c.block_size : remaining);
    table.push_back(BlockRef{next++, 0, take});
    remaining -= take;
  }
  return table;
}

AttentionShape shape_of(const Case& c) { return AttentionShape{c.head_dim, kKvHeads * c.ratio, kKvHeads, c.block_size}; }

std::vector<float> cpu_attention(const Case& c, const Pool& pool, const std::vector<BlockRef>& table,
                                 const std::vector<float>& q, const std::vector<int32_t>& positions,
                                 const std::vector<float>& inv_freq) {
  return cpu_paged_attention(shape_of(c), pool.k, pool.v, table, q, positions, inv_freq, c.lazy);
}

// Plain kernels take the query already rotated at its position (RoPE at write time).
std::vector<float> gpu_query(const Case& c, const std::vector<float>& q, const std::vector<int32_t>& positions,
                             const std::vector<float>& inv_freq) {
  return c.lazy ? q : rotated_queries(q, positions, kKvHeads * c.ratio, c.head_dim, inv_freq);
}

std::vector<Case> all_cases() {
  std::vector<Case> cases;
  for (int d : {64, 128}) {
    for (int ratio : {1, 4, 8}) {
      for (int bs : {16, 32}) {
        for (Shifts s : {Shifts::Zero, Shifts::Small, Shifts::Large}) cases.push_back({d, ratio, bs, s, true});
        cases.push_back({d, ratio, bs, Shifts::Zero, false});
      }
    }
  }
  // Every other GQA ratio (SmolLM2-135M is GQA 3) and the small head sizes of the test models.
  for (int d : {64, 128}) {
    for (int ratio : {3, 6}) {
      cases.push_back({d, ratio, d == 64 ? 16 : 32, Shifts::Small, true});
      cases.push_back({d, ratio, d == 64 ? 32 : 16, Shifts::Large, true});
      cases.push_back({d, ratio, 16, Shifts::Zero, false});
    }
    for (int ratio : {2, 5, 7}) {
      cases.push_back({d, ratio, 16, Shifts::Small, true});
      cases.push_back({d, ratio, 32, Shifts::Zero, false});
    }
  }
  for (int d : {16, 32}) {
    for (int ratio : {2, 3}) {
      cases.push_back({d, ratio, 16, Shifts::Small, true});
      cases.push_back({d, ratio, 32, Shifts::Large, true});
      cases.push_back({d, ratio, 16, Shifts::Zero, false});
    }
  }
  return cases;
}

// A copy of the pool with NaN in the unfilled slots (valid .. block_size − 1) of the tables' blocks.
Pool with_stale_slots(const Case& c, const Pool& pool, const std::vector<std::vector<BlockRef>>& tables) {
  Pool out = pool;
  const float nan = std::numeric_limits<float>::quiet_NaN();
  for (const std::vector<BlockRef>& table : tables) {
    for (const BlockRef& ref : table) {
      for (int head = 0; head < kKvHeads; ++head) {
        for (int slot = ref.valid; slot < c.block_size; ++slot) {
          const std::size_t row = ((std::size_t(ref.block) * kKvHeads + head) * c.block_size + slot) * c.head_dim;
          std::fill_n(out.k.begin() + row, c.head_dim, nan);
          std::fill_n(out.v.begin() + row, c.head_dim, nan);
        }
      }
    }
  }
  return out;
}

class AttentionTest : public testing::TestWithParam<Case> {};

using TableMaker = std::function<std::vector<BlockRef>(const Case&, int variant, int new_tokens, int first_block)>;

// Lazy decode's query copies as kv_write makes them (DecodeParams::q_rotated): each sequence's
// query rotated once per distinct shift of its table, into [most shifts][batch][heads × head_dim].
// The K/V rows kv_write also stores go to a scratch block, not the test's pool.
DeviceBuffer lazy_query_copies(const Case& c, const AttentionPlan& plan, const DeviceBuffer& d_q,
                               const DeviceBuffer& d_positions, const DeviceBuffer& d_inv, const DeviceBuffer& d_shifts,
                               const DeviceBuffer& d_shift_offsets) {
  const int heads = kKvHeads * c.ratio, batch = int(plan.seq_shift_offsets.size()) - 1;
  int most = 0;
  for (int s = 0; s < batch; ++s) most = std::max(most, plan.seq_shift_offsets[s + 1] - plan.seq_shift_offsets[s]);
  DeviceBuffer copies(std::size_t(most) * batch * heads * c.head_dim * 2);
  LAZYSCOPE_CUDA_CHECK(cudaMemset(copies.as<void>(), 0xff, copies.bytes()));  // NaN where nothing is written
  const std::vector<float> zeros(std::size_t(batch) * kKvHeads * c.head_dim, 0.0f);
  DeviceBuffer kv_rows = upload_as_bf16(zeros);
  DeviceBuffer scratch_k(std::size_t(c.block_size) * kKvHeads * c.head_dim * 2), scratch_v(scratch_k.bytes());
  DeviceBuffer slots = upload(std::vector<int32_t>(batch, 0));
  KvWriteParams kw;
  kw.k = kv_rows.as<bf16_bits>();
  kw.v = kv_rows.as<bf16_bits>();
  kw.row_stride = int64_t(kKvHeads) * c.head_dim;
  kw.q = const_cast<bf16_bits*>(d_q.as<bf16_bits>());  // read only: lazy writes its copies elsewhere
  kw.q_row_stride = int64_t(heads) * c.head_dim;
  kw.shifts = d_shifts.as<int32_t>();
  kw.token_shift_offsets = d_shift_offsets.as<int32_t>();
  kw.num_shifts = most;
  kw.q_rotated = copies.as<bf16_bits>();
  kw.num_heads = heads;
  kw.positions = d_positions.as<int32_t>();
  kw.slots = slots.as<int32_t>();
  kw.n = batch;
  kw.num_kv_heads = kKvHeads;
  kw.head_dim = c.head_dim;
  kw.block_size = c.block_size;
  kw.inv_freq = d_inv.as<float>();
  kw.k_pool = scratch_k.as<bf16_bits>();
  kw.v_pool = scratch_v.as<bf16_bits>();
  kv_write(kw, nullptr);
  return copies;
}

// Decode of a batch of 3 sequences (own tables, shared pool) against the CPU reference, with each
// of `split_counts` splits; each also with the keys outside the last entries copied before the
// kernel waits for the one before it (history_before_wait), which must give the same bits. Lazy
// cases run each again on the query copies kv_write makes (DecodeParams::q_rotated; each entry
// naming its copy).
void expect_decode_matches_cpu(const Case& c, const TableMaker& table_of = make_table,
                               const std::vector<int>& split_counts = {1, 2, 7}) {
  std::mt19937 rng(1234 + c.head_dim + c.ratio * 7 + c.block_size);
  const Pool pool = random_pool(c, rng);
  const std::vector<float> inv_freq = rope_inv_freq(RopeParams{500000.0f, true}, c.head_dim);
  const int heads = kKvHeads * c.ratio, batch = 3;
  AttentionPlan plan;
  std::vector<std::vector<BlockRef>> tables;
  std::vector<int32_t> positions;
  for (int s = 0; s < batch; ++s) {
    tables.push_back(table_of(c, s, 1 + s * 5, s * 30));
    append_sequence(plan, tables.back(), c.block_size, c.lazy);
    positions.push_back(plan.seq_total_keys.back() - 1 + (c.shifts == Shifts::Large ? 90000 : 0));
  }
  const std::vector<float> q = random_bf16_values(std::size_t(batch) * heads * c.head_dim, rng);
  std::vector<float> expected;
  for (int s = 0; s < batch; ++s) {
    std::vector<float> q_one(q.begin() + std::size_t(s) * heads * c.head_dim,
                             q.begin() + std::size_t(s + 1) * heads * c.head_dim);
    std::vector<float> out = cpu_attention(c, pool, tables[s], q_one, {positions[s]}, inv_freq);
    expected.insert(expected.end(), out.begin(), out.end());
  }
  DeviceBuffer d_q = upload_as_bf16(gpu_query(c, q, positions, inv_freq));
  // The GPU pool holds NaN in every slot past a block's `valid`: stale slots must weigh exactly 0.
  const Pool stale = with_stale_slots(c, pool, tables);
  DeviceBuffer d_k = upload_as_bf16(stale.k), d_v = upload_as_bf16(stale.v);
  DeviceBuffer d_entries = upload(plan.entries), d_offsets = upload(plan.seq_entry_offsets);
  DeviceBuffer d_positions = upload(positions), d_inv = upload(inv_freq);
  DeviceBuffer d_shifts = upload(plan.distinct_shifts), d_shift_offsets = upload(plan.seq_shift_offsets);
  const DeviceBuffer d_copies =
      c.lazy ? lazy_query_copies(c, plan, d_q, d_positions, d_inv, d_shifts, d_shift_offsets) : DeviceBuffer(16);
  AttentionPlan named = plan;  // each entry naming its shift's copy
  name_query_copies(named);
  DeviceBuffer d_named_entries = upload(named.entries);
  const std::size_t out_count = std::size_t(batch) * heads * c.head_dim;
  std::vector<float> late_output;
  const int per_mode = 2 * int(split_counts.size());  // each split count late, then early
  for (int run = 0; run < (c.lazy ? 2 : 1) * per_mode; ++run) {
    const int splits = split_counts[run % per_mode / 2];
    const bool early = run % 2 == 1, copies = run >= per_mode;
    DeviceBuffer d_out = poisoned_output(out_count);
    SplitWorkspace split_workspace(batch * heads, splits, c.head_dim);
    DecodeParams p;
    p.q = d_q.as<bf16_bits>();
    p.q_row_stride = int64_t(heads) * c.head_dim;
    p.q_positions = d_positions.as<int32_t>();
    p.k_pool = d_k.as<bf16_bits>();
    p.v_pool = d_v.as<bf16_bits>();
    p.entries = d_entries.as<KvEntry>();
    p.seq_entry_offsets = d_offsets.as<int32_t>();
    p.batch = batch;
    p.max_entries = plan.max_entries;
    p.num_heads = heads;
    p.num_kv_heads = kKvHeads;
    p.head_dim = c.head_dim;
    p.block_size = c.block_size;
    p.inv_freq = d_inv.as<float>();
    p.lazy = c.lazy;
    p.out = d_out.as<bf16_bits>();
    p.num_splits = splits;
    p.partial_o = split_workspace.partial_o.as<float>();
    p.partial_ml = split_workspace.partial_ml.as<float>();
    if (splits == 7) {  // the L2 prefetch beside (an odd byte count: rounded down to 16) changes nothing
      p.l2_prefetch[0] = d_k.as<bf16_bits>();
      p.l2_prefetch_bytes[0] = d_k.bytes() - 6;
    }
    p.history_before_wait = early;
    if (copies) {
      p.q_rotated = d_copies.as<bf16_bits>();
      p.entries = d_named_entries.as<KvEntry>();
    }
    decode_attention(p, nullptr);
    LAZYSCOPE_CUDA_CHECK(cudaDeviceSynchronize());
    const std::vector<float> got = download_bf16(d_out, out_count);
    const double error = relative_error(got, expected);
    EXPECT_LT(error, kTolerance) << "splits " << splits << (early ? ", keys before the wait" : "")
                                 << (copies ? ", query copies" : "");
    if (early) {
      EXPECT_EQ(got, late_output) << "splits " << splits << ": copying before the wait changed the output";
    } else {
      late_output = got;
    }
  }
}

TEST_P(AttentionTest, DecodeBatchMatchesCpuReference) {
  LAZYSCOPE_REQUIRE_GPU();
  expect_decode_matches_cpu(GetParam());
}

// Block sizes the prefill cases do not use: 8 (a unit of 16 keys covers one block, half empty) and
// 64 (four units a block).
TEST(AttentionDecodeTest, OtherBlockSizesMatchCpuReference) {
  LAZYSCOPE_REQUIRE_GPU();
  for (const Case& c : {Case{128, 4, 64, Shifts::Small, true}, Case{64, 2, 8, Shifts::Large, true},
                        Case{32, 8, 64, Shifts::Zero, false}, Case{128, 1, 8, Shifts::Zero, false}}) {
    SCOPED_TRACE(case_label(c));
    expect_decode_matches_cpu(c);
  }
}

// Lazy decode where the shift changes at every block (and, in the second sequence, at every other
// one; in the third, two shifts take turns every two blocks, so a warp returns to a copy it left):
// most units of a split have another shift than its first entry, so the warps re-rotate their own
// queries (or load other copies, ahead or where they meet them) again and again.
std::vector<BlockRef> table_of_many_shifts(const Case& c, int variant, int new_tokens, int first_block) {
  std::vector<BlockRef> table;
  const int blocks = 26 + 3 * variant;
  for (int b = 0; b < blocks; ++b) {
    const int shift = variant == 2 ? shift_value(c.shifts, 1 + b / 2 % 2) + 5 * (b / 2 % 2)
                                   : shift_value(c.shifts, 1 + (variant == 1 ? b / 2 : b)) + 3 * b;
    table.push_back(BlockRef{first_block + b, shift, b + 1 == blocks ? std::max(1, c.block_size - 3) : c.block_size});
  }
  table.push_back(BlockRef{first_block + blocks, 0, std::min(new_tokens, c.block_size)});
  return table;
}

TEST(AttentionDecodeTest, ShiftAtEveryBlockMatchesCpuReference) {
  LAZYSCOPE_REQUIRE_GPU();
  for (const Case& c : {Case{128, 4, 16, Shifts::Small, true}, Case{128, 8, 8, Shifts::Large, true},
                        Case{64, 1, 64, Shifts::Small, true}, Case{64, 3, 32, Shifts::Large, true},
                        Case{32, 2, 16, Shifts::Small, true}, Case{16, 4, 8, Shifts::Small, true}}) {
    SCOPED_TRACE(case_label(c));
    expect_decode_matches_cpu(c, table_of_many_shifts);
  }
}

// Tables of 37-39 entries, whole and split 40 ways: one entry a split, so the split merge reads
// its partials in two rounds of 32 splits, the second holding real splits and empty ones. The
// sequences share their (full) history blocks, at other shifts; each new token's partial block is
// its own, at the pool's end (a partial block's stale slots are NaN in the GPU pool).
std::vector<BlockRef> table_of_many_entries(const Case& c, int variant, int new_tokens, int /*first_block*/) {
  std::vector<BlockRef> table;
  const int blocks = 36 + variant;
  for (int b = 0; b < blocks; ++b) {
    table.push_back(BlockRef{b, shift_value(c.shifts, 1 + (b + variant) / 8), c.block_size});
  }
  table.push_back(BlockRef{kPoolBlocks - 1 - variant, 0, std::min(new_tokens, c.block_size)});
  return table;
}

TEST(AttentionDecodeTest, MoreSplitsThanOneMergeRoundMatchCpuReference) {
  LAZYSCOPE_REQUIRE_GPU();
  for (const Case& c : {Case{128, 4, 16, Shifts::Small, true}, Case{64, 2, 16, Shifts::Large, true},
                        Case{32, 8, 8, Shifts::Small, true}, Case{16, 1, 16, Shifts::Zero, false}}) {
    SCOPED_TRACE(case_label(c));
    expect_decode_matches_cpu(c, table_of_many_entries, {1, 40});
  }
}

// The overhead probe's GPU side times lazy calls on query copies, each entry naming its document's
// copy, as the backend's decode steps run them (memcheck runs this to check the copies' indexing).
TEST(AttentionDecodeTest, OverheadProbeTimesLazyOnQueryCopies) {
  LAZYSCOPE_REQUIRE_GPU();
  const AttentionProbeShape shape{8, 2, 64, 16, 3, 1000, 256};  // four documents a sequence, the last partial
  const std::unique_ptr<AttentionProbe> probe = make_attention_probe(shape);
  EXPECT_NE(probe->kernel().find("query copies"), std::string::npos) << probe->kernel();
  for (bool lazy : {false, true}) {
    const double us = probe->time_us(lazy, 4);
    EXPECT_TRUE(std::isfinite(us) && us > 0.0) << (lazy ? "lazy " : "plain ") << us << " µs";
  }
  LAZYSCOPE_CUDA_CHECK(cudaDeviceSynchronize());
}

// A prompt of n new tokens over `table`: its plan, the CPU reference's output, and the device
// inputs; params() fills all but the splits (and their workspace and ranges).
struct PrefillInputs {
  const Case& c;
  const int n;
  AttentionPlan plan;
  std::vector<float> expected;
  DeviceBuffer d_q, d_k, d_v, d_q_rotated;
  std::unique_ptr<DevicePrefillPlan> device_plan;
  std::size_t out_count = 0;

  PrefillInputs(const Case& c_in, const Pool& pool, const std::vector<BlockRef>& table, int n_in,
                const std::vector<float>& inv_freq, std::mt19937& rng)
      : c(c_in), n(n_in) {
    const int heads = kKvHeads * c.ratio;
    append_sequence(plan, table, c.block_size, c.lazy);
    const int total = plan.seq_total_keys[0];
    std::vector<int32_t> positions(n);
    for (int i = 0; i < n; ++i) positions[i] = total - n + i + (c.shifts == Shifts::Large ? 80000 : 0);
    const std::vector<float> q = random_bf16_values(std::size_t(n) * heads * c.head_dim, rng);
    expected = cpu_attention(c, pool, table, q, positions, inv_freq);
    d_q = upload_as_bf16(gpu_query(c, q, positions, inv_freq));
    d_k = upload_as_bf16(pool.k);
    d_v = upload_as_bf16(pool.v);
    device_plan = std::make_unique<DevicePrefillPlan>(plan, positions, inv_freq);
    d_q_rotated = DeviceBuffer(lazy_query_workspace_elements(n, heads, c.head_dim, device_plan->num_shifts) * 2);
    out_count = std::size_t(n) * heads * c.head_dim;
  }
  PrefillParams params(const DeviceBuffer& ranges, DeviceBuffer& out) const {
    PrefillParams p = device_plan->params(shape_of(c), n, c.lazy);
    p.q = d_q.as<bf16_bits>();
    p.k_pool = d_k.as<bf16_bits>();
    p.v_pool = d_v.as<bf16_bits>();
    p.q_rotated = d_q_rotated.as<bf16_bits>();
    p.split_ranges = ranges.as<int32_t>();
    p.out = out.as<bf16_bits>();
    return p;
  }
};

void expect_prefill_matches_cpu(const Case& c, const TableMaker& table_of = make_table) {
  std::mt19937 rng(99 + c.head_dim + c.ratio * 3 + c.block_size);
  const Pool pool = random_pool(c, rng);
  const std::vector<float> inv_freq = rope_inv_freq(RopeParams{10000.0f, false}, c.head_dim);
  const int heads = kKvHeads * c.ratio;
  for (int n : {1, 7, 2 * c.block_size + 9, 150}) {
    const PrefillInputs in(c, pool, table_of(c, 0, n, 0), n, inv_freq, rng);
    // Variants 0-1: the default kernel (the warp-specialised wgmma kernel on Hopper builds for
    // D 64 / 128, whose lazy ranges cross shift runs), then mma.sync with 32 and 16 rows a warp,
    // then the two-CTA wgmma kernel (mma.sync elsewhere); each with one split and with three.
    using Kernel = PrefillParams::Kernel;
    for (int variant = 0; variant < 8; ++variant) {
      const int rows_per_warp = variant < 4 || variant >= 6 ? 32 : 16;
      PrefillParams probe;
      probe.head_dim = c.head_dim;
      probe.kernel = variant < 2 ? Kernel::Auto : variant < 6 ? Kernel::MmaSync : Kernel::Wgmma;
      const int wanted = variant % 2 == 0 ? 1 : 3;
      const std::vector<int32_t> ranges = lazy_split_ranges(in.plan, 0, wanted);
      const int splits = c.lazy && prefill_splits_follow_shift_runs(probe) ? int(ranges.size() / 2) : wanted;
      DeviceBuffer d_ranges = upload(ranges);
      DeviceBuffer d_out = poisoned_output(in.out_count);
      SplitWorkspace split_workspace(n * heads, splits, c.head_dim);
      PrefillParams p = in.params(d_ranges, d_out);
      p.rows_per_warp = rows_per_warp;
      p.kernel = probe.kernel;
      p.num_splits = splits;
      p.partial_o = split_workspace.partial_o.as<float>();
      p.partial_ml = split_workspace.partial_ml.as<float>();
      prefill_attention(p, nullptr);
      LAZYSCOPE_CUDA_CHECK(cudaDeviceSynchronize());
      const double error = relative_error(download_bf16(d_out, in.out_count), in.expected);
      EXPECT_LT(error, kTolerance) << "n " << n << " splits " << splits
                                   << " " << prefill_kernel_name(p) << ", rows/warp " << rows_per_warp;
    }
  }
}

TEST_P(AttentionTest, PrefillMatchesCpuReference) {
  LAZYSCOPE_REQUIRE_GPU();
  expect_prefill_matches_cpu(GetParam());
}

// Lazy prefill where the shift changes at every cached block: with one split a CTA of the
// warp-specialised kernel meets some thirty shifts, most of them one tile long, so its producer
// stages each next rotated query while the consumers still hold the last (and waits for them).
std::vector<BlockRef> prefill_table_of_many_shifts(const Case& c, int variant, int new_tokens, int first_block) {
  std::vector<BlockRef> table = table_of_many_shifts(c, variant, 0, first_block);
  table.pop_back();  // its empty new-token block
  int next = first_block + int(table.size());
  for (int remaining = new_tokens; remaining > 0; remaining -= c.block_size) {
    table.push_back(BlockRef{next++, 0, std::min(remaining, c.block_size)});
  }
  return table;
}

TEST(AttentionPrefillTest, ShiftAtEveryBlockMatchesCpuReference) {
  LAZYSCOPE_REQUIRE_GPU();
  for (const Case& c : {Case{128, 4, 16, Shifts::Small, true}, Case{128, 1, 64, Shifts::Large, true},
                        Case{64, 2, 32, Shifts::Small, true}, Case{64, 8, 16, Shifts::Large, true}}) {
    SCOPED_TRACE(case_label(c));
    expect_prefill_matches_cpu(c, prefill_table_of_many_shifts);
  }
}

// The warp-specialised kernel's persistent CTAs (calls without splits) against a CTA a row tile: a
// grid of one, three and (the default) one CTA an SM, so a CTA walks up to 42 row tiles whose
// rings and barriers run on from one to the next. The same bits as a CTA a row tile, and the CPU
// reference. Lazy calls take this walk only where every tile has one shift (a prompt with no
// cached document), reading that shift's rotated query.
std::vector<BlockRef> prompt_table(const Case& c, int, int new_tokens, int first_block) {
  std::vector<BlockRef> table;
  for (int remaining = new_tokens, next = first_block; remaining > 0; remaining -= c.block_size) {
    table.push_back(BlockRef{next++, 0, std::min(remaining, c.block_size)});
  }
  return table;
}

TEST(AttentionPrefillTest, PersistentCtasMatchACtaARowTile) {
  LAZYSCOPE_REQUIRE_GPU();
  struct Run {
    Case c;
    bool cached_documents;
  };
  for (const Run& run : {Run{Case{128, 8, 16, Shifts::Zero, false}, true},
                         Run{Case{64, 4, 32, Shifts::Zero, false}, true},
                         Run{Case{128, 3, 16, Shifts::Zero, false}, false},
                         Run{Case{128, 8, 16, Shifts::Small, true}, false},
                         Run{Case{64, 2, 64, Shifts::Small, true}, false}}) {
    const Case& c = run.c;
    SCOPED_TRACE(case_label(c) + (run.cached_documents ? ", cached documents" : ", prompt alone"));
    PrefillParams probe;
    probe.head_dim = c.head_dim;
    if (!prefill_uses_wgmma(probe)) {
      GTEST_SKIP() << "no warp-specialised kernel here (" << prefill_kernel_name(probe) << ")";
    }
    std::mt19937 rng(7 + c.head_dim + c.ratio);
    const Pool pool = random_pool(c, rng);
    const std::vector<float> inv_freq = rope_inv_freq(RopeParams{10000.0f, false}, c.head_dim);
    for (int n : {150, 333}) {
      const PrefillInputs in(c, pool, run.cached_documents ? make_table(c, 0, n, 0) : prompt_table(c, 0, n, 0), n,
                             inv_freq, rng);
      ASSERT_TRUE(!c.lazy || in.device_plan->num_shifts == 1) << "a lazy prompt alone has one shift";
      DeviceBuffer d_ranges = upload(lazy_split_ranges(in.plan, 0, 1));
      std::vector<float> one_tile;
      for (int ctas : {-1, 1, 3, 0}) {  // -1: a CTA a row tile
        DeviceBuffer d_out = poisoned_output(in.out_count);
        PrefillParams p = in.params(d_ranges, d_out);
        p.num_splits = 1;
        p.persistent = ctas >= 0;
        p.persistent_ctas = std::max(ctas, 0);
        prefill_attention(p, nullptr);
        LAZYSCOPE_CUDA_CHECK(cudaDeviceSynchronize());
        const std::vector<float> got = download_bf16(d_out, in.out_count);
        EXPECT_LT(relative_error(got, in.expected), kTolerance) << "n " << n << ", CTAs " << ctas;
        if (ctas < 0) {
          one_tile = got;
        } else {
          EXPECT_EQ(relative_error(got, one_tile), 0.0) << "n " << n << ", CTAs " << ctas << ": not the same bits";
        }
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Kernels, AttentionTest, testing::ValuesIn(all_cases()), case_name);

// A build with sm_90a code takes the wgmma prefill kernel on compute capability 9.0, for head
// dims 64 and 128 unless told otherwise; any other device or head dim takes mma.sync.
TEST(AttentionPrefillTest, HopperBuildsTakeTheWgmmaKernel) {
  LAZYSCOPE_REQUIRE_GPU();
  int device = 0, major = 0, minor = 0;
  LAZYSCOPE_CUDA_CHECK(cudaGetDevice(&device));
  LAZYSCOPE_CUDA_CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device));
  LAZYSCOPE_CUDA_CHECK(cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device));
  const std::vector<std::string> built = built_cuda_archs();
  const bool has_90a = std::find(built.begin(), built.end(), "90a-real") != built.end();
  const bool expect = has_90a && major == 9 && minor == 0;
  PrefillParams p;
  for (int d : {64, 128}) {
    p.head_dim = d;
    p.kernel = PrefillParams::Kernel::Auto;
    EXPECT_EQ(prefill_uses_wgmma(p), expect) << "D " << d << ", compute capability " << major << "." << minor;
    EXPECT_STREQ(prefill_kernel_name(p), expect ? "wgmma, warp-specialised" : "mma.sync") << "D " << d;
    p.kernel = PrefillParams::Kernel::Wgmma;
    EXPECT_STREQ(prefill_kernel_name(p), expect ? "wgmma" : "mma.sync") << "D " << d;
    p.kernel = PrefillParams::Kernel::MmaSync;
    EXPECT_FALSE(prefill_uses_wgmma(p)) << "D " << d;
    EXPECT_STREQ(prefill_kernel_name(p), "mma.sync") << "D " << d;
  }
  p.kernel = PrefillParams::Kernel::Auto;
  for (int d : {16, 32}) {
    p.head_dim = d;
    EXPECT_FALSE(prefill_uses_wgmma(p)) << "D " << d;
  }
}

// A lazy call that the warp-specialised kernel would take is refused without the plan's run ends,
// with an error that names them.
TEST(AttentionPrefillTest, LazyCallWithoutRunEndsIsRefused) {
  LAZYSCOPE_REQUIRE_GPU();
  const Case c{128, 4, 16, Shifts::Small, true};
  const int n = 16;
  const std::vector<BlockRef> table = make_table(c, 0, n, 0);
  AttentionPlan plan;
  append_sequence(plan, table, c.block_size, true);
  const DevicePrefillPlan device_plan(plan, std::vector<int32_t>(n, 0),
                                      rope_inv_freq(RopeParams{10000.0f, false}, c.head_dim));
  PrefillParams p = device_plan.params(shape_of(c), n, true);
  if (prefill_splits_follow_shift_runs(p)) GTEST_SKIP() << prefill_kernel_name(p) << " does not read run ends";
  DeviceBuffer q_rotated(lazy_query_workspace_elements(n, kKvHeads * c.ratio, c.head_dim, device_plan.num_shifts) * 2);
  DeviceBuffer ranges = upload(lazy_split_ranges(plan, 0, 1));
  p.q_rotated = q_rotated.as<bf16_bits>();
  p.q_rotated_ready = true;
  p.split_ranges = ranges.as<int32_t>();
  p.tile_run_end = nullptr;
  try {
    prefill_attention(p, nullptr);
    ADD_FAILURE() << "a lazy call without tile_run_end was accepted";
  } catch (const std::exception& e) {
    EXPECT_NE(std::string(e.what()).find("tile_run_end"), std::string::npos) << e.what();
  }
}

// A negative cap on the persistent grid is refused with an error that names it and the valid range.
TEST(AttentionPrefillTest, NegativePersistentGridIsRefused) {
  LAZYSCOPE_REQUIRE_GPU();
  const Case c{128, 4, 16, Shifts::Zero, false};
  const int n = 16;
  AttentionPlan plan;
  append_sequence(plan, make_table(c, 0, n, 0), c.block_size, false);
  const DevicePrefillPlan device_plan(plan, std::vector<int32_t>(n, 0),
                                      rope_inv_freq(RopeParams{10000.0f, false}, c.head_dim));
  PrefillParams p = device_plan.params(shape_of(c), n, false);
  p.persistent = true;
  p.persistent_ctas = -2;
  try {
    prefill_attention(p, nullptr);
    ADD_FAILURE() << "persistent_ctas -2 was accepted";
  } catch (const std::exception& e) {
    EXPECT_NE(std::string(e.what()).find("persistent_ctas -2"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("valid"), std::string::npos) << e.what();
  }
}

TEST(AttentionPlanTest, RejectsShiftsInPlainCallsAndBadBlockSizes) {
  std::vector<BlockRef> table{{0, 5, 16}};
  AttentionPlan plan;
  EXPECT_THROW(append_sequence(plan, table, 16, false), Error);
  EXPECT_THROW(append_sequence(plan, table, 48, true), Error);
  table[0].valid = 0;
  EXPECT_THROW(append_sequence(plan, table, 16, true), Error);
}

// Decode with query copies: each entry names its shift's index among its sequence's distinct
// shifts in first-seen order (a document repeated later reuses its copy), the plan's own order.
TEST(AttentionPlanTest, QueryCopiesAreNamedInFirstSeenOrder) {
  std::vector<KvEntry> entries{{0, 5, 16, 0}, {1, 5, 16, 16}, {2, 9, 16, 32}, {0, 70000, 16, 48}, {1, 5, 4, 64}, {3, 0, 2, 68}};
  std::vector<int32_t> shifts{42};  // appended after what is there
  EXPECT_EQ(name_query_copies(entries.data(), int(entries.size()), shifts), 4);
  EXPECT_EQ(shifts, (std::vector<int32_t>{42, 5, 9, 70000, 0}));
  std::vector<int32_t> named;
  for (const KvEntry& e : entries) named.push_back(e.key_start);
  EXPECT_EQ(named, (std::vector<int32_t>{0, 0, 1, 2, 0, 3}));

  AttentionPlan plan;  // two sequences: each counts its own copies from 0
  append_table(plan, entries.data(), 3, 16, true);
  append_table(plan, entries.data() + 3, 3, 16, true);
  name_query_copies(plan);
  named.clear();
  for (const KvEntry& e : plan.entries) named.push_back(e.key_start);
  EXPECT_EQ(named, (std::vector<int32_t>{0, 0, 1, 0, 1, 2}));
  for (std::size_t e = 0; e < plan.entries.size(); ++e) {  // the copy index points at the entry's own shift
    const int seq = e < 3 ? 0 : 1;
    EXPECT_EQ(plan.distinct_shifts[plan.seq_shift_offsets[seq] + plan.entries[e].key_start], plan.entries[e].shift);
  }
}

TEST(AttentionPlanTest, TilesFollowShiftRunsAndTileWidth) {
  // 16-token blocks: 4 entries per tile; a shift change always starts a new tile.
  std::vector<BlockRef> table;
  for (int i = 0; i < 6; ++i) table.push_back({i, 0, 16});
  for (int i = 6; i < 8; ++i) table.push_back({i, 9, i == 7 ? 3 : 16});
  AttentionPlan plan;
  append_sequence(plan, table, 16, true);
  ASSERT_EQ(plan.tiles.size(), 3u);
  EXPECT_EQ(plan.tiles[0].entry_count, 4);
  EXPECT_EQ(plan.tiles[1].entry_count, 2);
  EXPECT_EQ(plan.tiles[2].entry_count, 2);
  EXPECT_EQ(plan.tiles[2].shift, 9);
  EXPECT_EQ(plan.tiles[2].key_start, 96);
  EXPECT_EQ(plan.seq_total_keys[0], 6 * 16 + 16 + 3);
  EXPECT_EQ(plan.distinct_shifts, (std::vector<int32_t>{0, 9}));
  EXPECT_EQ(plan.tile_shift_index, (std::vector<int32_t>{0, 0, 1}));
  // Split ranges never cross the shift change between tiles 1 and 2.
  EXPECT_EQ(lazy_split_ranges(plan, 0, 1), (std::vector<int32_t>{0, 2, 2, 3}));
  EXPECT_EQ(lazy_split_ranges(plan, 0, 6), (std::vector<int32_t>{0, 1, 1, 2, 2, 3}));
  EXPECT_EQ(plan.tile_run_end, (std::vector<int32_t>{2, 2, 3}));
  // A second sequence returning to an earlier shift: runs end at every change, sequence-local.
  const std::vector<BlockRef> second{{8, 5, 16}, {9, 0, 16}, {10, 5, 16}, {11, 5, 4}};
  append_sequence(plan, second, 16, true);
  EXPECT_EQ(plan.tile_shift_index, (std::vector<int32_t>{0, 0, 1, 0, 1, 0}));
  EXPECT_EQ(plan.tile_run_end, (std::vector<int32_t>{2, 2, 3, 1, 2, 3}));
}

class KvCacheTest : public testing::TestWithParam<int> {};

TEST_P(KvCacheTest, KvWriteRotatesKeysAndQueriesLikeCpu) {
  LAZYSCOPE_REQUIRE_GPU();
  const int D = GetParam(), block_size = 16, kv_heads = 2, heads = 8, n = 37, blocks = 8;
  std::mt19937 rng(D);
  const std::vector<float> inv_freq = rope_inv_freq(RopeParams{}, D);
  // qkv rows as the backend lays them out: [q | k | v].
  const int row = (heads + 2 * kv_heads) * D;
  const std::vector<float> qkv = random_bf16_values(std::size_t(n) * row, rng);
  std::vector<int32_t> positions(n), slots(n);
  for (int i = 0; i < n; ++i) {
    positions[i] = i * 997 + (i % 3 == 0 ? 70000 : 0);
    slots[i] = (i * 5) % (blocks * block_size);  // scattered, distinct
  }
  std::vector<float> k(std::size_t(n) * kv_heads * D), v(k.size()), q(std::size_t(n) * heads * D);
  for (int i = 0; i < n; ++i) {
    std::copy_n(qkv.begin() + std::size_t(i) * row, heads * D, q.begin() + std::size_t(i) * heads * D);
    std::copy_n(qkv.begin() + std::size_t(i) * row + heads * D, kv_heads * D, k.begin() + std::size_t(i) * kv_heads * D);
    std::copy_n(qkv.begin() + std::size_t(i) * row + (heads + kv_heads) * D, kv_heads * D,
                v.begin() + std::size_t(i) * kv_heads * D);
  }
  const std::size_t pool_count = std::size_t(blocks) * kv_heads * block_size * D;
  std::vector<float> k_pool(pool_count, 0.0f), v_pool(pool_count, 0.0f);
  cpu_kv_write(AttentionShape{D, heads, kv_heads, block_size}, k, v, positions, slots, inv_freq, k_pool, v_pool);
  for (int i = 0; i < n; ++i) {
    for (int h = 0; h < heads; ++h) rope_rotate(q.data() + (std::size_t(i) * heads + h) * D, D, inv_freq.data(), positions[i]);
  }
  DeviceBuffer d_qkv = upload_as_bf16(qkv), d_pos = upload(positions), d_slots = upload(slots), d_inv = upload(inv_freq);
  DeviceBuffer d_k(pool_count * 2), d_v(pool_count * 2);
  LAZYSCOPE_CUDA_CHECK(cudaMemset(d_k.as<void>(), 0, pool_count * 2));
  LAZYSCOPE_CUDA_CHECK(cudaMemset(d_v.as<void>(), 0, pool_count * 2));
  KvWriteParams p;
  p.k = d_qkv.as<bf16_bits>() + heads * D;
  p.v = d_qkv.as<bf16_bits>() + (heads + kv_heads) * D;
  p.row_stride = row;
  p.q = d_qkv.as<bf16_bits>();
  p.q_row_stride = row;
  p.num_heads = heads;
  p.positions = d_pos.as<int32_t>();
  p.slots = d_slots.as<int32_t>();
  p.n = n;
  p.num_kv_heads = kv_heads;
  p.head_dim = D;
  p.block_size = block_size;
  p.inv_freq = d_inv.as<float>();
  p.k_pool = d_k.as<bf16_bits>();
  p.v_pool = d_v.as<bf16_bits>();
  kv_write(p, nullptr);
  LAZYSCOPE_CUDA_CHECK(cudaDeviceSynchronize());
  EXPECT_LT(relative_error(download_bf16(d_k, pool_count), k_pool), 5e-3);
  EXPECT_EQ(relative_error(download_bf16(d_v, pool_count), v_pool), 0.0);  // V is copied bit-exactly
  const std::vector<float> qkv_after = download_bf16(d_qkv, std::size_t(n) * row);
  std::vector<float> q_after(q.size());
  for (int i = 0; i < n; ++i) {
    std::copy_n(qkv_after.begin() + std::size_t(i) * row, heads * D, q_after.begin() + std::size_t(i) * heads * D);
  }
  EXPECT_LT(relative_error(q_after, q), 5e-3);
}

TEST_P(KvCacheTest, MaterializeCopiesAndRotatesEveryLayerLikeCpu) {
  LAZYSCOPE_REQUIRE_GPU();
  const int D = GetParam(), block_size = 32, kv_heads = 2, blocks = 10, layers = 3;
  std::mt19937 rng(D + 1);
  const std::vector<float> inv_freq = rope_inv_freq(RopeParams{500000.0f, true}, D);
  const std::size_t layer_count = std::size_t(blocks) * kv_heads * block_size * D;
  std::vector<float> k = random_bf16_values(layer_count * layers, rng), v = random_bf16_values(layer_count * layers, rng);
  const std::vector<BlockCopy> copies{{0, 5, 2048, 32}, {1, 6, -300, 17}, {2, 7, 70000, 1}, {3, 8, 0, 32}};
  DeviceBuffer d_k = upload_as_bf16(k), d_v = upload_as_bf16(v), d_inv = upload(inv_freq), d_copies = upload(copies);
  for (int l = 0; l < layers; ++l) {
    for (const BlockCopy& copy : copies) {
      cpu::materialize(copy, kv_heads, D, block_size, inv_freq.data(), k.data() + l * layer_count,
                       v.data() + l * layer_count);
    }
  }
  MaterializeParams p;
  p.copies = d_copies.as<BlockCopyOp>();
  p.num_copies = int(copies.size());
  p.num_layers = layers;
  p.layer_stride = int64_t(layer_count);
  p.num_kv_heads = kv_heads;
  p.head_dim = D;
  p.block_size = block_size;
  p.inv_freq = d_inv.as<float>();
  p.k_pool = d_k.as<bf16_bits>();
  p.v_pool = d_v.as<bf16_bits>();
  materialize(p, nullptr);
  LAZYSCOPE_CUDA_CHECK(cudaDeviceSynchronize());
  EXPECT_LT(relative_error(download_bf16(d_k, layer_count * layers), k), 5e-3);
  EXPECT_EQ(relative_error(download_bf16(d_v, layer_count * layers), v), 0.0);
}

INSTANTIATE_TEST_SUITE_P(Kernels, KvCacheTest, testing::Values(16, 32, 64, 128));

}  // namespace
}  // namespace lazyscope::cuda

// Prefill attention for every block size that divides the 64-key tile (1 … 64): the tile copy has
// one path for blocks of at least head_dim/16 slots and one per column for smaller blocks; full
// tiles below the causal limit skip the mask. Plain and lazy, with and without splits, vs the CPU.
#include <gtest/gtest.h>

#include <random>
#include <string>
#include <utility>
#include <vector>

#include "attention_harness.h"
#include "gpu_test_util.h"
#include "kernels/cuda/attention.h"
#include "kernels/cuda/attention_plan.h"
#include "kernels/rope.h"

namespace lazyscope::cuda {
namespace {

using test::add_document;
using test::AttentionShape;
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

constexpr double kTolerance = 2e-2;  // same as the attention tests (bf16 in, bf16 out)

struct BlockCase {
  int head_dim;
  int block_size;
  bool lazy;
};

std::string block_name(const testing::TestParamInfo<BlockCase>& info) {
  return "D" + std::to_string(info.param.head_dim) + "_bs" + std::to_string(info.param.block_size) +
         (info.param.lazy ? "_lazy" : "_plain");
}

// Builds the table of `docs` (tokens, shift) then n new tokens at shift 0, runs prefill with 1
// and 3 splits and compares with the CPU reference.
void check_prefill(const BlockCase& c, const std::vector<std::pair<int, int>>& docs, int n, unsigned seed);

class PrefillBlockSizeTest : public testing::TestWithParam<BlockCase> {};

TEST_P(PrefillBlockSizeTest, MatchesCpuReference) {
  LAZYSCOPE_REQUIRE_GPU();
  const BlockCase c = GetParam();
  // Cached part: 150 keys in three documents (lazy: at distinct shifts), partial last blocks;
  // then the new tokens at shift 0.
  check_prefill(c, {{70, c.lazy ? 65536 + 91 : 0}, {45, c.lazy ? -13 : 0}, {35, c.lazy ? 400 : 0}}, 140,
                31 + c.head_dim + c.block_size * 5 + c.lazy);
}

// More than 128 tiles (the CTA counts visible tiles with a strided sample, then a bucket).
TEST(PrefillManyTilesTest, PlainOverNineThousandKeys) {
  LAZYSCOPE_REQUIRE_GPU();
  check_prefill({64, 16, false}, {{9000, 0}}, 40, 5);
}

TEST(PrefillManyTilesTest, LazyWithAShiftPerBlock) {
  LAZYSCOPE_REQUIRE_GPU();
  std::vector<std::pair<int, int>> docs;
  for (int i = 0; i < 300; ++i) docs.push_back({2, i * 37 - 500});  // one 2-slot block per shift: a tile each
  check_prefill({64, 2, true}, docs, 40, 6);
}

// Long documents (runs of about 32 tiles, so a CTA's range holds more than ten tiles ahead of a
// change): the warp-specialised kernel's producer then stages the next shift's query in pieces
// between steps, which short runs never exercise.
TEST(PrefillManyTilesTest, LazyLongDocuments) {
  LAZYSCOPE_REQUIRE_GPU();
  for (int d : {64, 128}) {
    SCOPED_TRACE("D" + std::to_string(d));
    check_prefill({d, 16, true}, {{2000, 65536 + 7}, {2100, -300}, {1990, 12}, {2050, 4000}}, 300, 7 + d);
  }
}

void check_prefill(const BlockCase& c, const std::vector<std::pair<int, int>>& docs, int n, unsigned seed) {
  const int kv_heads = 2, ratio = 4;
  const AttentionShape shape{c.head_dim, kv_heads * ratio, kv_heads, c.block_size};
  const int D = shape.head_dim, bs = shape.block_size, heads = shape.num_heads;
  std::mt19937 rng(seed);
  const std::vector<float> inv_freq = rope_inv_freq(RopeParams{10000.0f, false}, D);
  // Blocks are handed out in a scattered order.
  std::vector<BlockRef> table;
  int next = 0;
  for (const auto& [tokens, shift] : docs) add_document(table, next, tokens, shift, bs);
  add_document(table, next, n, 0, bs);
  const int pool_blocks = next;
  std::vector<int> order(pool_blocks);
  for (int i = 0; i < pool_blocks; ++i) order[i] = (i * 7 + 3) % pool_blocks;  // a permutation when 7 ∤ count
  if (pool_blocks % 7 == 0) {
    for (int i = 0; i < pool_blocks; ++i) order[i] = pool_blocks - 1 - i;
  }
  for (BlockRef& ref : table) ref.block = order[ref.block];
  const std::size_t pool_count = std::size_t(pool_blocks) * kv_heads * bs * D;
  const std::vector<float> k_pool = random_bf16_values(pool_count, rng), v_pool = random_bf16_values(pool_count, rng);

  AttentionPlan plan;
  append_sequence(plan, table, bs, c.lazy);
  const int total = plan.seq_total_keys[0];
  std::vector<int32_t> positions(n);
  for (int i = 0; i < n; ++i) positions[i] = total - n + i + 9;
  const std::vector<float> q = random_bf16_values(std::size_t(n) * heads * D, rng);
  const std::vector<float> expected = cpu_paged_attention(shape, k_pool, v_pool, table, q, positions, inv_freq, c.lazy);

  DeviceBuffer d_q = upload_as_bf16(c.lazy ? q : rotated_queries(q, positions, heads, D, inv_freq));
  DeviceBuffer d_k = upload_as_bf16(k_pool), d_v = upload_as_bf16(v_pool);
  const DevicePrefillPlan device_plan(plan, positions, inv_freq);
  DeviceBuffer d_q_rotated(lazy_query_workspace_elements(n, heads, D, device_plan.num_shifts) * 2);
  const std::size_t out_count = std::size_t(n) * heads * D;
  for (int splits_wanted : {1, 3}) {
    const std::vector<int32_t> ranges = lazy_split_ranges(plan, 0, splits_wanted);
    const int splits = c.lazy ? int(ranges.size() / 2) : splits_wanted;
    DeviceBuffer d_ranges = upload(ranges);
    DeviceBuffer d_out = poisoned_output(out_count);
    SplitWorkspace split_workspace(n * heads, splits, D);
    PrefillParams p = device_plan.params(shape, n, c.lazy);
    p.q = d_q.as<bf16_bits>();
    p.k_pool = d_k.as<bf16_bits>();
    p.v_pool = d_v.as<bf16_bits>();
    p.q_rotated = d_q_rotated.as<bf16_bits>();
    p.split_ranges = d_ranges.as<int32_t>();
    p.out = d_out.as<bf16_bits>();
    p.num_splits = splits;
    p.partial_o = split_workspace.partial_o.as<float>();
    p.partial_ml = split_workspace.partial_ml.as<float>();
    prefill_attention(p, nullptr);
    LAZYSCOPE_CUDA_CHECK(cudaDeviceSynchronize());
    EXPECT_LT(relative_error(download_bf16(d_out, out_count), expected), kTolerance) << "splits " << splits;
  }
}

std::vector<BlockCase> block_cases() {
  std::vector<BlockCase> cases;
  for (int bs : {1, 2, 4, 8, 16, 64}) {
    for (bool lazy : {false, true}) cases.push_back({128, bs, lazy});
  }
  for (int bs : {2, 64}) cases.push_back({64, bs, true});
  cases.push_back({32, 1, false});
  cases.push_back({16, 4, true});
  return cases;
}

INSTANTIATE_TEST_SUITE_P(Kernels, PrefillBlockSizeTest, testing::ValuesIn(block_cases()), block_name);

}  // namespace
}  // namespace lazyscope::cuda

// Lazy query rotation fused into the KV write: kv_write fills q_rotated (one copy per distinct
// shift) and leaves q raw; prefill with q_rotated_ready must equal the pre-pass path and the CPU
// lazy reference.
#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include "attention_harness.h"
#include "gpu_test_util.h"
#include "kernels/cuda/attention.h"
#include "kernels/cuda/attention_plan.h"
#include "base/error.h"
#include "kernels/rope.h"

namespace lazyscope::cuda {
namespace {

using test::add_document;
using test::AttentionShape;
using test::cpu_kv_write;
using test::cpu_paged_attention;
using test::DevicePrefillPlan;
using test::download_bf16;
using test::poisoned_output;
using test::round_to_bf16;
using test::SplitWorkspace;
using test::random_bf16_values;
using test::relative_error;
using test::upload;
using test::upload_as_bf16;

constexpr double kTolerance = 2e-2;  // same as the attention tests (bf16 in, bf16 out)

class FusedKvWriteTest : public testing::TestWithParam<int> {};

// Every distinct shift's copy equals R(position − shift) q; K/V as in the plain write; q untouched.
TEST_P(FusedKvWriteTest, WritesOneRotatedQueryPerShiftAndLeavesQRaw) {
  LAZYSCOPE_REQUIRE_GPU();
  const int D = GetParam(), block_size = 16, kv_heads = 2, heads = 6, n = 29, blocks = 4;
  std::mt19937 rng(500 + D);
  const std::vector<float> inv_freq = rope_inv_freq(RopeParams{500000.0f, true}, D);
  const std::vector<int32_t> shifts{0, -37, 65536 + 4507, 200003, 12};  // > 16 bits and negative
  const int num_shifts = int(shifts.size());
  const int row = (heads + 2 * kv_heads) * D;
  const std::vector<float> qkv = random_bf16_values(std::size_t(n) * row, rng);
  std::vector<int32_t> positions(n), slots(n);
  for (int i = 0; i < n; ++i) {
    positions[i] = 90000 + i * 131;
    slots[i] = (i * 7) % (blocks * block_size);  // scattered, distinct (7 and 64 coprime)
  }
  std::vector<float> k(std::size_t(n) * kv_heads * D), v(k.size());
  for (int i = 0; i < n; ++i) {
    std::copy_n(qkv.begin() + std::size_t(i) * row + heads * D, kv_heads * D, k.begin() + std::size_t(i) * kv_heads * D);
    std::copy_n(qkv.begin() + std::size_t(i) * row + (heads + kv_heads) * D, kv_heads * D,
                v.begin() + std::size_t(i) * kv_heads * D);
  }
  const std::size_t pool_count = std::size_t(blocks) * kv_heads * block_size * D;
  std::vector<float> k_pool(pool_count, 0.0f), v_pool(pool_count, 0.0f);
  cpu_kv_write(AttentionShape{D, heads, kv_heads, block_size}, k, v, positions, slots, inv_freq, k_pool, v_pool);
  // Expected copies: [shift][token][head * D].
  std::vector<float> expected_q(std::size_t(num_shifts) * n * heads * D);
  for (int s = 0; s < num_shifts; ++s) {
    for (int i = 0; i < n; ++i) {
      for (int h = 0; h < heads; ++h) {
        float* dst = expected_q.data() + ((std::size_t(s) * n + i) * heads + h) * D;
        std::copy_n(qkv.begin() + std::size_t(i) * row + h * D, D, dst);
        rope_rotate(dst, D, inv_freq.data(), int64_t(positions[i]) - shifts[s]);
      }
    }
  }
  DeviceBuffer d_qkv = upload_as_bf16(qkv), d_pos = upload(positions), d_slots = upload(slots);
  DeviceBuffer d_inv = upload(inv_freq), d_shifts = upload(shifts);
  DeviceBuffer d_k(pool_count * 2), d_v(pool_count * 2), d_q_rotated(expected_q.size() * 2);
  LAZYSCOPE_CUDA_CHECK(cudaMemset(d_k.as<void>(), 0, pool_count * 2));
  LAZYSCOPE_CUDA_CHECK(cudaMemset(d_v.as<void>(), 0, pool_count * 2));
  LAZYSCOPE_CUDA_CHECK(cudaMemset(d_q_rotated.as<void>(), 0xff, expected_q.size() * 2));  // NaN poison
  KvWriteParams p;
  p.k = d_qkv.as<bf16_bits>() + heads * D;
  p.v = d_qkv.as<bf16_bits>() + (heads + kv_heads) * D;
  p.row_stride = row;
  p.q = d_qkv.as<bf16_bits>();
  p.q_row_stride = row;
  p.shifts = d_shifts.as<int32_t>();
  p.num_shifts = num_shifts;
  p.q_rotated = d_q_rotated.as<bf16_bits>();
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
  EXPECT_EQ(relative_error(download_bf16(d_v, pool_count), v_pool), 0.0);
  EXPECT_EQ(relative_error(download_bf16(d_qkv, qkv.size()), qkv), 0.0);  // q (and k, v) left raw
  const std::vector<float> got = download_bf16(d_q_rotated, expected_q.size());
  for (int s = 0; s < num_shifts; ++s) {
    const std::size_t count = std::size_t(n) * heads * D;
    const std::vector<float> one(got.begin() + s * count, got.begin() + (s + 1) * count);
    const std::vector<float> want(expected_q.begin() + s * count, expected_q.begin() + (s + 1) * count);
    EXPECT_LT(relative_error(one, want), 5e-3) << "shift " << shifts[s];
  }
}

TEST_P(FusedKvWriteTest, RejectsFusedRotationWithoutShiftsOrQuery) {
  LAZYSCOPE_REQUIRE_GPU();
  DeviceBuffer buffer(4096);
  KvWriteParams p;
  p.k = p.v = buffer.as<bf16_bits>();
  p.k_pool = p.v_pool = buffer.as<bf16_bits>();
  p.row_stride = 64;
  p.n = 1;
  p.num_kv_heads = 1;
  p.num_heads = 1;
  p.head_dim = GetParam();
  p.block_size = 16;
  p.q_rotated = buffer.as<bf16_bits>();
  EXPECT_THROW(kv_write(p, nullptr), Error);  // no q, no shifts
  p.q = buffer.as<bf16_bits>();
  p.q_row_stride = 64;
  EXPECT_THROW(kv_write(p, nullptr), Error);  // no shifts
}

INSTANTIATE_TEST_SUITE_P(Kernels, FusedKvWriteTest, testing::Values(16, 32, 64, 128));

struct FusedCase {
  int head_dim;
  int ratio;
  int block_size;
};

std::string fused_name(const testing::TestParamInfo<FusedCase>& info) {
  return "D" + std::to_string(info.param.head_dim) + "_gqa" + std::to_string(info.param.ratio) + "_bs" +
         std::to_string(info.param.block_size);
}

class FusedPrefillTest : public testing::TestWithParam<FusedCase> {};

// A step as the backend runs it: the new tokens' K/V and the lazy query copies come from one
// kv_write, then lazy prefill reads the copies (q_rotated_ready). Several documents at distinct
// shifts (one past 16 bits, one negative, one document repeated at another shift).
TEST_P(FusedPrefillTest, FusedRotationMatchesPrePassAndCpu) {
  LAZYSCOPE_REQUIRE_GPU();
  const FusedCase c = GetParam();
  const int D = c.head_dim, bs = c.block_size, kv_heads = 2, heads = kv_heads * c.ratio, pool_blocks = 64;
  const AttentionShape shape{D, heads, kv_heads, bs};
  std::mt19937 rng(77 + D + c.ratio + bs);
  const std::vector<float> inv_freq = rope_inv_freq(RopeParams{10000.0f, false}, D);
  const std::size_t pool_count = std::size_t(pool_blocks) * kv_heads * bs * D;
  std::vector<float> k_pool = random_bf16_values(pool_count, rng), v_pool = random_bf16_values(pool_count, rng);
  for (int n : {5, 3 * bs + 7, 130}) {
    std::vector<BlockRef> table;
    int next = 0;
    const std::vector<BlockRef> doc_a = add_document(table, next, 3 * bs - 5, 65536 + 4507, bs);
    add_document(table, next, 2 * bs, -37, bs);
    for (BlockRef ref : doc_a) table.push_back(BlockRef{ref.block, 131072 + 11, ref.valid});
    add_document(table, next, 3, 900, bs);
    // The new tokens' blocks (shift 0), filled by kv_write below.
    const int first_new = next;
    std::vector<int32_t> slots(n);
    for (int t = 0; t < n; ++t) slots[t] = (first_new + t / bs) * bs + t % bs;
    for (int t = 0; t < n; t += bs) table.push_back(BlockRef{next++, 0, std::min(bs, n - t)});
    ASSERT_LE(next, pool_blocks);
    AttentionPlan plan;
    append_sequence(plan, table, bs, true);
    const int total = plan.seq_total_keys[0];
    std::vector<int32_t> positions(n);
    for (int i = 0; i < n; ++i) positions[i] = total - n + i + 70000;
    const std::vector<float> q = random_bf16_values(std::size_t(n) * heads * D, rng);
    const std::vector<float> k_new = random_bf16_values(std::size_t(n) * kv_heads * D, rng);
    const std::vector<float> v_new = random_bf16_values(std::size_t(n) * kv_heads * D, rng);

    // CPU: write the new tokens (keys rounded to bf16 as the GPU pool stores them), then attend.
    std::vector<float> cpu_k = k_pool, cpu_v = v_pool;
    cpu_kv_write(shape, k_new, v_new, positions, slots, inv_freq, cpu_k, cpu_v);
    cpu_k = round_to_bf16(cpu_k);
    const std::vector<float> expected = cpu_paged_attention(shape, cpu_k, cpu_v, table, q, positions, inv_freq, true);

    // GPU: q rows of [q | k | v] like the backend's qkv buffer.
    const int row = (heads + 2 * kv_heads) * D;
    std::vector<float> qkv(std::size_t(n) * row);
    for (int i = 0; i < n; ++i) {
      std::copy_n(q.begin() + std::size_t(i) * heads * D, heads * D, qkv.begin() + std::size_t(i) * row);
      std::copy_n(k_new.begin() + std::size_t(i) * kv_heads * D, kv_heads * D,
                  qkv.begin() + std::size_t(i) * row + heads * D);
      std::copy_n(v_new.begin() + std::size_t(i) * kv_heads * D, kv_heads * D,
                  qkv.begin() + std::size_t(i) * row + (heads + kv_heads) * D);
    }
    DeviceBuffer d_qkv = upload_as_bf16(qkv), d_k = upload_as_bf16(k_pool), d_v = upload_as_bf16(v_pool);
    const DevicePrefillPlan device_plan(plan, positions, inv_freq);
    DeviceBuffer d_slots = upload(slots);
    const int num_shifts = device_plan.num_shifts;
    ASSERT_EQ(num_shifts, 5);
    const std::size_t rotated_count = lazy_query_workspace_elements(n, heads, D, num_shifts);
    DeviceBuffer d_fused = poisoned_output(rotated_count), d_prepass(rotated_count * 2);
    KvWriteParams kw;
    kw.k = d_qkv.as<bf16_bits>() + heads * D;
    kw.v = d_qkv.as<bf16_bits>() + (heads + kv_heads) * D;
    kw.row_stride = row;
    kw.q = d_qkv.as<bf16_bits>();
    kw.q_row_stride = row;
    kw.shifts = device_plan.shifts.as<int32_t>();
    kw.num_shifts = num_shifts;
    kw.q_rotated = d_fused.as<bf16_bits>();
    kw.num_heads = heads;
    kw.positions = device_plan.positions.as<int32_t>();
    kw.slots = d_slots.as<int32_t>();
    kw.n = n;
    kw.num_kv_heads = kv_heads;
    kw.head_dim = D;
    kw.block_size = bs;
    kw.inv_freq = device_plan.inv_freq.as<float>();
    kw.k_pool = d_k.as<bf16_bits>();
    kw.v_pool = d_v.as<bf16_bits>();
    kv_write(kw, nullptr);

    const std::size_t out_count = std::size_t(n) * heads * D;
    for (int splits_wanted : {1, 4}) {
      const std::vector<int32_t> ranges = lazy_split_ranges(plan, 0, splits_wanted);
      const int splits = int(ranges.size() / 2);
      DeviceBuffer d_ranges = upload(ranges);
      SplitWorkspace split_workspace(n * heads, splits, D);
      std::vector<float> outputs[2];
      for (int fused = 0; fused < 2; ++fused) {
        DeviceBuffer d_out = poisoned_output(out_count);
        PrefillParams p = device_plan.params(shape, n, true);
        p.q = d_qkv.as<bf16_bits>();  // raw: the pre-pass path rotates it, the fused path ignores it
        p.q_row_stride = row;
        p.k_pool = d_k.as<bf16_bits>();
        p.v_pool = d_v.as<bf16_bits>();
        p.q_rotated = fused ? d_fused.as<bf16_bits>() : d_prepass.as<bf16_bits>();
        p.q_rotated_ready = fused == 1;
        p.split_ranges = d_ranges.as<int32_t>();
        p.out = d_out.as<bf16_bits>();
        p.num_splits = splits;
        p.partial_o = split_workspace.partial_o.as<float>();
        p.partial_ml = split_workspace.partial_ml.as<float>();
        prefill_attention(p, nullptr);
        LAZYSCOPE_CUDA_CHECK(cudaDeviceSynchronize());
        outputs[fused] = download_bf16(d_out, out_count);
        EXPECT_LT(relative_error(outputs[fused], expected), kTolerance)
            << "n " << n << " splits " << splits << (fused ? " fused" : " pre-pass");
      }
      // Same rotation formula in both paths: the outputs agree to rounding.
      EXPECT_LT(relative_error(outputs[1], outputs[0]), 2e-3) << "n " << n << " splits " << splits;
      // And the copies themselves.
      EXPECT_LT(relative_error(download_bf16(d_fused, rotated_count), download_bf16(d_prepass, rotated_count)), 2e-3)
          << "n " << n;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Kernels, FusedPrefillTest,
                         testing::Values(FusedCase{128, 4, 16}, FusedCase{128, 1, 32}, FusedCase{64, 8, 16},
                                         FusedCase{64, 3, 32}, FusedCase{32, 2, 16}, FusedCase{16, 3, 16}),
                         fused_name);

}  // namespace
}  // namespace lazyscope::cuda

// RoPE tables against the published formulas, and the CPU paged-attention reference.
#include <gtest/gtest.h>

#include <cmath>
#include <numbers>
#include <random>

#include "kernels/cpu/attention.h"
#include "base/error.h"
#include "kernels/rope.h"

namespace lazyscope {
namespace {

TEST(Rope, PlainFrequenciesFollowThetaPowers) {
  RopeParams p;
  p.theta = 10000.0f;
  std::vector<float> f = rope_inv_freq(p, 64);
  ASSERT_EQ(f.size(), 32u);
  for (int i = 0; i < 32; ++i) EXPECT_NEAR(f[i], std::pow(10000.0, -2.0 * i / 64), 1e-6 * std::pow(10000.0, -2.0 * i / 64));
}

TEST(Rope, Llama3ScalingMatchesThePublishedFormula) {
  RopeParams p;
  p.theta = 500000.0f;
  p.llama3 = true;
  p.factor = 8.0f;
  p.low_freq_factor = 1.0f;
  p.high_freq_factor = 4.0f;
  p.original_max_position = 8192;
  std::vector<float> f = rope_inv_freq(p, 128);
  int kept = 0, divided = 0, smoothed = 0;
  for (int i = 0; i < 64; ++i) {
    const double base = std::pow(500000.0, -2.0 * i / 128);
    const double wavelen = 2 * std::numbers::pi / base;
    double expected;
    if (wavelen < 8192.0 / 4.0) {
      expected = base;
      ++kept;
    } else if (wavelen > 8192.0 / 1.0) {
      expected = base / 8.0;
      ++divided;
    } else {
      const double smooth = (8192.0 / wavelen - 1.0) / (4.0 - 1.0);
      expected = (1 - smooth) * base / 8.0 + smooth * base;
      ++smoothed;
    }
    EXPECT_NEAR(f[i], expected, 2e-6 * expected) << "dimension " << i;
  }
  // The Llama-3.1 table has all three regimes.
  EXPECT_GT(kept, 0);
  EXPECT_GT(divided, 0);
  EXPECT_GT(smoothed, 0);
}

TEST(Rope, RotationsCompose) {
  RopeParams p;
  std::vector<float> f = rope_inv_freq(p, 16);
  std::mt19937 rng(1);
  std::normal_distribution<float> n;
  std::vector<float> x(16), y;
  for (float& v : x) v = n(rng);
  y = x;
  rope_rotate(x.data(), 16, f.data(), 700);
  rope_rotate(y.data(), 16, f.data(), 300);
  rope_rotate(y.data(), 16, f.data(), 400);
  for (int i = 0; i < 16; ++i) EXPECT_NEAR(x[i], y[i], 1e-4);
}

// Lazy attention over shifted blocks equals plain attention over keys re-rotated by the shift.
TEST(PagedAttention, LazyShiftEqualsMaterializedCopy) {
  const int B = 4, D = 16, Hq = 4, Hkv = 2, blocks = 6;
  RopeParams rp;
  std::vector<float> f = rope_inv_freq(rp, D);
  std::mt19937 rng(2);
  std::normal_distribution<float> n;
  std::vector<float> k(blocks * Hkv * B * D), v(k.size());
  for (float& x : k) x = n(rng);
  for (float& x : v) x = n(rng);
  std::vector<float> k_mat = k, v_mat = v;
  // Blocks 0-1: a document stored at [3, 10) (7 tokens), placed with shift 25; block 2: query.
  std::vector<BlockRef> lazy_table = {{0, 25, 4}, {1, 25, 3}, {2, 0, 2}};
  cpu::materialize({0, 3, 25, 4}, Hkv, D, B, f.data(), k_mat.data(), v_mat.data());
  cpu::materialize({1, 4, 25, 3}, Hkv, D, B, f.data(), k_mat.data(), v_mat.data());
  std::vector<BlockRef> plain_table = {{3, 0, 4}, {4, 0, 3}, {2, 0, 2}};
  std::vector<float> q(2 * Hq * D);
  for (float& x : q) x = n(rng);
  std::vector<int32_t> pos = {35, 36};
  std::vector<float> out_lazy(q.size()), out_plain(q.size());
  cpu::PagedAttentionParams p;
  p.q = q.data();
  p.q_positions = pos.data();
  p.n = 2;
  p.num_heads = Hq;
  p.num_kv_heads = Hkv;
  p.head_dim = D;
  p.block_size = B;
  p.inv_freq = f.data();
  p.k_pool = k.data();
  p.v_pool = v.data();
  p.table = lazy_table.data();
  p.table_len = 3;
  p.lazy = true;
  p.out = out_lazy.data();
  cpu::paged_attention(p);
  p.k_pool = k_mat.data();
  p.v_pool = v_mat.data();
  p.table = plain_table.data();
  p.lazy = false;
  p.out = out_plain.data();
  cpu::paged_attention(p);
  for (std::size_t i = 0; i < q.size(); ++i) EXPECT_NEAR(out_lazy[i], out_plain[i], 1e-5);
  // And a shift really matters: treating the shifted blocks as unshifted changes the output.
  std::vector<BlockRef> wrong = {{0, 0, 4}, {1, 0, 3}, {2, 0, 2}};
  p.k_pool = k.data();
  p.v_pool = v.data();
  p.table = wrong.data();
  p.out = out_plain.data();
  cpu::paged_attention(p);
  double diff = 0;
  for (std::size_t i = 0; i < q.size(); ++i) diff = std::max(diff, double(std::fabs(out_lazy[i] - out_plain[i])));
  EXPECT_GT(diff, 1e-3);
}

TEST(PagedAttention, PlainCallRefusesShiftedBlocks) {
  std::vector<float> pool(4 * 16, 0.0f), q(16, 0.0f), out(16);
  std::vector<float> f(8, 1.0f);
  std::vector<BlockRef> table = {{0, 5, 1}};
  std::vector<int32_t> pos = {0};
  cpu::PagedAttentionParams p;
  p.q = q.data();
  p.q_positions = pos.data();
  p.k_pool = pool.data();
  p.v_pool = pool.data();
  p.table = table.data();
  p.table_len = 1;
  p.n = 1;
  p.num_heads = 1;
  p.num_kv_heads = 1;
  p.head_dim = 16;
  p.block_size = 4;
  p.inv_freq = f.data();
  p.out = out.data();
  EXPECT_THROW(cpu::paged_attention(p), Error);
}

}  // namespace
}  // namespace lazyscope

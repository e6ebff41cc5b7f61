// The persistent decode layer kernel against the GEMV launches it replaces (wo, RMSNorm + gate_up,
// SwiGLU + down, RMSNorm + wqkv + RoPE + KV store), on the same inputs, over shapes whose rows are
// whole segments, split into pieces, and shared between CTAs in every way a share can fall.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "base/error.h"
#include "gpu_test_util.h"
#include "kernels/cuda/decode_layer.h"
#include "kernels/cuda/gemv.h"
#include "kernels/cuda/ops.h"

namespace lazyscope::cuda {
namespace {

using test::download_bf16;
using test::random_bf16_values;
using test::relative_error;
using test::upload;
using test::upload_as_bf16;

struct LayerShape {
  int hidden, inter, q_dim, kv_dim, head_dim;
};

std::string name(const LayerShape& s) {
  return "hidden " + std::to_string(s.hidden) + ", inter " + std::to_string(s.inter) + ", q " +
         std::to_string(s.q_dim) + ", kv " + std::to_string(s.kv_dim) + ", D " + std::to_string(s.head_dim);
}

std::vector<float> download_f32(const DeviceBuffer& buffer, std::size_t count) {
  std::vector<float> out(count);
  LAZYSCOPE_CUDA_CHECK(cudaMemcpy(out.data(), buffer.as<void>(), count * sizeof(float), cudaMemcpyDeviceToHost));
  return out;
}

// A middle or last layer's launch over these buffers (the next layer's wqkv left to the caller).
DecodeLayerParams layer_params(const LayerShape& s, const DeviceBuffer& attn, DeviceBuffer& x, const DeviceBuffer& wo,
                               const DeviceBuffer& mlp_norm, const DeviceBuffer& gate_up, const DeviceBuffer& down,
                               DeviceBuffer& act, DeviceBuffer& sync, float eps) {
  DecodeLayerParams p;
  p.attn = attn.as<bf16_bits>();
  p.x = x.as<float>();
  p.wo = wo.as<bf16_bits>();
  p.mlp_norm = mlp_norm.as<float>();
  p.w_gate_up = gate_up.as<bf16_bits>();
  p.w_down = down.as<bf16_bits>();
  p.act = act.as<bf16_bits>();
  p.hidden = s.hidden;
  p.inter = s.inter;
  p.q_dim = s.q_dim;
  p.eps = eps;
  p.grid_sync = sync.as<unsigned long long>();
  return p;
}

// One side of the comparison: its own residual, activation, q and K/V pools.
struct LayerState {
  DeviceBuffer x, act, gate_up, q, k_pool, v_pool, scratch;
  LayerState(const std::vector<float>& x0, const LayerShape& s, std::size_t pool_elements)
      : x(test::upload(x0)),
        act(std::size_t(s.inter) * 2),
        gate_up(std::size_t(2) * s.inter * 2),
        q(std::size_t(s.q_dim + 2 * s.kv_dim) * 2),
        k_pool(pool_elements * 2),
        v_pool(pool_elements * 2),
        scratch(std::size_t(std::max(s.hidden, s.inter)) * 2) {
    for (DeviceBuffer* b : {&q, &k_pool, &v_pool}) LAZYSCOPE_CUDA_CHECK(cudaMemset(b->as<void>(), 0, b->bytes()));
  }
};

TEST(DecodeLayerTest, MatchesTheGemvLaunchesItReplaces) {
  LAZYSCOPE_REQUIRE_GPU();
  const std::vector<LayerShape> shapes = {
      {2048, 8192, 2048, 512, 64},   // Llama-3.2-1B: whole rows; down rows in 4 pieces
      {2560, 6144, 2560, 640, 128},  // rows in 2 and 3 pieces, D 128
      {256, 512, 256, 64, 32},       // fewer rows than CTAs in places: shares of 1 or 2 rows, or none
      {576, 1536, 576, 192, 64},     // SmolLM2-135M's widths: segments of 576 and 1,536 columns
  };
  constexpr int kBlock = 16, kBlocks = 4, kSlot = 37;
  std::mt19937 rng(91);
  for (const LayerShape& s : shapes) {
    const std::string why = decode_layer_unsupported(s.hidden, s.inter, s.q_dim, s.kv_dim, s.head_dim, 4);
    if (!why.empty()) GTEST_SKIP() << why;
    const int kv_heads = s.kv_dim / s.head_dim;
    const std::size_t pool_elements = std::size_t(kBlocks) * kv_heads * kBlock * s.head_dim;
    DeviceBuffer attn = upload_as_bf16(random_bf16_values(s.q_dim, rng));
    DeviceBuffer wo = upload_as_bf16(random_bf16_values(std::size_t(s.hidden) * s.q_dim, rng, 0.03f));
    DeviceBuffer gate_up = upload_as_bf16(random_bf16_values(std::size_t(2) * s.inter * s.hidden, rng, 0.03f));
    DeviceBuffer down = upload_as_bf16(random_bf16_values(std::size_t(s.hidden) * s.inter, rng, 0.03f));
    DeviceBuffer wqkv =
        upload_as_bf16(random_bf16_values(std::size_t(s.q_dim + 2 * s.kv_dim) * s.hidden, rng, 0.03f));
    std::vector<float> mlp_norm = random_bf16_values(s.hidden, rng, 0.2f), attn_norm = mlp_norm;
    for (float& v : mlp_norm) v += 1.0f;
    for (float& v : attn_norm) v = 1.5f - v;
    DeviceBuffer d_mlp_norm = upload(mlp_norm), d_attn_norm = upload(attn_norm);
    std::vector<float> inv_freq(s.head_dim / 2);
    for (int i = 0; i < s.head_dim / 2; ++i) inv_freq[i] = std::pow(10000.0f, -2.0f * i / s.head_dim);
    DeviceBuffer d_inv_freq = upload(inv_freq);
    DeviceBuffer positions = upload(std::vector<int32_t>{1234}), slots = upload(std::vector<int32_t>{kSlot});
    DeviceBuffer sync(sizeof(unsigned long long));
    LAZYSCOPE_CUDA_CHECK(cudaMemset(sync.as<void>(), 0, sync.bytes()));
    unsigned long long barriers_expected = 0;  // grid-wide barriers so far: 3 a layer, 2 for the last
    const std::vector<float> x0 = random_bf16_values(s.hidden, rng, 2.0f);
    constexpr float kEps = 1e-5f;
    DeviceBuffer claims(sizeof(unsigned));
    LAZYSCOPE_CUDA_CHECK(cudaMemset(claims.as<void>(), 0, claims.bytes()));
    for (int mode = 0; mode < 4; ++mode) {
      // Plain or lazy query; a middle layer or the last; gate_up claimed at run time in the first two.
      const bool lazy = mode % 2 == 1, last_layer = mode >= 2, dynamic = mode < 2;
      {
        LayerState ref(x0, s, pool_elements), got(x0, s, pool_elements);
        auto qkv_output = [&](LayerState& st) {
          QkvRopeOutput o;
          o.q = st.q.as<bf16_bits>();
          o.k_pool = st.k_pool.as<bf16_bits>();
          o.v_pool = st.v_pool.as<bf16_bits>();
          o.positions = positions.as<int32_t>();
          o.slots = slots.as<int32_t>();
          o.inv_freq = d_inv_freq.as<float>();
          o.q_dim = s.q_dim;
          o.kv_dim = s.kv_dim;
          o.head_dim = s.head_dim;
          o.num_kv_heads = kv_heads;
          o.block_size = kBlock;
          o.rotate_q = !lazy;
          return o;
        };
        // Three steps in a row: the grid barrier's state carries from launch to launch.
        for (int step = 0; step < 3; ++step) {
          const GemvContext one_pass;
          gemv_bf16(attn.as<bf16_bits>(), wo.as<bf16_bits>(), s.hidden, s.q_dim, ref.x.as<float>(), true, true, nullptr,
                    one_pass);
          gemv_rmsnorm_bf16(ref.x.as<float>(), d_mlp_norm.as<float>(), kEps, gate_up.as<bf16_bits>(), 2 * s.inter,
                            s.hidden, ref.gate_up.as<bf16_bits>(), false, false, nullptr, one_pass,
                            ref.scratch.as<bf16_bits>());
          swiglu(ref.gate_up.as<bf16_bits>(), 1, s.inter, ref.act.as<bf16_bits>(), nullptr);
          gemv_bf16(ref.act.as<bf16_bits>(), down.as<bf16_bits>(), s.hidden, s.inter, ref.x.as<float>(), true, true,
                    nullptr, one_pass);
          if (!last_layer) {
            ASSERT_TRUE(gemv_rmsnorm_qkv_rope(ref.x.as<float>(), d_attn_norm.as<float>(), kEps,
                                              wqkv.as<bf16_bits>(), s.hidden, qkv_output(ref), nullptr, one_pass));
          }
          DecodeLayerParams p =
              layer_params(s, attn, got.x, wo, d_mlp_norm, gate_up, down, got.act, sync, kEps);
          if (!last_layer) {
            p.next_attn_norm = d_attn_norm.as<float>();
            p.next_wqkv = wqkv.as<bf16_bits>();
            p.next_qkv = qkv_output(got);
            p.next_wo = wo.as<bf16_bits>();  // the L2 prefetch changes only what is in L2
            p.next_gate_up = gate_up.as<bf16_bits>();
            p.l2_prefetch_bytes = 256 << 10;
          }
          if (dynamic) p.gate_up_claims = claims.as<unsigned>();
          decode_layer(p, DecodeLayerLaunch{}, nullptr);
          LAZYSCOPE_CUDA_CHECK(cudaDeviceSynchronize());
          barriers_expected += last_layer ? 2 : 3;
          const std::string where = name(s) + (lazy ? ", lazy" : ", plain") + (last_layer ? ", last layer" : "") +
                                    (dynamic ? ", gate_up claimed" : ", gate_up shared out") + ", step " +
                                    std::to_string(step);
          EXPECT_LT(relative_error(download_f32(got.x, s.hidden), download_f32(ref.x, s.hidden)), 5e-3) << where;
          EXPECT_LT(relative_error(download_bf16(got.act, s.inter), download_bf16(ref.act, s.inter)), 1e-2) << where;
          if (!last_layer) {
            EXPECT_LT(relative_error(download_bf16(got.q, s.q_dim), download_bf16(ref.q, s.q_dim)), 1e-2) << where;
            EXPECT_LT(relative_error(download_bf16(got.k_pool, pool_elements), download_bf16(ref.k_pool, pool_elements)),
                      1e-2)
                << where;
            EXPECT_LT(relative_error(download_bf16(got.v_pool, pool_elements), download_bf16(ref.v_pool, pool_elements)),
                      1e-2)
                << where;
          }
        }
        // Every CTA (one an SM) arrived once at each barrier of each launch.
        unsigned long long arrivals = 0;
        LAZYSCOPE_CUDA_CHECK(cudaMemcpy(&arrivals, sync.as<void>(), sizeof(arrivals), cudaMemcpyDeviceToHost));
        int device = 0, sms = 0;
        LAZYSCOPE_CUDA_CHECK(cudaGetDevice(&device));
        LAZYSCOPE_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
        EXPECT_EQ(arrivals, barriers_expected * unsigned(sms)) << name(s);
        unsigned left = 1;
        LAZYSCOPE_CUDA_CHECK(cudaMemcpy(&left, claims.as<void>(), sizeof(left), cudaMemcpyDeviceToHost));
        EXPECT_EQ(left, 0u) << "the gate_up claims are left at zero for the next launch";
      }
    }
  }
}

// The same inputs give the same bits, launch after launch (segment sums added in a fixed order).
TEST(DecodeLayerTest, RepeatsBitForBit) {
  LAZYSCOPE_REQUIRE_GPU();
  const LayerShape s{2048, 8192, 2048, 512, 64};
  const std::string why = decode_layer_unsupported(s.hidden, s.inter, s.q_dim, s.kv_dim, s.head_dim, 3);
  if (!why.empty()) GTEST_SKIP() << why;
  std::mt19937 rng(92);
  DeviceBuffer attn = upload_as_bf16(random_bf16_values(s.q_dim, rng));
  DeviceBuffer wo = upload_as_bf16(random_bf16_values(std::size_t(s.hidden) * s.q_dim, rng, 0.03f));
  DeviceBuffer gate_up = upload_as_bf16(random_bf16_values(std::size_t(2) * s.inter * s.hidden, rng, 0.03f));
  DeviceBuffer down = upload_as_bf16(random_bf16_values(std::size_t(s.hidden) * s.inter, rng, 0.03f));
  std::vector<float> norm = random_bf16_values(s.hidden, rng, 0.2f);
  for (float& v : norm) v += 1.0f;
  DeviceBuffer d_norm = upload(norm), act(std::size_t(s.inter) * 2), sync(sizeof(unsigned long long));
  LAZYSCOPE_CUDA_CHECK(cudaMemset(sync.as<void>(), 0, sync.bytes()));
  const std::vector<float> x0 = random_bf16_values(s.hidden, rng, 2.0f);
  std::vector<float> first;
  for (int run = 0; run < 4; ++run) {
    DeviceBuffer x = upload(x0);
    const DecodeLayerParams p = layer_params(s, attn, x, wo, d_norm, gate_up, down, act, sync, 1e-5f);
    DecodeLayerLaunch launch;
    launch.stages = 3;
    launch.programmatic = run % 2 == 0;
    decode_layer(p, launch, nullptr);
    LAZYSCOPE_CUDA_CHECK(cudaDeviceSynchronize());
    const std::vector<float> out = download_f32(x, s.hidden);
    if (run == 0) {
      first = out;
    } else {
      EXPECT_EQ(out, first) << "run " << run;
    }
  }
}

// Checked on the host before anything reaches the device (no GPU needed).
TEST(DecodeLayerTest, StageCountOutOfRangeThrows) {
  for (int stages : {1, 9}) {
    DecodeLayerLaunch launch;
    launch.stages = stages;
    try {
      decode_layer(DecodeLayerParams{}, launch, nullptr);
      FAIL() << stages << " stages were launched";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("stages " + std::to_string(stages) + " is out of range (2..8)"),
                std::string::npos)
          << e.what();
    }
  }
}

TEST(DecodeLayerTest, UnsupportedShapesAreNamed) {
  LAZYSCOPE_REQUIRE_GPU();
  if (!decode_layer_unsupported(2048, 8192, 2048, 512, 64, 4).empty()) GTEST_SKIP() << "needs compute capability 9.0+";
  EXPECT_NE(decode_layer_unsupported(2052, 8192, 2048, 512, 64, 4).find("width 2052"), std::string::npos);
  EXPECT_NE(decode_layer_unsupported(2048, 8192, 2048, 512, 64, 9).find("out of range (2..8)"), std::string::npos);
  EXPECT_NE(decode_layer_unsupported(2048, 8192, 2048, 512, 40, 4).find("head_dim 40"), std::string::npos);
}

}  // namespace
}  // namespace lazyscope::cuda

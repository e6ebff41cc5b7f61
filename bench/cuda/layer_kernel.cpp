// The batch-1 decode layer's dense part alone: the persistent layer kernel against the GEMV
// launches it replaces, back to back over distinct layers' weights (bench_cuda_end_to_end --layer-kernel).
#include <algorithm>
#include <functional>
#include <string>
#include <vector>

#include <cuda_runtime.h>

#include "bench/cuda/scenarios.h"
#include "kernels/cuda/check.h"
#include "kernels/cuda/decode_layer.h"
#include "kernels/cuda/device_buffer.h"
#include "kernels/cuda/gemv.h"
#include "kernels/cuda/ops.h"
#include "kernels/synthetic_shapes.h"

namespace lazyscope::bench {
namespace {

struct DenseWeights {
  cuda::DeviceBuffer wo, gate_up, down, wqkv, mlp_norm, attn_norm;
};

double median_of(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace

std::vector<LayerKernelRow> measure_layer_kernel(const std::string& model) {
  using namespace cuda;
  const ModelShape s = synthetic_shape(model);
  const int H = s.hidden_size, I = s.intermediate_size, Q = s.q_dim(), K = s.kv_dim(), D = s.head_dim;
  const std::size_t layer_bytes = std::size_t(H) * Q * 2 + std::size_t(2) * I * H * 2 + std::size_t(H) * I * 2 +
                                  std::size_t(Q + 2 * K) * H * 2;
  // Enough layers that no launch finds its weights in L2 (at least 512 MiB, at least 4 layers).
  const int layers = int(std::max<std::size_t>(4, (std::size_t(512) << 20) / layer_bytes + 1));
  std::vector<DenseWeights> w(layers);
  for (int l = 0; l < layers; ++l) {
    w[l].wo.resize(std::size_t(H) * Q * 2);
    w[l].gate_up.resize(std::size_t(2) * I * H * 2);
    w[l].down.resize(std::size_t(H) * I * 2);
    w[l].wqkv.resize(std::size_t(Q + 2 * K) * H * 2);
    w[l].mlp_norm.resize(std::size_t(H) * 4);
    w[l].attn_norm.resize(std::size_t(H) * 4);
    fill_random_bf16(w[l].wo.as<bf16_bits>(), int64_t(H) * Q, 10 + l, 0.02f, nullptr);
    fill_random_bf16(w[l].gate_up.as<bf16_bits>(), int64_t(2) * I * H, 20 + l, 0.02f, nullptr);
    fill_random_bf16(w[l].down.as<bf16_bits>(), int64_t(H) * I, 30 + l, 0.02f, nullptr);
    fill_random_bf16(w[l].wqkv.as<bf16_bits>(), int64_t(Q + 2 * K) * H, 40 + l, 0.02f, nullptr);
    fill_float(w[l].mlp_norm.as<float>(), H, 1.0f, nullptr);
    fill_float(w[l].attn_norm.as<float>(), H, 1.0f, nullptr);
  }
  DeviceBuffer attn(std::size_t(Q) * 2), x(std::size_t(H) * 4), act(std::size_t(I) * 2), gate_up(std::size_t(2) * I * 2),
      qkv(std::size_t(Q + 2 * K) * 2), scratch(std::size_t(std::max(H, I)) * 2), sync(8);
  constexpr int kBlock = 16;
  DeviceBuffer k_pool(std::size_t(4) * K * kBlock * 2), v_pool(std::size_t(4) * K * kBlock * 2);
  fill_random_bf16(attn.as<bf16_bits>(), Q, 5, 1.0f, nullptr);
  fill_float(x.as<float>(), H, 0.5f, nullptr);
  LAZYSCOPE_CUDA_CHECK(cudaMemset(sync.as<void>(), 0, sync.bytes()));
  const std::vector<float> inv(D / 2, 0.01f);
  DeviceBuffer inv_freq(inv.size() * 4), meta(8);
  LAZYSCOPE_CUDA_CHECK(cudaMemcpy(inv_freq.as<void>(), inv.data(), inv.size() * 4, cudaMemcpyHostToDevice));
  const int32_t position_slot[2] = {100, 5};
  LAZYSCOPE_CUDA_CHECK(cudaMemcpy(meta.as<void>(), position_slot, 8, cudaMemcpyHostToDevice));
  QkvRopeOutput qo;
  qo.q = qkv.as<bf16_bits>();
  qo.k_pool = k_pool.as<bf16_bits>();
  qo.v_pool = v_pool.as<bf16_bits>();
  qo.positions = meta.as<int32_t>();
  qo.slots = meta.as<int32_t>() + 1;
  qo.inv_freq = inv_freq.as<float>();
  qo.q_dim = Q;
  qo.kv_dim = K;
  qo.head_dim = D;
  qo.num_kv_heads = s.num_kv_heads;
  qo.block_size = kBlock;
  cudaStream_t stream;
  LAZYSCOPE_CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  GemvContext gemv;  // one pass, PDL on: the decode step's GEMVs
  auto run_gemvs = [&](int l) {
    const DenseWeights& d = w[l % layers];
    gemv_bf16(attn.as<bf16_bits>(), d.wo.as<bf16_bits>(), H, Q, x.as<float>(), true, true, stream, gemv);
    gemv_rmsnorm_bf16(x.as<float>(), d.mlp_norm.as<float>(), 1e-5f, d.gate_up.as<bf16_bits>(), 2 * I, H,
                      gate_up.as<bf16_bits>(), false, false, stream, gemv, scratch.as<bf16_bits>());
    gemv_swiglu_bf16(gate_up.as<bf16_bits>(), d.down.as<bf16_bits>(), H, I, x.as<float>(), true, true, stream, gemv,
                     act.as<bf16_bits>());
    gemv_rmsnorm_qkv_rope(x.as<float>(), d.attn_norm.as<float>(), 1e-5f, d.wqkv.as<bf16_bits>(), H, qo, stream, gemv);
  };
  DeviceBuffer claims(4);
  LAZYSCOPE_CUDA_CHECK(cudaMemset(claims.as<void>(), 0, claims.bytes()));
  auto run_layer = [&](int l, int stages, bool programmatic, bool dynamic, int prefetch_kib) {
    const DenseWeights& d = w[l % layers];
    DecodeLayerParams p;
    p.attn = attn.as<bf16_bits>();
    p.x = x.as<float>();
    p.wo = d.wo.as<bf16_bits>();
    p.mlp_norm = d.mlp_norm.as<float>();
    p.w_gate_up = d.gate_up.as<bf16_bits>();
    p.w_down = d.down.as<bf16_bits>();
    p.act = act.as<bf16_bits>();
    p.next_attn_norm = d.attn_norm.as<float>();
    p.next_wqkv = d.wqkv.as<bf16_bits>();
    p.next_qkv = qo;
    p.hidden = H;
    p.inter = I;
    p.q_dim = Q;
    p.eps = 1e-5f;
    p.grid_sync = sync.as<unsigned long long>();
    if (dynamic) p.gate_up_claims = claims.as<unsigned>();
    p.next_wo = w[(l + 1) % layers].wo.as<bf16_bits>();
    p.next_gate_up = w[(l + 1) % layers].gate_up.as<bf16_bits>();
    p.l2_prefetch_bytes = prefetch_kib << 10;
    DecodeLayerLaunch launch;
    launch.stages = stages;
    launch.programmatic = programmatic;
    decode_layer(p, launch, stream);
  };
  cudaEvent_t start, stop;
  LAZYSCOPE_CUDA_CHECK(cudaEventCreate(&start));
  LAZYSCOPE_CUDA_CHECK(cudaEventCreate(&stop));
  // GPU events around 64 back-to-back layers, median of 7 rounds after a warm-up round.
  auto time_us = [&](const std::function<void(int)>& layer) {
    std::vector<double> rounds;
    for (int r = 0; r < 8; ++r) {
      LAZYSCOPE_CUDA_CHECK(cudaEventRecord(start, stream));
      for (int l = 0; l < 64; ++l) layer(l);
      LAZYSCOPE_CUDA_CHECK(cudaEventRecord(stop, stream));
      LAZYSCOPE_CUDA_CHECK(cudaEventSynchronize(stop));
      float ms = 0.0f;
      LAZYSCOPE_CUDA_CHECK(cudaEventElapsedTime(&ms, start, stop));
      if (r > 0) rounds.push_back(double(ms) * 1e3 / 64);
    }
    return median_of(rounds);
  };
  std::vector<LayerKernelRow> rows;
  auto add = [&](const std::string& name, const std::function<void(int)>& layer) {
    const double us = time_us(layer);
    rows.push_back(LayerKernelRow{name, us, double(layer_bytes) / (us * 1e-6) / 1e9});
  };
  add("GEMV launches (wo, RMSNorm + gate_up, SwiGLU + down, RMSNorm + wqkv + RoPE), PDL", run_gemvs);
  struct Choice {
    int stages;
    bool dynamic;
    int prefetch_kib;
  };
  for (const Choice c : {Choice{4, false, 0}, Choice{4, true, 0}, Choice{4, false, 192}, Choice{4, true, 192},
                         Choice{2, true, 192}, Choice{6, true, 192}, Choice{4, true, 384}}) {
    if (!decode_layer_unsupported(H, I, Q, K, D, c.stages).empty()) continue;
    add("layer kernel, " + std::to_string(c.stages) + " stages, gate_up " +
            (c.dynamic ? "claimed at run time" : "in fixed shares") + ", next layer's L2 prefetch " +
            std::to_string(c.prefetch_kib) + " KiB a CTA",
        [&](int l) { run_layer(l, c.stages, true, c.dynamic, c.prefetch_kib); });
  }
  LAZYSCOPE_CUDA_CHECK(cudaEventDestroy(start));
  LAZYSCOPE_CUDA_CHECK(cudaEventDestroy(stop));
  LAZYSCOPE_CUDA_CHECK(cudaStreamDestroy(stream));
  for (LayerKernelRow& r : rows) r.weight_mb = double(layer_bytes) / 1e6;
  return rows;
}

}  // namespace lazyscope::bench

#include "kernels/random_weights.h"

#include <cstring>
#include <random>

namespace lazyscope {
namespace {

// Round-to-nearest-even to bf16 and back (finite values only; normal samples are finite).
float round_to_bf16(float x) {
  uint32_t bits;
  std::memcpy(&bits, &x, sizeof bits);
  bits += 0x7FFFu + ((bits >> 16) & 1u);
  bits &= 0xFFFF0000u;
  std::memcpy(&x, &bits, sizeof bits);
  return x;
}

}  // namespace

HostWeights random_host_weights(const ModelShape& s, uint64_t seed, const RandomWeightOptions& options) {
  const std::size_t H = s.hidden_size, V = s.vocab_size, I = s.intermediate_size, Q = s.q_dim(), K = s.kv_dim();
  const std::size_t per_layer = 2 * H + Q * H + 2 * K * H + H * Q + 3 * I * H;
  HostWeights w;
  w.storage.resize(2 * V * H + H + per_layer * s.num_layers);
  std::mt19937 rng{uint32_t(seed)};
  std::normal_distribution<float> normal(0.0f, options.stddev);
  auto finish = [&](float x) { return options.bf16_representable ? round_to_bf16(x) : x; };
  for (float& x : w.storage) x = finish(normal(rng));
  float* cursor = w.storage.data();
  auto take = [&](std::size_t count, bool norm = false) {
    float* p = cursor;
    if (norm) {
      for (std::size_t i = 0; i < count; ++i) p[i] = finish(1.0f + p[i]);
    }
    cursor += count;
    return p;
  };
  w.view.embed = take(V * H);
  w.view.lm_head = take(V * H);
  if (s.tie_word_embeddings) w.view.lm_head = w.view.embed;
  w.view.final_norm = take(H, true);
  for (int l = 0; l < s.num_layers; ++l) {
    LayerWeightsView lw;
    lw.attn_norm = take(H, true);
    lw.wq = take(Q * H);
    lw.wk = take(K * H);
    lw.wv = take(K * H);
    lw.wo = take(H * Q);
    lw.mlp_norm = take(H, true);
    lw.w_gate = take(I * H);
    lw.w_up = take(I * H);
    lw.w_down = take(H * I);
    w.view.layers.push_back(lw);
  }
  return w;
}

}  // namespace lazyscope

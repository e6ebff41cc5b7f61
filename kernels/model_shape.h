#pragma once
// Plain model description shared by every backend; engine types never reach the kernels.
#include <cstdint>
#include <cstddef>
#include <vector>

#include "kernels/weight_format.h"

namespace lazyscope {

struct RopeParams {
  float theta = 10000.0f;
  bool llama3 = false;  // Llama-3 frequency scaling (rope_type: llama3)
  float factor = 8.0f;
  float low_freq_factor = 1.0f;
  float high_freq_factor = 4.0f;
  int original_max_position = 8192;
};

struct ModelShape {
  int vocab_size = 0;
  int hidden_size = 0;
  int intermediate_size = 0;
  int num_layers = 0;
  int num_heads = 0;
  int num_kv_heads = 0;
  int head_dim = 0;
  float rms_norm_eps = 1e-5f;
  RopeParams rope;
  bool tie_word_embeddings = false;

  int q_dim() const { return num_heads * head_dim; }
  int kv_dim() const { return num_kv_heads * head_dim; }
  // K and V of every layer for one block of `block_size` tokens, `element_bytes` per value.
  std::size_t kv_bytes_per_block(int block_size, std::size_t element_bytes) const {
    return std::size_t(num_layers) * 2 * std::size_t(block_size) * std::size_t(kv_dim()) *
           element_bytes;
  }
};

// Host fp32 weights, row-major as HF stores Linear weights: [out_features, in_features].
struct LayerWeightsView {
  const float* attn_norm = nullptr;  // [hidden]
  const float* wq = nullptr;         // [q_dim, hidden]
  const float* wk = nullptr;         // [kv_dim, hidden]
  const float* wv = nullptr;         // [kv_dim, hidden]
  const float* wo = nullptr;         // [hidden, q_dim]
  const float* mlp_norm = nullptr;   // [hidden]
  const float* w_gate = nullptr;     // [intermediate, hidden]
  const float* w_up = nullptr;       // [intermediate, hidden]
  const float* w_down = nullptr;     // [hidden, intermediate]
};

struct WeightsView {
  const float* embed = nullptr;       // [vocab, hidden]
  const float* final_norm = nullptr;  // [hidden]
  const float* lm_head = nullptr;     // [vocab, hidden]; equals embed when tied
  std::vector<LayerWeightsView> layers;
  // The same matrices in their stored format, when the loader kept it (GGUF blocks); empty
  // otherwise. The fast CPU backend prefers these; everything else reads the fp32 pointers.
  PackedMatrix embed_packed;
  PackedMatrix lm_head_packed;
  std::vector<PackedLayerView> packed_layers;
};

}  // namespace lazyscope

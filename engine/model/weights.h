#pragma once
// Host copy of a Llama model's weights: fp32 (converted exactly from BF16/F16/quantized blocks
// on load, what the exact CPU reference and the GPU upload read) and, for GGUF files, the
// matrices in their stored block format too (what the fast CPU backend reads).
#include <cstdint>
#include <string>
#include <vector>

#include "kernels/model_shape.h"

namespace lazyscope {

struct LayerWeights {
  std::vector<float> attn_norm, wq, wk, wv, wo, mlp_norm, w_gate, w_up, w_down;
};

// One matrix in its file's format, [rows, cols] row-major (HF Linear layout).
struct StoredMatrix {
  WeightFormat format = WeightFormat::F32;
  int rows = 0;
  int cols = 0;
  std::size_t row_bytes = 0;
  std::vector<uint8_t> bytes;  // empty: not kept
  PackedMatrix view() const;
};

struct StoredLayer {
  StoredMatrix wq, wk, wv, wo, w_gate, w_up, w_down;
};

struct ModelWeights {
  std::vector<float> embed;       // [vocab, hidden]
  std::vector<float> final_norm;  // [hidden]
  std::vector<float> lm_head;     // [vocab, hidden]; empty when tied to embed
  std::vector<LayerWeights> layers;
  // Stored-format matrices (empty when the loader kept none).
  StoredMatrix embed_stored;
  StoredMatrix lm_head_stored;  // not kept when tied to embed
  std::vector<StoredLayer> stored_layers;

  WeightsView view() const;
};

}  // namespace lazyscope

#pragma once
// fp32 host copy of a Llama model's weights (converted exactly from BF16/F16 on load).
#include <string>
#include <vector>

#include "kernels/model_shape.h"

namespace lazyscope {

struct LayerWeights {
  std::vector<float> attn_norm, wq, wk, wv, wo, mlp_norm, w_gate, w_up, w_down;
};

struct ModelWeights {
  std::vector<float> embed;       // [vocab, hidden]
  std::vector<float> final_norm;  // [hidden]
  std::vector<float> lm_head;     // [vocab, hidden]; empty when tied to embed
  std::vector<LayerWeights> layers;

  WeightsView view() const;
};

}  // namespace lazyscope

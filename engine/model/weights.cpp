#include "engine/model/weights.h"

namespace lazyscope {

WeightsView ModelWeights::view() const {
  WeightsView v;
  v.embed = embed.data();
  v.final_norm = final_norm.data();
  v.lm_head = lm_head.empty() ? embed.data() : lm_head.data();
  v.layers.reserve(layers.size());
  for (const LayerWeights& l : layers) {
    v.layers.push_back({l.attn_norm.data(), l.wq.data(), l.wk.data(), l.wv.data(), l.wo.data(),
                        l.mlp_norm.data(), l.w_gate.data(), l.w_up.data(), l.w_down.data()});
  }
  return v;
}

}  // namespace lazyscope

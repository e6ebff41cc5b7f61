#include "engine/model/weights.h"

namespace lazyscope {

PackedMatrix StoredMatrix::view() const {
  PackedMatrix m;
  if (bytes.empty()) return m;
  m.format = format;
  m.data = bytes.data();
  m.rows = rows;
  m.cols = cols;
  m.row_bytes = row_bytes;
  return m;
}

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
  if (stored_layers.size() == layers.size() && !stored_layers.empty() && !embed_stored.bytes.empty()) {
    v.embed_packed = embed_stored.view();
    v.lm_head_packed = lm_head_stored.bytes.empty() ? v.embed_packed : lm_head_stored.view();
    for (const StoredLayer& l : stored_layers) {
      v.packed_layers.push_back({l.wq.view(), l.wk.view(), l.wv.view(), l.wo.view(), l.w_gate.view(),
                                 l.w_up.view(), l.w_down.view()});
    }
  }
  return v;
}

}  // namespace lazyscope

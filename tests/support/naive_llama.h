#pragma once
// An independent, deliberately plain fp64 Llama forward for checking the engine (docs/design.md).
#include <cmath>
#include <vector>

#include "engine/model/model_loader.h"

namespace lazyscope::testing {

// Per layer, per token: rotated key and value (kv_dim each).
struct NaiveKv {
  std::vector<std::vector<std::vector<double>>> k, v;
  void resize(int layers) {
    k.resize(layers);
    v.resize(layers);
  }
  void append(const NaiveKv& o) {
    for (std::size_t l = 0; l < k.size(); ++l) {
      k[l].insert(k[l].end(), o.k[l].begin(), o.k[l].end());
      v[l].insert(v[l].end(), o.v[l].begin(), o.v[l].end());
    }
  }
};

class NaiveLlama {
 public:
  explicit NaiveLlama(const LoadedModel& model);
  // inv_freq from the published formulas (plain and Llama-3 scaled), in fp64.
  static std::vector<double> inv_freq(const RopeParams& rope, int head_dim);
  // Runs `tokens` at `positions`, attending to `context` (keys already rotated) and causally to
  // themselves. Returns the logits of the last token; `produced` receives the new tokens' K/V.
  std::vector<double> forward(const std::vector<int32_t>& tokens, const std::vector<int>& positions,
                              const NaiveKv& context, NaiveKv* produced) const;
  // Rotates every key of `kv` by `delta` positions (what materialization does).
  void rotate_keys(NaiveKv& kv, int delta) const;

 private:
  void rotate(std::vector<double>& x, int offset, double position) const;
  const LoadedModel& m_;
  std::vector<double> inv_freq_;
};

}  // namespace lazyscope::testing

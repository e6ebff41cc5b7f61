#pragma once
// Deterministic random host weights in the Llama layout, for synthetic models and for tests
// that feed the same numbers to two backends.
#include <cstdint>
#include <vector>

#include "kernels/model_shape.h"

namespace lazyscope {

struct HostWeights {
  std::vector<float> storage;  // owns every tensor; `view` points into it
  WeightsView view;
};

struct RandomWeightOptions {
  float stddev = 0.02f;         // of the matrices; norm weights are 1 + the same noise
  bool bf16_representable = false;  // round every value to bf16 so GPU and CPU use equal numbers
};

HostWeights random_host_weights(const ModelShape& shape, uint64_t seed, const RandomWeightOptions& options = {});

}  // namespace lazyscope

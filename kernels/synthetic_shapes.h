#pragma once
// The one catalogue of named Llama model shapes: synthetic (deterministic random) weights made
// by a backend itself, the make-model presets, cache-demo's KV sizes and the benchmarks all take
// their shapes from here.
#include <string>
#include <vector>

#include "kernels/model_shape.h"

namespace lazyscope {

// "tiny" and "small" (the make-model presets' shapes), "smollm2-135m", "llama-3.2-1b",
// "llama-3.1-8b", "llama-3.1-70b". Throws Error for an unknown name, listing the known ones.
ModelShape synthetic_shape(const std::string& name);
std::vector<std::string> synthetic_shape_names();

}  // namespace lazyscope

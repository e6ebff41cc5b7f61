#pragma once
// Model shapes for synthetic (deterministic random) weights made by a backend itself, so tests
// and benchmarks run without a checkpoint on disk. One table for the engine and the kernels.
#include <string>
#include <vector>

#include "kernels/model_shape.h"

namespace lazyscope {

// "tiny" and "small" (the make-model presets' shapes), "smollm2-135m", "llama-3.2-1b",
// "llama-3.1-8b", "llama-3.1-70b". Throws Error for an unknown name, listing the known ones.
ModelShape synthetic_shape(const std::string& name);
std::vector<std::string> synthetic_shape_names();

}  // namespace lazyscope

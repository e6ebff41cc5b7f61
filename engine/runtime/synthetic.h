#pragma once
// Model shapes for synthetic (deterministic random) weights made by the backend itself, so
// benchmarks and tests run without a checkpoint on disk.
#include <string>
#include <vector>

#include "kernels/model_shape.h"

namespace lazyscope {

// "tiny", "small", "llama-3.2-1b", "llama-3.1-8b". Throws Error for an unknown name.
ModelShape synthetic_shape(const std::string& name);
std::vector<std::string> synthetic_shape_names();

}  // namespace lazyscope

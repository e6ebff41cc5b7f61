#pragma once
// Entry points the CUDA library provides (declared without any CUDA header).
#include <memory>

#include "kernels/backend.h"

namespace lazyscope::cuda {

int device_count();
std::unique_ptr<Backend> make_backend();

}  // namespace lazyscope::cuda

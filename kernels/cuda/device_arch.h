#pragma once
// The kernel path (kernels/cuda_arch.h) of the current CUDA device, asked once per device.
#include "kernels/cuda_arch.h"

namespace lazyscope::cuda {

// The current device's path; throws Error naming the GPU, its compute capability and the minimum
// when the kernels cannot run on it (older than 8.0, or no SASS / PTX in this build fits).
const KernelPath& current_kernel_path();

}  // namespace lazyscope::cuda

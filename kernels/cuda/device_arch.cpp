#include "kernels/cuda/device_arch.h"

#include <cuda_runtime.h>

#include <array>
#include <mutex>

#include "base/error.h"
#include "kernels/cuda/check.h"

namespace lazyscope::cuda {

const KernelPath& current_kernel_path() {
  constexpr int kDevices = 64;
  static std::array<KernelPath, kDevices> paths;
  static std::array<bool, kDevices> known{};
  static std::mutex mutex;
  int index = 0;
  LAZYSCOPE_CUDA_CHECK(cudaGetDevice(&index));
  if (index < 0 || index >= kDevices)
    throw Error("cuda: device index " + std::to_string(index) + " out of range");
  std::lock_guard<std::mutex> lock(mutex);
  if (!known[index]) {
    cudaDeviceProp prop{};
    LAZYSCOPE_CUDA_CHECK(cudaGetDeviceProperties(&prop, index));
    const ComputeCapability capability{prop.major, prop.minor};
    const std::vector<std::string> built = built_cuda_archs();
    const KernelPath path = kernel_path_for(capability, built);
    if (!path.supported) throw Error(unsupported_gpu_message(index, prop.name, capability, built));
    paths[index] = path;
    known[index] = true;
  }
  return paths[index];
}

}  // namespace lazyscope::cuda

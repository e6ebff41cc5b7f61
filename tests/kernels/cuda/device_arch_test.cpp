// The fat binary's run-time choice on the GPU at hand: the driver loads the SASS that
// kernel_path_for names, and Hopper-only launch features follow the device's capability.
#include "kernels/cuda/device_arch.h"

#include <gtest/gtest.h>

#include <cstdio>

#include "gpu_test_util.h"
#include "kernels/cuda/attention.h"

namespace lazyscope::cuda {
namespace {

TEST(DeviceArchTest, TheDriverLoadsTheMachineCodeTheDispatchNames) {
  LAZYSCOPE_REQUIRE_GPU();
  int index = 0;
  LAZYSCOPE_CUDA_CHECK(cudaGetDevice(&index));
  cudaDeviceProp prop{};
  LAZYSCOPE_CUDA_CHECK(cudaGetDeviceProperties(&prop, index));
  const ComputeCapability capability{prop.major, prop.minor};
  const KernelPath& path = current_kernel_path();
  ASSERT_TRUE(path.supported);
  const int loaded = decode_kernel_binary_version();
  // JIT-compiled PTX reports the device's own version.
  EXPECT_EQ(loaded, path.sass_arch != 0 ? path.sass_arch : capability.number());
  EXPECT_EQ(path.programmatic_launch, capability.major >= 9);
  std::printf(
      "%s (compute capability %d.%d): decode kernel machine code sm_%d (%s), programmatic launch "
      "%s\n",
      prop.name, prop.major, prop.minor, loaded,
      path.sass_arch != 0 ? "SASS from the fat binary" : "JIT from PTX",
      path.programmatic_launch ? "on" : "off");
}

}  // namespace
}  // namespace lazyscope::cuda

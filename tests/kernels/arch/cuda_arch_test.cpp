// The run-time choice of the CUDA kernels' build and launch features from a compute capability
// (kernels/cuda_arch.h): pure host logic, no GPU needed.
#include "kernels/cuda_arch.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace lazyscope::cuda {
namespace {

const std::vector<std::string> kFat = {"80-real", "86-real", "89-real", "90"};

TEST(CudaArchTest, EachGpuGetsTheNewestSassOfItsMajorVersion) {
  struct Expect {
    ComputeCapability device;
    int sass;
  };
  for (const Expect& e : {Expect{{8, 0}, 80}, Expect{{8, 6}, 86}, Expect{{8, 7}, 86},
                          Expect{{8, 9}, 89}, Expect{{9, 0}, 90}}) {
    SCOPED_TRACE(std::to_string(e.device.number()));
    const KernelPath path = kernel_path_for(e.device, kFat);
    EXPECT_TRUE(path.supported);
    EXPECT_EQ(path.sass_arch, e.sass);
    EXPECT_EQ(path.ptx_arch, 0);
  }
}

TEST(CudaArchTest, OnlyHopperAndNewerUseProgrammaticLaunchAndBulkPrefetch) {
  for (ComputeCapability device :
       {ComputeCapability{8, 0}, ComputeCapability{8, 6}, ComputeCapability{8, 9}}) {
    const KernelPath path = kernel_path_for(device, kFat);
    EXPECT_FALSE(path.programmatic_launch) << device.number();
    EXPECT_FALSE(path.bulk_prefetch) << device.number();
  }
  const KernelPath hopper = kernel_path_for({9, 0}, kFat);
  EXPECT_TRUE(hopper.programmatic_launch);
  EXPECT_TRUE(hopper.bulk_prefetch);
}

TEST(CudaArchTest, NewerGpusJitTheNewestPtx) {
  for (ComputeCapability device : {ComputeCapability{10, 0}, ComputeCapability{12, 0}}) {
    const KernelPath path = kernel_path_for(device, kFat);
    EXPECT_TRUE(path.supported) << device.number();
    EXPECT_EQ(path.sass_arch, 0);
    EXPECT_EQ(path.ptx_arch, 90);
    EXPECT_TRUE(path.programmatic_launch);  // the PTX is Hopper's: it holds griddepcontrol
  }
  // Without PTX in the build, a newer GPU has nothing to run.
  EXPECT_FALSE(kernel_path_for({10, 0}, {"80-real", "90-real"}).supported);
}

TEST(CudaArchTest, AnAmpereOnlyBuildKeepsHopperOffTheHopperFeatures) {
  // Hopper running Ampere's PTX (no griddepcontrol in it): plain launches.
  const KernelPath path = kernel_path_for({9, 0}, {"80"});
  EXPECT_TRUE(path.supported);
  EXPECT_EQ(path.sass_arch, 0);
  EXPECT_EQ(path.ptx_arch, 80);
  EXPECT_FALSE(path.programmatic_launch);
  // A Hopper-only build has nothing for Ampere: SASS does not cross major versions, PTX runs only
  // upwards.
  EXPECT_FALSE(kernel_path_for({8, 6}, {"90"}).supported);
  EXPECT_TRUE(kernel_path_for({9, 0}, {"90a-real"}).supported);
}

// The wgmma prefill kernel needs sm_90a code, which runs on compute capability 9.0 alone: not on
// Ada, not on a later GPU (which JITs the sm_90 PTX), not from a build without the "90a" object.
TEST(CudaArchTest, OnlyComputeCapability90WithSm90aCodeTakesWgmma) {
  const std::vector<std::string> with_90a = {"80-real", "86-real", "89-real", "90", "90a-real"};
  EXPECT_TRUE(kernel_path_for({9, 0}, with_90a).wgmma);
  EXPECT_EQ(kernel_path_for({9, 0}, with_90a).sass_arch, 90);
  for (ComputeCapability device : {ComputeCapability{8, 0}, ComputeCapability{8, 9}, ComputeCapability{10, 0},
                                   ComputeCapability{12, 0}}) {
    EXPECT_FALSE(kernel_path_for(device, with_90a).wgmma) << device.number();
  }
  EXPECT_FALSE(kernel_path_for({9, 0}, kFat).wgmma);
  EXPECT_FALSE(kernel_path_for({9, 0}, {"90a-virtual"}).wgmma) << "PTX alone is not the sm_90a object";
}

TEST(CudaArchTest, GpusOlderThanAmpereAreRefusedByNameCapabilityAndMinimum) {
  for (ComputeCapability device :
       {ComputeCapability{7, 5}, ComputeCapability{7, 0}, ComputeCapability{6, 1}}) {
    EXPECT_FALSE(kernel_path_for(device, kFat).supported) << device.number();
  }
  const std::string message = unsupported_gpu_message(1, "Tesla V100-SXM2-16GB", {7, 0}, kFat);
  EXPECT_NE(message.find("CUDA device 1"), std::string::npos) << message;
  EXPECT_NE(message.find("Tesla V100-SXM2-16GB"), std::string::npos) << message;
  EXPECT_NE(message.find("compute capability 7.0"), std::string::npos) << message;
  EXPECT_NE(message.find("minimum, compute capability 8.0"), std::string::npos) << message;
  const std::string missing = unsupported_gpu_message(0, "NVIDIA A100", {8, 0}, {"90"});
  EXPECT_NE(missing.find("built for 90"), std::string::npos) << missing;
  EXPECT_NE(missing.find("80-real"), std::string::npos) << missing;
}

TEST(CudaArchTest, TheBuiltListIsTheConfiguredOne) {
  const std::vector<std::string> built = built_cuda_archs();
#ifdef LAZYSCOPE_EXPECT_CUDA_ARCHS
  std::string joined;
  for (const std::string& arch : built) joined += (joined.empty() ? "" : ",") + arch;
  EXPECT_EQ(joined, LAZYSCOPE_EXPECT_CUDA_ARCHS);
#else
  EXPECT_TRUE(built.empty());  // a build without CUDA holds no kernels
#endif
}

}  // namespace
}  // namespace lazyscope::cuda

#pragma once
// Which build of the CUDA kernels a GPU runs and which launch features it may use, from its
// compute capability alone (pure host logic: no CUDA header, testable without a GPU).
#include <string>
#include <string_view>
#include <vector>

namespace lazyscope::cuda {

struct ComputeCapability {
  int major = 0;
  int minor = 0;
  int number() const { return major * 10 + minor; }  // 9.0 -> 90
};

// The oldest GPUs the kernels are written for: bf16 mma.sync, cp.async and ldmatrix need 8.0.
constexpr ComputeCapability kMinimumCapability{8, 0};

struct KernelPath {
  bool supported = false;
  // The machine code the driver loads: the newest SASS built for an arch of the same major version
  // at or below the device's (0 when none fits), else the embedded PTX (JIT-compiled at load).
  int sass_arch = 0;
  int ptx_arch = 0;  // set when the driver JIT-compiles that PTX instead
  // Hopper (9.0) and newer: programmatic dependent launch (griddepcontrol in the kernels, the
  // launch attribute on the host) and cp.async.bulk L2 prefetches in the GEMVs.
  bool programmatic_launch = false;
  bool bulk_prefetch = false;
  // Compute capability 9.0 exactly, with sm_90a code built ("90a-real"): the wgmma prefill kernel.
  bool wgmma = false;
};

// `built` lists the archs compiled in as CMake writes them ("80-real", "90", "90-virtual", "90a-real"):
// a bare or "-real" number brings SASS, a bare or "-virtual" number PTX; an "a" marks arch-specific
// code, which runs on that exact compute capability only.
KernelPath kernel_path_for(ComputeCapability device, const std::vector<std::string>& built);

// The archs this build of the library holds (LAZYSCOPE_CUDA_ARCHS at configure time).
std::vector<std::string> built_cuda_archs();

// "CUDA device 0 (Tesla V100, compute capability 7.0) is older than the kernels' minimum 8.0 ...".
std::string unsupported_gpu_message(int index, std::string_view name, ComputeCapability device,
                                    const std::vector<std::string>& built);

}  // namespace lazyscope::cuda

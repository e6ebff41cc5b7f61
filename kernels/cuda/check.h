#pragma once
// CUDA and cuBLAS status checks that throw lazyscope::Error with the call site.
#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include <string>

#include "base/error.h"

namespace lazyscope::cuda {

inline void check_cuda(cudaError_t status, const char* what, const char* file, int line) {
  if (status != cudaSuccess) {
    throw Error(std::string("CUDA error in ") + what + " (" + file + ":" + std::to_string(line) +
                "): " + cudaGetErrorString(status));
  }
}

inline void check_cublas(cublasStatus_t status, const char* what, const char* file, int line) {
  if (status != CUBLAS_STATUS_SUCCESS) {
    throw Error(std::string("cuBLAS error in ") + what + " (" + file + ":" + std::to_string(line) +
                "): status " + std::to_string(int(status)));
  }
}

}  // namespace lazyscope::cuda

#define LAZYSCOPE_CUDA_CHECK(call) ::lazyscope::cuda::check_cuda((call), #call, __FILE__, __LINE__)
#define LAZYSCOPE_CUBLAS_CHECK(call) ::lazyscope::cuda::check_cublas((call), #call, __FILE__, __LINE__)
// After a kernel launch: reports bad launch configurations without synchronising.
#define LAZYSCOPE_CUDA_LAUNCH_CHECK() LAZYSCOPE_CUDA_CHECK(cudaGetLastError())

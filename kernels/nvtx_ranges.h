#pragma once
// NVTX push/pop ranges in the "LazyScope" domain, always on: an NVTX call costs a function-pointer
// check when no tool (Nsight Systems, any NVTX injection library named by NVTX_INJECTION64_PATH)
// listens. Built on nvtx3 (header-only, shipped with the CUDA toolkit) in kernels/cuda/nvtx_ranges.cpp;
// a build configured without the toolkit's nvtx3 headers compiles the calls as no-ops
// (nvtx_compiled() says which).
namespace lazyscope {

inline constexpr const char* kNvtxDomain = "LazyScope";

void nvtx_push(const char* name);
void nvtx_pop();
bool nvtx_compiled();

}  // namespace lazyscope

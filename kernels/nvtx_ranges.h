#pragma once
// NVTX push/pop ranges in the "LazyScope" domain, always on: an NVTX call costs a function-pointer
// check when no tool (Nsight Systems, any NVTX injection library named by NVTX_INJECTION64_PATH)
// listens. Built on nvtx3 (header-only, shipped with the CUDA toolkit) in kernels/cuda/nvtx_ranges.cpp;
// a build configured without the toolkit's nvtx3 headers compiles the calls as no-ops
// (nvtx_compiled() says which).
#include <cstdint>

namespace lazyscope {

inline constexpr const char* kNvtxDomain = "LazyScope";

// A range named `name`; a non-zero `payload` goes with it as the NVTX int64 payload (the engine's
// request number: Nsight Systems exports it in NVTX_EVENTS.int64Value).
void nvtx_push(const char* name, int64_t payload = 0);
void nvtx_pop();
bool nvtx_compiled();

}  // namespace lazyscope

#pragma once
// Entry points the CUDA library provides (declared without any CUDA header).
#include <memory>

#include "kernels/backend.h"
#include "kernels/device_trace.h"

namespace lazyscope::cuda {

int device_count();
std::unique_ptr<Backend> make_backend();
// The CUDA backend tensor-parallel over GPUs 0..ranks-1 (kernels/cuda/tensor_parallel_backend.h);
// throws Error when ranks is outside 1..device_count() or NCCL was compiled out.
std::unique_ptr<Backend> make_tensor_parallel_backend(int ranks);
// False when this build found no NCCL (tensor parallelism compiled out).
bool tensor_parallel_compiled();
// CUPTI activity tracer (kernels/cuda/cupti_tracer.cpp); null with *why when CUPTI is missing or busy.
std::unique_ptr<DeviceTracer> make_cupti_tracer(const DeviceTraceOptions& options, std::string* why);

}  // namespace lazyscope::cuda

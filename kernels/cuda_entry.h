#pragma once
// Entry points the CUDA library provides (declared without any CUDA header).
#include <memory>

#include "kernels/backend.h"
#include "kernels/device_trace.h"

namespace lazyscope::cuda {

int device_count();
std::unique_ptr<Backend> make_backend();
// CUPTI activity tracer (kernels/cuda/cupti_tracer.cpp); null with *why when CUPTI is missing or busy.
std::unique_ptr<DeviceTracer> make_cupti_tracer(const DeviceTraceOptions& options, std::string* why);

}  // namespace lazyscope::cuda

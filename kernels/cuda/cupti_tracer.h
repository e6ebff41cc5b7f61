#pragma once
// Helpers of the CUPTI tracer (cupti_tracer.cpp) that tests reach without a GPU.
#include <string>

namespace lazyscope::cuda {

// "void lazyscope::cuda::(anonymous namespace)::decode_kernel<128, 4, true>(lazyscope::cuda::DecodeParams)"
// (mangled) → "decode_kernel<128, 4, true>": the readable part of a kernel's name (kernel_names().display).
std::string short_kernel_name(const char* mangled);

}  // namespace lazyscope::cuda

#pragma once
// The three names a kernel goes by, from the symbol CUPTI reports (Nsight Systems' three columns).
#include <string>

namespace lazyscope {

struct KernelNames {
  std::string demangled;  // "void lazyscope::cuda::(anonymous namespace)::decode_kernel<128, 4, true>(lazyscope::cuda::DecodeParams)"
  std::string display;    // "decode_kernel<128, 4, true>": no scope, return type or parameters
  std::string base;       // "decode_kernel": the display name without template arguments
};

// A symbol that does not demangle (a plain C kernel) is its own demangled name.
KernelNames kernel_names(const std::string& mangled);

}  // namespace lazyscope

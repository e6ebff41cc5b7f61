#include "kernels/cpu/isa.h"

#include <algorithm>
#include <atomic>

#if defined(__x86_64__) && defined(__GNUC__)
#include <cpuid.h>
#endif

namespace lazyscope::cpu {
namespace {

std::atomic<int> isa_limit{int(Isa::Avx512)};

#if defined(__x86_64__) && defined(__GNUC__)
// CPUID leaf 1, ECX bit 29 (clang 14's __builtin_cpu_supports does not know "f16c"). The AVX
// checks beside it tell whether the OS saves the YMM state these instructions use.
bool has_f16c() {
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  return __get_cpuid(1, &eax, &ebx, &ecx, &edx) && (ecx & bit_F16C) != 0;
}
#endif

Isa detect() {
#if defined(__x86_64__) && defined(__GNUC__)
  __builtin_cpu_init();
  const bool f16c = has_f16c();
  if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
      __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vl") &&
      __builtin_cpu_supports("avx512vnni") && __builtin_cpu_supports("fma") && f16c) {
    return Isa::Avx512;
  }
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && f16c) {
    return Isa::Avx2;
  }
#endif
  return Isa::Scalar;
}

}  // namespace

Isa detected_isa() {
  static const Isa isa = detect();
  return isa;
}

Isa active_isa() { return Isa(std::min(int(detected_isa()), isa_limit.load())); }

void set_isa_limit(Isa limit) { isa_limit.store(int(limit)); }

std::string isa_name(Isa isa) {
  switch (isa) {
    case Isa::Avx512:
      return "AVX-512 VNNI";
    case Isa::Avx2:
      return "AVX2 FMA";
    case Isa::Scalar:
      break;
  }
  return "scalar";
}

}  // namespace lazyscope::cpu

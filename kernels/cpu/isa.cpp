#include "kernels/cpu/isa.h"

#include <algorithm>
#include <atomic>

namespace lazyscope::cpu {
namespace {

std::atomic<int> isa_limit{int(Isa::Avx512)};

Isa detect() {
#if defined(__x86_64__) && defined(__GNUC__)
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
      __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vl") &&
      __builtin_cpu_supports("avx512vnni") && __builtin_cpu_supports("fma") &&
      __builtin_cpu_supports("f16c")) {
    return Isa::Avx512;
  }
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") &&
      __builtin_cpu_supports("f16c")) {
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

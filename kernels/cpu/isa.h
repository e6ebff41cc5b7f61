#pragma once
// Which vector instruction sets the fast CPU kernels may use, detected at run time.
#include <string>

namespace lazyscope::cpu {

enum class Isa {
  Scalar = 0,  // portable C++
  Avx2 = 1,    // AVX2 + FMA + F16C
  Avx512 = 2,  // AVX-512 F/BW/DQ/VL + VNNI (Zen 4, Ice Lake and later)
};

// The best level this processor supports, lowered by set_isa_limit.
Isa active_isa();
Isa detected_isa();
// Caps the level the kernels dispatch to (tests compare every level against the scalar code).
void set_isa_limit(Isa limit);
std::string isa_name(Isa isa);

}  // namespace lazyscope::cpu

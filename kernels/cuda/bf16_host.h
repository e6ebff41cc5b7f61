#pragma once
// Host-side bfloat16 conversions (round to nearest even), so host code needs no CUDA header.
#include <cmath>
#include <cstdint>
#include <cstring>

namespace lazyscope::cuda {

using bf16_bits = uint16_t;  // raw bfloat16 storage as the kernels see it

inline bf16_bits float_to_bf16(float value) {
  uint32_t bits;
  std::memcpy(&bits, &value, sizeof bits);
  if (std::isnan(value)) return bf16_bits(0x7fc0);
  bits += 0x7fffu + ((bits >> 16) & 1u);  // round to nearest, ties to even
  return bf16_bits(bits >> 16);
}

inline float bf16_to_float(bf16_bits value) {
  uint32_t bits = uint32_t(value) << 16;
  float out;
  std::memcpy(&out, &bits, sizeof out);
  return out;
}

}  // namespace lazyscope::cuda

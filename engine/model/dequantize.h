#pragma once
// ggml tensor types as stored in GGUF files, and their conversion to fp32.
#include <cstddef>
#include <cstdint>
#include <string>

#include "kernels/weight_format.h"

namespace lazyscope {

// Type ids as numbered by ggml (the values stored in a GGUF tensor info).
enum class GgmlType : uint32_t {
  F32 = 0,
  F16 = 1,
  Q4_0 = 2,
  Q4_1 = 3,
  Q5_0 = 6,
  Q5_1 = 7,
  Q8_0 = 8,
  Q8_1 = 9,
  Q2_K = 10,
  Q3_K = 11,
  Q4_K = 12,
  Q5_K = 13,
  Q6_K = 14,
  Q8_K = 15,
  I8 = 24,
  I16 = 25,
  I32 = 26,
  I64 = 27,
  F64 = 28,
  BF16 = 30,
};

struct GgmlTypeInfo {
  const char* name;
  int block_size;      // elements per block (1 for plain types)
  int block_bytes;     // bytes per block
  bool dequantizable;  // dequantize_row supports it
};

// Layout of a ggml type id, or nullptr when the id is not one this build knows.
const GgmlTypeInfo* ggml_type_info(uint32_t type);
std::string ggml_type_name(uint32_t type);  // "Q4_K", or "type 123" when unknown

// Bytes taken by `count` elements of `type` (count must be a multiple of the block size).
std::size_t ggml_row_bytes(GgmlType type, int64_t count);

// Converts `count` elements (a multiple of the type's block size) to fp32. Throws Error for a
// type that is not dequantizable.
void dequantize_row(GgmlType type, const void* src, float* dst, int64_t count);

// IEEE half / bfloat16 to float: half_to_float, bfloat16_to_float (kernels/weight_format.h).

}  // namespace lazyscope

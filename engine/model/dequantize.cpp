// ggml type table; the block conversions live with the kernels (kernels/weight_format.cpp).
#include "engine/model/dequantize.h"

#include <string>

#include "base/error.h"

namespace lazyscope {

const GgmlTypeInfo* ggml_type_info(uint32_t type) {
  static const GgmlTypeInfo f32{"F32", 1, 4, true}, f16{"F16", 1, 2, true},
      q4_0{"Q4_0", 32, 18, true}, q4_1{"Q4_1", 32, 20, true}, q5_0{"Q5_0", 32, 22, true},
      q5_1{"Q5_1", 32, 24, true}, q8_0{"Q8_0", 32, 34, true}, q8_1{"Q8_1", 32, 36, false},
      q2_k{"Q2_K", 256, 84, false}, q3_k{"Q3_K", 256, 110, false}, q4_k{"Q4_K", 256, 144, true},
      q5_k{"Q5_K", 256, 176, true}, q6_k{"Q6_K", 256, 210, true}, q8_k{"Q8_K", 256, 292, false},
      i8{"I8", 1, 1, false}, i16{"I16", 1, 2, false}, i32{"I32", 1, 4, false},
      i64{"I64", 1, 8, false}, f64{"F64", 1, 8, false}, bf16{"BF16", 1, 2, true};
  switch (GgmlType(type)) {
    case GgmlType::F32:
      return &f32;
    case GgmlType::F16:
      return &f16;
    case GgmlType::Q4_0:
      return &q4_0;
    case GgmlType::Q4_1:
      return &q4_1;
    case GgmlType::Q5_0:
      return &q5_0;
    case GgmlType::Q5_1:
      return &q5_1;
    case GgmlType::Q8_0:
      return &q8_0;
    case GgmlType::Q8_1:
      return &q8_1;
    case GgmlType::Q2_K:
      return &q2_k;
    case GgmlType::Q3_K:
      return &q3_k;
    case GgmlType::Q4_K:
      return &q4_k;
    case GgmlType::Q5_K:
      return &q5_k;
    case GgmlType::Q6_K:
      return &q6_k;
    case GgmlType::Q8_K:
      return &q8_k;
    case GgmlType::I8:
      return &i8;
    case GgmlType::I16:
      return &i16;
    case GgmlType::I32:
      return &i32;
    case GgmlType::I64:
      return &i64;
    case GgmlType::F64:
      return &f64;
    case GgmlType::BF16:
      return &bf16;
  }
  return nullptr;
}

std::string ggml_type_name(uint32_t type) {
  const GgmlTypeInfo* info = ggml_type_info(type);
  return info ? std::string(info->name) : "type " + std::to_string(type);
}

std::size_t ggml_row_bytes(GgmlType type, int64_t count) {
  const GgmlTypeInfo* info = ggml_type_info(uint32_t(type));
  if (!info) throw Error("unknown ggml tensor type " + std::to_string(uint32_t(type)));
  return std::size_t(count / info->block_size) * std::size_t(info->block_bytes);
}

void dequantize_row(GgmlType type, const void* src, float* dst, int64_t count) {
  const GgmlTypeInfo* info = ggml_type_info(uint32_t(type));
  if (!info || !info->dequantizable) {
    throw Error("tensor type " + ggml_type_name(uint32_t(type)) +
                " cannot be converted to fp32 (supported: F32, F16, BF16, Q8_0, Q4_0, Q4_1, "
                "Q5_0, Q5_1, Q4_K, Q5_K, Q6_K)");
  }
  if (count % info->block_size != 0) {
    throw Error(std::to_string(count) + " elements are not a whole number of " + info->name +
                " blocks of " + std::to_string(info->block_size));
  }
  dequantize_weight_row(WeightFormat(uint32_t(type)), src, dst, count);
}

}  // namespace lazyscope

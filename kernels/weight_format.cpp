// Block layouts follow ggml's published formats (ggml-common.h); written from the layouts.
#include "kernels/weight_format.h"

#include <bit>
#include <cstring>
#include <string>

#include "base/error.h"

namespace lazyscope {
namespace {

constexpr int kQK = 32;     // block size of the legacy quants
constexpr int kQK_K = 256;  // super-block size of the K-quants

uint16_t read_u16(const uint8_t* p) { return uint16_t(p[0] | (p[1] << 8)); }
uint32_t read_u32(const uint8_t* p) {
  return uint32_t(p[0]) | (uint32_t(p[1]) << 8) | (uint32_t(p[2]) << 16) | (uint32_t(p[3]) << 24);
}
float read_half(const uint8_t* p) { return half_to_float(read_u16(p)); }

// Q8_0: d (f16), 32 x int8.
void dequantize_q8_0(const uint8_t* block, float* y) {
  const float d = read_half(block);
  const auto* qs = reinterpret_cast<const int8_t*>(block + 2);
  for (int j = 0; j < kQK; ++j) y[j] = d * float(qs[j]);
}

// Q4_0: d (f16), 16 bytes of nibbles; low nibbles are elements 0..15, high ones 16..31.
void dequantize_q4_0(const uint8_t* block, float* y) {
  const float d = read_half(block);
  const uint8_t* qs = block + 2;
  for (int j = 0; j < kQK / 2; ++j) {
    y[j] = d * float(int(qs[j] & 0x0F) - 8);
    y[j + kQK / 2] = d * float(int(qs[j] >> 4) - 8);
  }
}

// Q4_1: d, m (f16), 16 bytes of nibbles; x = d * q + m.
void dequantize_q4_1(const uint8_t* block, float* y) {
  const float d = read_half(block);
  const float m = read_half(block + 2);
  const uint8_t* qs = block + 4;
  for (int j = 0; j < kQK / 2; ++j) {
    y[j] = d * float(qs[j] & 0x0F) + m;
    y[j + kQK / 2] = d * float(qs[j] >> 4) + m;
  }
}

// Q5_0: d (f16), 32 high bits (u32), 16 bytes of low nibbles; x = d * (q - 16).
void dequantize_q5_0(const uint8_t* block, float* y) {
  const float d = read_half(block);
  const uint32_t qh = read_u32(block + 2);
  const uint8_t* qs = block + 6;
  for (int j = 0; j < kQK / 2; ++j) {
    const int high0 = int((qh >> j) & 1u) << 4;
    const int high1 = int((qh >> (j + 16)) & 1u) << 4;
    y[j] = d * float(((qs[j] & 0x0F) | high0) - 16);
    y[j + kQK / 2] = d * float(((qs[j] >> 4) | high1) - 16);
  }
}

// Q5_1: d, m (f16), 32 high bits, 16 bytes of low nibbles; x = d * q + m.
void dequantize_q5_1(const uint8_t* block, float* y) {
  const float d = read_half(block);
  const float m = read_half(block + 2);
  const uint32_t qh = read_u32(block + 4);
  const uint8_t* qs = block + 8;
  for (int j = 0; j < kQK / 2; ++j) {
    const int high0 = int((qh >> j) & 1u) << 4;
    const int high1 = int((qh >> (j + 16)) & 1u) << 4;
    y[j] = d * float((qs[j] & 0x0F) | high0) + m;
    y[j + kQK / 2] = d * float((qs[j] >> 4) | high1) + m;
  }
}

// The 8 (scale, min) pairs of a Q4_K/Q5_K super-block, 6 bits each, packed into 12 bytes.
void unpack_k_scales(const uint8_t* packed, uint8_t scale[8], uint8_t min[8]) {
  for (int j = 0; j < 8; ++j) {
    if (j < 4) {
      scale[j] = packed[j] & 63;
      min[j] = packed[j + 4] & 63;
    } else {
      scale[j] = uint8_t((packed[j + 4] & 0x0F) | ((packed[j - 4] >> 6) << 4));
      min[j] = uint8_t((packed[j + 4] >> 4) | ((packed[j] >> 6) << 4));
    }
  }
}

// Q4_K: d, dmin (f16), 12 bytes of scales/mins, 128 bytes of nibbles; 8 sub-blocks of 32.
void dequantize_q4_k(const uint8_t* block, float* y) {
  const float d = read_half(block);
  const float dmin = read_half(block + 2);
  uint8_t scale[8], min[8];
  unpack_k_scales(block + 4, scale, min);
  const uint8_t* qs = block + 16;
  for (int pair = 0; pair < 4; ++pair) {  // each 32 bytes hold two sub-blocks (low, high nibbles)
    const float d_low = d * float(scale[2 * pair]), m_low = dmin * float(min[2 * pair]);
    const float d_high = d * float(scale[2 * pair + 1]), m_high = dmin * float(min[2 * pair + 1]);
    for (int l = 0; l < 32; ++l) {
      y[l] = d_low * float(qs[l] & 0x0F) - m_low;
      y[l + 32] = d_high * float(qs[l] >> 4) - m_high;
    }
    qs += 32;
    y += 64;
  }
}

// Q5_K: d, dmin, 12 bytes of scales/mins, 32 bytes of high bits, 128 bytes of low nibbles.
void dequantize_q5_k(const uint8_t* block, float* y) {
  const float d = read_half(block);
  const float dmin = read_half(block + 2);
  uint8_t scale[8], min[8];
  unpack_k_scales(block + 4, scale, min);
  const uint8_t* qh = block + 16;
  const uint8_t* qs = block + 48;
  for (int pair = 0; pair < 4; ++pair) {
    const float d_low = d * float(scale[2 * pair]), m_low = dmin * float(min[2 * pair]);
    const float d_high = d * float(scale[2 * pair + 1]), m_high = dmin * float(min[2 * pair + 1]);
    const uint8_t bit_low = uint8_t(1u << (2 * pair)), bit_high = uint8_t(1u << (2 * pair + 1));
    for (int l = 0; l < 32; ++l) {
      y[l] = d_low * float((qs[l] & 0x0F) + ((qh[l] & bit_low) ? 16 : 0)) - m_low;
      y[l + 32] = d_high * float((qs[l] >> 4) + ((qh[l] & bit_high) ? 16 : 0)) - m_high;
    }
    qs += 32;
    y += 64;
  }
}

// Q6_K: 128 bytes of low nibbles, 64 bytes of 2-bit highs, 16 int8 scales, d (f16).
void dequantize_q6_k(const uint8_t* block, float* y) {
  const uint8_t* ql = block;
  const uint8_t* qh = block + 128;
  const auto* scales = reinterpret_cast<const int8_t*>(block + 192);
  const float d = read_half(block + 208);
  for (int half = 0; half < 2; ++half) {  // two halves of 128 elements
    for (int l = 0; l < 32; ++l) {
      const int sub = l / 16;
      const int q1 = int((ql[l] & 0x0F) | (((qh[l] >> 0) & 3) << 4)) - 32;
      const int q2 = int((ql[l + 32] & 0x0F) | (((qh[l] >> 2) & 3) << 4)) - 32;
      const int q3 = int((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32;
      const int q4 = int((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32;
      y[l] = (d * float(scales[sub])) * float(q1);
      y[l + 32] = (d * float(scales[sub + 2])) * float(q2);
      y[l + 64] = (d * float(scales[sub + 4])) * float(q3);
      y[l + 96] = (d * float(scales[sub + 6])) * float(q4);
    }
    y += 128;
    ql += 64;
    qh += 32;
    scales += 8;
  }
}

using BlockFn = void (*)(const uint8_t*, float*);

void dequantize_blocks(BlockFn fn, const uint8_t* src, float* dst, int64_t count, int block_size,
                       int block_bytes) {
  const int64_t blocks = count / block_size;
  for (int64_t b = 0; b < blocks; ++b) fn(src + b * block_bytes, dst + b * block_size);
}

}  // namespace

float half_to_float(uint16_t h) {
  const uint32_t sign = uint32_t(h & 0x8000u) << 16;
  const uint32_t exponent = (h >> 10) & 0x1Fu;
  uint32_t mantissa = h & 0x3FFu;
  uint32_t bits;
  if (exponent == 0x1F) {  // inf / nan
    bits = sign | 0x7F800000u | (mantissa << 13);
  } else if (exponent != 0) {
    bits = sign | ((exponent + 112) << 23) | (mantissa << 13);
  } else if (mantissa == 0) {
    bits = sign;
  } else {  // subnormal half: normalise into a float
    int shift = 0;
    while ((mantissa & 0x400u) == 0) {
      mantissa <<= 1;
      ++shift;
    }
    mantissa &= 0x3FFu;
    bits = sign | (uint32_t(113 - shift) << 23) | (mantissa << 13);
  }
  return std::bit_cast<float>(bits);
}

float bfloat16_to_float(uint16_t b) { return std::bit_cast<float>(uint32_t(b) << 16); }

const WeightFormatInfo* weight_format_info(WeightFormat format) {
  static const WeightFormatInfo f32{"F32", 1, 4}, f16{"F16", 1, 2}, bf16{"BF16", 1, 2},
      q4_0{"Q4_0", 32, 18}, q4_1{"Q4_1", 32, 20}, q5_0{"Q5_0", 32, 22}, q5_1{"Q5_1", 32, 24},
      q8_0{"Q8_0", 32, 34}, q4_k{"Q4_K", 256, 144}, q5_k{"Q5_K", 256, 176}, q6_k{"Q6_K", 256, 210};
  switch (format) {
    case WeightFormat::F32: return &f32;
    case WeightFormat::F16: return &f16;
    case WeightFormat::BF16: return &bf16;
    case WeightFormat::Q4_0: return &q4_0;
    case WeightFormat::Q4_1: return &q4_1;
    case WeightFormat::Q5_0: return &q5_0;
    case WeightFormat::Q5_1: return &q5_1;
    case WeightFormat::Q8_0: return &q8_0;
    case WeightFormat::Q4_K: return &q4_k;
    case WeightFormat::Q5_K: return &q5_k;
    case WeightFormat::Q6_K: return &q6_k;
  }
  return nullptr;
}

void dequantize_weight_row(WeightFormat format, const void* src_ptr, float* dst, int64_t count) {
  const WeightFormatInfo* info = weight_format_info(format);
  if (!info) throw Error("weight format " + std::to_string(uint32_t(format)) + " cannot be converted to fp32");
  if (count % info->block_size != 0) {
    throw Error(std::to_string(count) + " elements are not a whole number of " + info->name +
                " blocks of " + std::to_string(info->block_size));
  }
  const auto* src = static_cast<const uint8_t*>(src_ptr);
  switch (format) {
    case WeightFormat::F32:
      std::memcpy(dst, src, std::size_t(count) * sizeof(float));
      return;
    case WeightFormat::F16:
      for (int64_t i = 0; i < count; ++i) dst[i] = read_half(src + 2 * i);
      return;
    case WeightFormat::BF16:
      for (int64_t i = 0; i < count; ++i) dst[i] = bfloat16_to_float(read_u16(src + 2 * i));
      return;
    case WeightFormat::Q8_0:
      return dequantize_blocks(dequantize_q8_0, src, dst, count, kQK, 34);
    case WeightFormat::Q4_0:
      return dequantize_blocks(dequantize_q4_0, src, dst, count, kQK, 18);
    case WeightFormat::Q4_1:
      return dequantize_blocks(dequantize_q4_1, src, dst, count, kQK, 20);
    case WeightFormat::Q5_0:
      return dequantize_blocks(dequantize_q5_0, src, dst, count, kQK, 22);
    case WeightFormat::Q5_1:
      return dequantize_blocks(dequantize_q5_1, src, dst, count, kQK, 24);
    case WeightFormat::Q4_K:
      return dequantize_blocks(dequantize_q4_k, src, dst, count, kQK_K, 144);
    case WeightFormat::Q5_K:
      return dequantize_blocks(dequantize_q5_k, src, dst, count, kQK_K, 176);
    case WeightFormat::Q6_K:
      return dequantize_blocks(dequantize_q6_k, src, dst, count, kQK_K, 210);
  }
}

}  // namespace lazyscope

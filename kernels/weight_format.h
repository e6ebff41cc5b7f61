#pragma once
// Weight matrices kept in the format their file stores (GGUF quantized blocks, f16/bf16), so the
// fast CPU kernels read them as they are instead of an fp32 copy four to eight times larger.
#include <cstddef>
#include <cstdint>

namespace lazyscope {

// Numbered as ggml numbers its tensor types (the values a GGUF tensor info stores).
enum class WeightFormat : uint32_t {
  F32 = 0,
  F16 = 1,
  Q4_0 = 2,
  Q4_1 = 3,
  Q5_0 = 6,
  Q5_1 = 7,
  Q8_0 = 8,
  Q4_K = 12,
  Q5_K = 13,
  Q6_K = 14,
  BF16 = 30,
};

struct WeightFormatInfo {
  const char* name;
  int block_size;   // elements per block (1 for plain types)
  int block_bytes;  // bytes per block
};

// Layout of a format, or nullptr when `format` is not one of the enumerators above.
const WeightFormatInfo* weight_format_info(WeightFormat format);

// Converts `count` elements (a whole number of blocks) of `format` to fp32. Throws Error on an
// unknown format or a partial block.
void dequantize_weight_row(WeightFormat format, const void* src, float* dst, int64_t count);

// IEEE half / bfloat16 to float, exactly.
float half_to_float(uint16_t h);
float bfloat16_to_float(uint16_t b);

// One [rows, cols] row-major matrix in its stored format; every row is a whole number of blocks.
struct PackedMatrix {
  WeightFormat format = WeightFormat::F32;
  const uint8_t* data = nullptr;  // nullptr: not given
  int rows = 0;
  int cols = 0;
  std::size_t row_bytes = 0;
  const uint8_t* row(int r) const { return data + std::size_t(r) * row_bytes; }
  bool present() const { return data != nullptr; }
};

struct PackedLayerView {
  PackedMatrix wq, wk, wv, wo, w_gate, w_up, w_down;
};

}  // namespace lazyscope

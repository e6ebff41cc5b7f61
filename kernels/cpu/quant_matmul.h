#pragma once
// Fused dequantize-and-dot matrix products for weights kept in their file's format.
//
// out[t, r] = sum_k x[t, k] * W[r, k] for W a PackedMatrix. For the 32-element block formats
// (Q4_0, Q4_1, Q5_0, Q5_1, Q8_0) the activations are quantized per block of 32 to int8 with
// one fp32 scale (Q8), and each block's product is an exact integer dot scaled by both block
// scales (AVX-512 VNNI vpdpbusd, AVX2 vpmaddubsw, or scalar). The other formats (K-quants,
// F16, BF16, F32) dequantize one weight row at a time into a small buffer and take fp32 dots
// with the unquantized activations.
#include <cstdint>
#include <vector>

#include "kernels/cpu/isa.h"
#include "kernels/weight_format.h"

namespace lazyscope::cpu {

// A matmul input: n rows of k fp32 values and, once prepared, their Q8 blocks.
struct MatmulInput {
  const float* x = nullptr;  // [n, k]
  int n = 0;
  int k = 0;
  // Q8 side (when k % 32 == 0): per row k int8 values, per block its scale d and d * sum / 8.
  std::vector<int8_t> q;          // [n, k]
  std::vector<float> scale;       // [n, k / 32]
  std::vector<float> sum_eighth;  // [n, k / 32]
  bool quantized = false;
};

// True when W's format takes the int8 (Q8 activation) path.
bool uses_q8_activations(WeightFormat format);
// Sizes the buffers for n x k (no allocation when they are already large enough).
void reset_input(MatmulInput& in, const float* x, int n, int k);
// Quantizes rows [row_begin, row_end) of the input (threads split the rows).
void quantize_input_rows(MatmulInput& in, int row_begin, int row_end);

// Computes out[t * out_stride + r] for rows r in [row_begin, row_end) of W and every input row
// t. Throws Error when W's columns differ from the input's k or the format is unsupported.
void matmul_rows(const PackedMatrix& w, const MatmulInput& in, int row_begin, int row_end,
                 float* out, int64_t out_stride, Isa isa);

// Rows of W computed together by the fastest kernel (split work between threads in multiples).
constexpr int kMatmulRowTile = 4;
// The multiple of rows a thread's share of one product must start and end on, so that each row
// is computed by the same kernel whatever the thread count (prompts take sixteen-row tiles and
// leave the remainder to the four-row kernel, whose sums are ordered differently).
int matmul_row_unit(const MatmulInput& in);

// Quantizes fp32 rows into a block format (Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, F16, BF16 or F32), the
// way llama.cpp's reference quantizers round: for synthetic weights and tests.
std::vector<uint8_t> quantize_weight_rows(WeightFormat format, const float* w, int rows, int cols);

}  // namespace lazyscope::cpu

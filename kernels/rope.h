#pragma once
// RoPE frequency table and rotation, HF "half-split" pairing (i with i + D/2), fp32 angles.
#include <cstdint>
#include <vector>

#include "kernels/model_shape.h"

namespace lazyscope {

// inv_freq[i] = theta^(-2i/D), with Llama-3 scaling when params.llama3; computed in fp32 in the
// same order of operations as the HF reference (transformers' _compute_llama3_parameters).
std::vector<float> rope_inv_freq(const RopeParams& params, int head_dim);

// Rotates one head vector x[head_dim] in place by `position` (may be negative).
// angle_i = float(position) * inv_freq[i], evaluated in fp32 like the reference.
void rope_rotate(float* x, int head_dim, const float* inv_freq, int64_t position);

}  // namespace lazyscope

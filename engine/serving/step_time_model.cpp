#include "engine/serving/step_time_model.h"

#include <algorithm>

#include "engine/serving/calibration.h"

namespace lazyscope {

StepTimeConstants StepTimeConstants::h200() {
  using C = calibration::H200;
  return {C::weight_bytes_per_s, C::layer_overhead_s,  C::gemm_flops_per_s, C::attention_flops_per_s,
          C::kv_read_bytes_per_s, C::copy_bytes_per_s, C::batched_layer_overhead_s, C::prefill_forward_overhead_s, C::step_overhead_s};
}

StepTimeModel::StepTimeModel(const ModelShape& shape, std::size_t kv_element_bytes, const StepTimeConstants& c)
    : shape_(shape), c_(c) {
  const double h = shape.hidden_size, q = shape.q_dim(), kv = shape.kv_dim(), inter = shape.intermediate_size;
  layer_params_ = h * q + 2 * h * kv + q * h + 3 * h * inter;
  lm_params_ = double(shape.vocab_size) * h;
  kv_bytes_per_token_layer_ = 2.0 * kv * double(kv_element_bytes);
}

double StepTimeModel::linear_s(int rows) const {
  // bf16 weights: streamed once per forward, or the GEMM's FLOPs when that takes longer.
  const double per_layer = std::max(layer_params_ * 2.0 / c_.weight_bytes_per_s,
                                    2.0 * layer_params_ * rows / c_.gemm_flops_per_s);
  return shape_.num_layers * (per_layer + c_.layer_overhead_s);
}

double StepTimeModel::lm_head_s(int rows) const {
  if (rows <= 0) return 0.0;
  return std::max(lm_params_ * 2.0 / c_.weight_bytes_per_s, 2.0 * lm_params_ * rows / c_.gemm_flops_per_s);
}

double StepTimeModel::forward_s(int tokens, int64_t context, int logits_rows) const {
  const double n = tokens;
  const double pairs = n * double(context) + n * (n + 1) / 2;  // visible (query, key) pairs
  const double attn_flops = 4.0 * pairs * shape_.head_dim * shape_.num_heads;
  const double attn_bytes = double(context + tokens) * kv_bytes_per_token_layer_;
  const double attention = std::max(attn_flops / c_.attention_flops_per_s, attn_bytes / c_.kv_read_bytes_per_s);
  return c_.prefill_forward_overhead_s + linear_s(tokens) + shape_.num_layers * attention + lm_head_s(logits_rows);
}

double StepTimeModel::decode_s(int batch, int64_t context_total) const {
  if (batch <= 0) return 0.0;
  const double attn_bytes = double(context_total + batch) * kv_bytes_per_token_layer_;
  const double batched = batch > 1 ? shape_.num_layers * c_.batched_layer_overhead_s : 0.0;
  return linear_s(batch) + batched + shape_.num_layers * attn_bytes / c_.kv_read_bytes_per_s + lm_head_s(batch);
}

double StepTimeModel::copy_s(int64_t bytes_written) const { return double(bytes_written) / c_.copy_bytes_per_s; }

}  // namespace lazyscope

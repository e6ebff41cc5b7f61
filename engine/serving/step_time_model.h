#pragma once
// Accounting mode's clock: how long a forward, a batched decode step or a block copy takes on the
// calibrated GPU, from the model shape alone (roofline of weight reads, GEMM and attention work).
#include <cstddef>
#include <cstdint>

#include "kernels/model_shape.h"

namespace lazyscope {

struct StepTimeConstants {
  double weight_bytes_per_s, layer_overhead_s, gemm_flops_per_s, attention_flops_per_s, kv_read_bytes_per_s,
      copy_bytes_per_s, batched_layer_overhead_s, prefill_forward_overhead_s, step_overhead_s;
  static StepTimeConstants h200();  // calibration.h
};

class StepTimeModel {
 public:
  StepTimeModel(const ModelShape& shape, std::size_t kv_element_bytes, const StepTimeConstants& constants);
  // One sequence's forward of `tokens` new tokens after `context` cached ones; `logits_rows` rows
  // through the LM head (0 for a document encode).
  double forward_s(int tokens, int64_t context, int logits_rows) const;
  // One batched decode step: `batch` sequences of one token, `context_total` cached tokens in all.
  double decode_s(int batch, int64_t context_total) const;
  double copy_s(int64_t bytes_written) const;
  double step_overhead_s() const { return c_.step_overhead_s; }

 private:
  double linear_s(int rows) const;  // all layers' projections and MLP for `rows` tokens, and overheads
  double lm_head_s(int rows) const;
  ModelShape shape_;
  StepTimeConstants c_;
  double layer_params_ = 0, lm_params_ = 0, kv_bytes_per_token_layer_ = 0;
};

}  // namespace lazyscope

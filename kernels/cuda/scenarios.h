#pragma once
// End-to-end measurement scenarios on the CUDA backend with synthetic weights, callable from the
// benchmark programs (C++17-clean: they are compiled by nvcc).
#include <string>

#include "kernels/model_shape.h"

namespace lazyscope::cuda {

// Llama shapes by name: "llama-3.1-8b", "llama-3.2-1b", "smollm2-135m", "tiny". Throws Error otherwise.
ModelShape synthetic_model_shape(const std::string& name);
// bf16 bytes one decode step must read: every layer's weights and the LM head.
double decode_weight_bytes(const ModelShape& shape);

struct DecodeThroughput {
  double decode_tokens_per_second = 0;   // batch 1, logits read back every step
  double prefill_tokens_per_second = 0;  // one prompt of prefill_tokens
  double decode_ms_per_token = 0;
  double decode_ms_per_token_no_readback = 0;  // want_logits off, synchronised each step
};

// Achieved GB/s of a one-token bf16 GEMM (GEMV) out = x @ w^T, w [rows, cols], through cuBLAS or
// our gemv_bf16 (custom); median of repeated calls over weights larger than L2.
double measure_gemv_gbs(int rows, int cols, bool custom);
DecodeThroughput measure_decode(const std::string& model, int prefill_tokens, int decode_steps);

// Time to first token (logits of the last prompt token) of docs × doc_tokens cached documents plus
// a query, in milliseconds (median of `repeats`).
struct RagTtft {
  double none_ms = 0;          // prefill every token
  double lazy_ms = 0;          // cached documents at encoding positions, query rotated per shift
  double materialized_ms = 0;  // copy + rotate the shifted documents' blocks, then plain attention
  double copy_ms = 0;          // the copy alone
  double rotated_ms = 0;       // plain attention over an already rotated cache (the ideal)
};
RagTtft measure_rag_ttft(const std::string& model, int docs, int doc_tokens, int query_tokens, int repeats);

}  // namespace lazyscope::cuda

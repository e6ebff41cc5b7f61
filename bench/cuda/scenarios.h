#pragma once
// End-to-end measurement scenarios on the CUDA backend with synthetic weights (shapes by name from
// kernels/synthetic_shapes.h), called by the benchmark programs; lab code, not product code.
#include <cstdint>
#include <string>
#include <vector>

#include "kernels/backend.h"
#include "kernels/model_shape.h"

namespace lazyscope::bench {

// Shared by the scenario files: runs n random tokens at positions start.. into the slots of blocks
// first_block.. (16-token blocks) after the `prefix` table, plain or lazy; the new blocks go to
// *blocks_out when given.
void run_segment(Backend& backend, int n, int start, int first_block, const std::vector<BlockRef>& prefix, bool lazy,
                 bool want_logits, std::vector<BlockRef>* blocks_out, uint32_t seed, int vocab);

// bf16 bytes one decode step must read: every layer's weights and the LM head.
double decode_weight_bytes(const ModelShape& shape);
// bf16 bytes of K and V one token of context holds over all layers (what decode attention reads).
double kv_bytes_per_token(const ModelShape& shape);

struct DecodeVariant {
  std::string name;
  double ms = 0;         // wall ms/token (0: the variant failed, see stderr)
  double device_ms = 0;  // median GPU-event time of a step
  // Against the default run by the engine's one equivalence rule (engine/runtime/equivalence.h):
  // every step's logits (0 = the first step after the prompt, warm-up steps included) while the
  // greedy tokens agree; at the first flip, a near-tie (within the backend's rounding) or not.
  std::string verdict;         // "identical", "near-tie" or "different" (empty: not compared)
  int first_difference = -1;   // the first step whose greedy token differs (-1: none)
  double max_logit_delta = 0;  // the largest |Δlogit| over the compared steps
  std::string explanation;     // the rule's sentence
};

// Batch-1 greedy decode after a prompt; every mode starts from the same prompt and first token.
struct DecodeThroughput {
  double prefill_tokens_per_second = 0;  // one prompt of prefill_tokens
  double prefill_mma_sync_tokens_per_second = 0;  // the same with the mma.sync attention kernel
  double prefill_persistent_tokens_per_second = 0;  // the same with persistent attention CTAs
  double prefill_one_tile_tokens_per_second = 0;    // and with a CTA a row tile, alternated with it
  double prefill_persistent_speedup = 0;            // median of the one-tile time over the persistent, run by run
  double greedy_graph_ms = 0;    // ms/token: forward_greedy (device argmax, 4-byte readback), CUDA graphs
  double greedy_stream_ms = 0;   // the same without graphs (every kernel launched from the host)
  std::vector<DecodeVariant> variants;  // the greedy graph step with one default switched off
  double logits_ms = 0;          // forward with the logits read back and argmax on the host (graphs on)
  double device_ms = 0;          // GPU-event ms/token of the greedy graph steps (events around each step)
  int graph_captures = 0;        // graphs instantiated by the greedy graph run
  bool tokens_match = false;     // graph, stream and logits runs chose the same tokens
  double tokens_per_second() const { return greedy_graph_ms > 0 ? 1000.0 / greedy_graph_ms : 0.0; }
};

// Achieved GB/s of a one-token bf16 GEMM (GEMV) out = x @ w^T, w [rows, cols], through cuBLAS or
// our gemv_bf16 (custom; `splits` 0 = its default split-K, else that many column splits); median
// of repeated calls over weights larger than L2.
// `programmatic`: launch our GEMVs with programmatic dependent launch (back-to-back calls overlap).
double measure_gemv_gbs(int rows, int cols, bool custom, int splits = 0, int rows_per_warp = 2,
                        bool programmatic = false, int prefetch_steps = 0);
// `variants`: also time each DecodeVariant (one default switched off at a time), or only those whose
// name contains `variant_filter` when it is not empty.
DecodeThroughput measure_decode(const std::string& model, int prefill_tokens, int decode_steps, bool variants = true,
                                const std::string& variant_filter = "");

// Batched greedy decode (Backend::forward_batch_greedy: one step for every sequence of the batch),
// each sequence its own prompt of about `context` tokens (lengths context * 7/8 .. 9/8) in its
// own blocks. Host clock, each step ends with the batch's tokens on the host; batch 1 takes the
// single-sequence graph path.
struct BatchedDecodeRow {
  int batch = 0;
  double ms_per_step = 0;
  // The same steps with lazy attention, each prompt's second half of blocks at a shift (three
  // shift runs a sequence: 0, the shift, 0 for the decoded tokens).
  double lazy_ms_per_step = 0;
  // The lazy steps again with the attention kernel rotating the query itself
  // (CudaTuning::decode_query_copies off; the default writes a query copy per shift beside K/V).
  double lazy_rotating_ms_per_step = 0;
  double kv_bytes = 0;  // K/V bytes the batch's attention reads in a step (mean over the steps)
  double tokens_per_second() const { return ms_per_step > 0 ? 1000.0 * batch / ms_per_step : 0.0; }
};
std::vector<BatchedDecodeRow> measure_batched_decode(const std::string& model, int context,
                                                     const std::vector<int>& batch_sizes, int decode_steps);

// Time to first token (logits of the last prompt token) of docs × doc_tokens cached documents plus
// a query, in milliseconds: medians of `repeats` runs of none (in a phase of its own, so its heat
// does not tax the next policy) and of 3 × repeats rounds of the cached policies in a rotating
// order. *_ms: host wall time from a synchronised start to the logits on the host (TTFT);
// *_gpu_ms: GPU-event time of the same span. Materialized enqueues its copy and its prompt step
// back to back, as the engine does (no host wait between them).
struct RagTtft {
  double none_ms = 0;          // prefill every token
  double lazy_ms = 0;          // cached documents at encoding positions, query rotated per shift
  double materialized_ms = 0;  // copy + rotate the shifted documents' blocks, then plain attention
  double rotated_ms = 0;       // plain attention over an already rotated cache (the ideal)
  double none_gpu_ms = 0, lazy_gpu_ms = 0, materialized_gpu_ms = 0, rotated_gpu_ms = 0;
  double copy_gpu_ms = 0;      // GPU-event time of materialized's copy alone
  double lazy_host_ms = 0;     // host time of forward() without logits: plan, upload, launches
  double rotated_host_ms = 0;
  double lazy_after_none_ms = 0;     // wall, measured right after a none run (hot GPU)
  double rotated_after_none_ms = 0;
};
RagTtft measure_rag_ttft(const std::string& model, int docs, int doc_tokens, int query_tokens, int repeats);

// One prompt step of `tokens` tokens, untraced (wall, median of three) and then once under the
// CUPTI tracer: every kernel the step ran, grouped by kernel and grid (a layer's GEMMs differ by
// grid), against the GPU span from the first kernel's start to the last one's end. Tells kernel
// time from the time between kernels.
struct PromptKernelGroup {
  std::string name;  // display name, shortened
  std::string grid;  // "x×y×z"
  int launches = 0;
  double total_us = 0;
};
struct PromptKernelSpan {
  std::string name;
  double start_us = 0, end_us = 0;  // from the step's first kernel start
};
struct PromptProfile {
  // Wall: synchronised start to the logits on the host; GPU: events around the same work.
  double untraced_wall_ms = 0, untraced_gpu_ms = 0;  // median of three, before the tracer
  double traced_wall_ms = 0, traced_gpu_ms = 0;
  double after_wall_ms = 0, after_gpu_ms = 0;        // median of three, after the tracer went
  double gpu_span_ms = 0;       // first kernel start .. last kernel end
  double kernel_ms = 0;         // sum of kernel durations
  double idle_ms = 0;           // time in the span with no kernel running
  int kernels = 0;
  uint64_t dropped = 0;
  std::vector<PromptKernelGroup> groups;  // largest total first
  std::vector<PromptKernelSpan> first;    // the traced step's first kernels in start order
};
PromptProfile measure_prompt_profile(const std::string& model, int tokens);
// The same for one batch-1 decode token after a prompt of `context` tokens (CUDA graphs on), with
// the persistent layer kernel or the GEMV launches.
PromptProfile measure_decode_profile(const std::string& model, int context, bool layer_kernel);

// The dense part of a batch-1 decode layer (everything but attention, plus the next layer's wqkv)
// alone, back to back over distinct weights: the GEMV launches and the persistent layer kernel.
struct LayerKernelRow {
  std::string name;
  double us = 0;         // GPU time a layer (median)
  double gbs = 0;        // weight bytes a layer / us
  double weight_mb = 0;  // weight bytes a layer
};
std::vector<LayerKernelRow> measure_layer_kernel(const std::string& model);

}  // namespace lazyscope::bench

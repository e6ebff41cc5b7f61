#include "kernels/cuda/scenarios.h"
#include "kernels/synthetic_shapes.h"

#include <algorithm>
#include <chrono>
#include <random>
#include <vector>

#include "kernels/cuda/check.h"
#include "kernels/cuda/cuda_backend.h"
#include "kernels/cuda/ops.h"
#include "kernels/error.h"

namespace lazyscope::cuda {
namespace {

using Clock = std::chrono::steady_clock;

double ms_since(Clock::time_point start) {
  return std::chrono::duration<double, std::milli>(Clock::now() - start).count();
}

double median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  return values[values.size() / 2];
}

constexpr int kBlock = 16;

// Runs n tokens at positions start.. into slots from first_block, after `prefix`.
void run_segment(Backend& backend, int n, int start, int first_block, const std::vector<BlockRef>& prefix, bool lazy,
                 bool want_logits, std::vector<BlockRef>* blocks_out, uint32_t seed, int vocab) {
  std::vector<int32_t> tokens(n), positions(n), slots(n);
  std::mt19937 rng(seed);
  for (int i = 0; i < n; ++i) {
    tokens[i] = int32_t(rng() % uint32_t(vocab));
    positions[i] = start + i;
    slots[i] = first_block * kBlock + i;
  }
  std::vector<BlockRef> table = prefix;
  std::vector<BlockRef> blocks;
  for (int b = 0; b * kBlock < n; ++b) blocks.push_back(BlockRef{first_block + b, 0, std::min(kBlock, n - b * kBlock)});
  table.insert(table.end(), blocks.begin(), blocks.end());
  ForwardStep step;
  step.tokens = tokens;
  step.positions = positions;
  step.slots = slots;
  step.table = table;
  step.lazy_rotation = lazy;
  step.want_logits = want_logits;
  std::vector<float> logits;
  backend.forward(step, &logits);
  if (blocks_out != nullptr) *blocks_out = blocks;
}

}  // namespace

ModelShape synthetic_model_shape(const std::string& name) { return synthetic_shape(name); }

double decode_weight_bytes(const ModelShape& s) {
  const double H = s.hidden_size, I = s.intermediate_size, Q = s.q_dim(), K = s.kv_dim();
  const double per_layer = H * (Q + 2 * K) + H * Q + 3 * H * I;
  return 2.0 * (per_layer * s.num_layers + double(s.vocab_size) * H);
}

DecodeThroughput measure_decode(const std::string& model, int prefill_tokens, int decode_steps) {
  const ModelShape shape = synthetic_model_shape(model);
  CudaBackend backend;
  backend.load_synthetic(shape, 1);
  const int blocks = (prefill_tokens + decode_steps + 8) / kBlock + 4;
  backend.allocate_pool(blocks * 2 + 8, kBlock);
  DecodeThroughput result;
  // Prefill (warm once into the second half of the pool, then time into the first).
  run_segment(backend, prefill_tokens, 0, blocks, {}, false, true, nullptr, 1, shape.vocab_size);
  std::vector<double> prefill_times;
  std::vector<BlockRef> table;
  for (int r = 0; r < 3; ++r) {
    backend.synchronize();
    const auto start = Clock::now();
    run_segment(backend, prefill_tokens, 0, 0, {}, false, true, &table, 1, shape.vocab_size);
    prefill_times.push_back(ms_since(start));
  }
  result.prefill_tokens_per_second = prefill_tokens / (median(prefill_times) * 1e-3);
  // Greedy decode, one token per step, logits read back each step.
  std::vector<float> logits;
  int length = prefill_tokens;
  int32_t token = 1;
  auto step_once = [&] {
    const int slot = length;
    if (slot % kBlock == 0) table.push_back(BlockRef{slot / kBlock, 0, 0});
    table.back().valid += 1;
    std::vector<int32_t> tokens{token}, positions{length}, slots{slot};
    ForwardStep step;
    step.tokens = tokens;
    step.positions = positions;
    step.slots = slots;
    step.table = table;
    step.want_logits = true;
    backend.forward(step, &logits);
    token = int32_t(std::max_element(logits.begin(), logits.end()) - logits.begin());
    ++length;
  };
  for (int i = 0; i < 3; ++i) step_once();
  const auto start = Clock::now();
  for (int i = 0; i < decode_steps; ++i) step_once();
  const double ms = ms_since(start);
  result.decode_ms_per_token = ms / decode_steps;
  result.decode_tokens_per_second = decode_steps / (ms * 1e-3);
  // The same steps without reading logits back (the device-side cost of a step).
  const auto start_quiet = Clock::now();
  for (int i = 0; i < decode_steps; ++i) {
    const int slot = length;
    if (slot % kBlock == 0) table.push_back(BlockRef{slot / kBlock, 0, 0});
    table.back().valid += 1;
    std::vector<int32_t> tokens{token}, positions{length}, slots{slot};
    ForwardStep step;
    step.tokens = tokens;
    step.positions = positions;
    step.slots = slots;
    step.table = table;
    step.want_logits = false;
    backend.forward(step, nullptr);
    backend.synchronize();
    ++length;
  }
  result.decode_ms_per_token_no_readback = ms_since(start_quiet) / decode_steps;
  return result;
}

double measure_gemv_gbs(int rows, int cols, bool custom) {
  cublasHandle_t handle;
  LAZYSCOPE_CUBLAS_CHECK(cublasCreate(&handle));
  const std::size_t weight_bytes = std::size_t(rows) * cols * 2;
  const int copies = int(std::max<std::size_t>(1, (std::size_t(256) << 20) / weight_bytes + 1));
  DeviceBuffer w(weight_bytes * copies), x(std::size_t(cols) * 2), out(std::size_t(rows) * 4);
  fill_random_bf16(w.as<bf16_bits>(), int64_t(weight_bytes / 2) * copies, 3, 0.02f, nullptr);
  fill_random_bf16(x.as<bf16_bits>(), cols, 4, 1.0f, nullptr);
  const float alpha = 1.0f, beta = 0.0f;
  auto call = [&](int i) {
    if (custom) {
      gemv_bf16(x.as<bf16_bits>(), w.as<bf16_bits>() + std::size_t(i % copies) * rows * cols, rows, cols,
                out.as<float>(), true, false, nullptr);
      return;
    }
    LAZYSCOPE_CUBLAS_CHECK(cublasGemmEx(handle, CUBLAS_OP_T, CUBLAS_OP_N, rows, 1, cols, &alpha,
                                        w.as<bf16_bits>() + std::size_t(i % copies) * rows * cols, CUDA_R_16BF, cols,
                                        x.as<bf16_bits>(), CUDA_R_16BF, cols, &beta, out.as<float>(), CUDA_R_32F, rows,
                                        CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
  };
  for (int i = 0; i < 10; ++i) call(i);
  LAZYSCOPE_CUDA_CHECK(cudaDeviceSynchronize());
  std::vector<double> times;
  for (int r = 0; r < 7; ++r) {
    const auto start = Clock::now();
    for (int i = 0; i < 50; ++i) call(i);
    LAZYSCOPE_CUDA_CHECK(cudaDeviceSynchronize());
    times.push_back(ms_since(start) / 50);
  }
  LAZYSCOPE_CUBLAS_CHECK(cublasDestroy(handle));
  return double(weight_bytes) / (median(times) * 1e-3) / 1e9;
}

RagTtft measure_rag_ttft(const std::string& model, int docs, int doc_tokens, int query_tokens, int repeats) {
  const ModelShape shape = synthetic_model_shape(model);
  CudaBackend backend;
  backend.load_synthetic(shape, 2);
  const int doc_blocks = (doc_tokens + kBlock - 1) / kBlock;
  const int total_tokens = docs * doc_tokens + query_tokens;
  const int copy_base = docs * doc_blocks;
  const int query_base = 2 * docs * doc_blocks;
  const int none_base = query_base + (query_tokens + kBlock - 1) / kBlock + 1;
  backend.allocate_pool(none_base + (total_tokens + kBlock - 1) / kBlock + 1, kBlock);
  // Encode every document alone at positions 0.. (what the segment cache stores).
  std::vector<std::vector<BlockRef>> doc_refs(docs);
  for (int d = 0; d < docs; ++d) {
    run_segment(backend, doc_tokens, 0, d * doc_blocks, {}, false, false, &doc_refs[d], 100 + d, shape.vocab_size);
  }
  std::vector<BlockRef> lazy_table, rotated_table;
  std::vector<BlockCopy> copies;
  for (int d = 0; d < docs; ++d) {
    const int shift = d * doc_tokens;
    for (std::size_t b = 0; b < doc_refs[d].size(); ++b) {
      BlockRef ref = doc_refs[d][b];
      ref.shift = shift;
      lazy_table.push_back(ref);
      if (shift == 0) {
        rotated_table.push_back(doc_refs[d][b]);
      } else {
        const int dst = copy_base + d * doc_blocks + int(b);
        copies.push_back(BlockCopy{ref.block, dst, shift, ref.valid});
        rotated_table.push_back(BlockRef{dst, 0, ref.valid});
      }
    }
  }
  const int start = docs * doc_tokens;
  std::vector<double> none, lazy, materialized, copy, rotated;
  for (int r = 0; r < repeats + 1; ++r) {
    backend.synchronize();
    auto t0 = Clock::now();
    run_segment(backend, total_tokens, 0, none_base, {}, false, true, nullptr, 7, shape.vocab_size);
    const double none_ms = ms_since(t0);
    t0 = Clock::now();
    run_segment(backend, query_tokens, start, query_base, lazy_table, true, true, nullptr, 8, shape.vocab_size);
    const double lazy_ms = ms_since(t0);
    t0 = Clock::now();
    backend.copy_blocks(copies);
    backend.synchronize();
    const double copy_ms = ms_since(t0);
    run_segment(backend, query_tokens, start, query_base, rotated_table, false, true, nullptr, 8, shape.vocab_size);
    const double materialized_ms = ms_since(t0);
    t0 = Clock::now();
    run_segment(backend, query_tokens, start, query_base, rotated_table, false, true, nullptr, 8, shape.vocab_size);
    const double rotated_ms = ms_since(t0);
    if (r == 0) continue;  // warm-up
    none.push_back(none_ms);
    lazy.push_back(lazy_ms);
    materialized.push_back(materialized_ms);
    copy.push_back(copy_ms);
    rotated.push_back(rotated_ms);
  }
  return RagTtft{median(none), median(lazy), median(materialized), median(copy), median(rotated)};
}

}  // namespace lazyscope::cuda

// The CUDA backend's step entry points and what every step shares: validation, the per-step
// workspace, the metadata upload, the GEMM and the LM head with its readback.
#include <algorithm>
#include <cstring>
#include <string>

#include "base/error.h"
#include "kernels/cuda/check.h"
#include "kernels/cuda/cuda_backend.h"
#include "kernels/cuda/ops.h"
#include "kernels/cuda/tool_switches.h"

namespace lazyscope::cuda {

void CudaBackend::forward(const ForwardStep& step, std::vector<float>* logits) {
  const bool want = step.want_logits && logits != nullptr;
  run_step(step, want ? StepOutput::Logits : StepOutput::None, logits);
}

int32_t CudaBackend::forward_greedy(const ForwardStep& step) { return run_step(step, StepOutput::Greedy, nullptr); }

void CudaBackend::forward_batch(std::span<const ForwardStep> steps, std::vector<float>* logits) {
  if (!loaded_ || num_blocks_ == 0) throw Error("cuda backend: forward_batch before load and allocate_pool");
  validate_decode_batch(steps, step_limits(), "forward_batch");
  if (logits != nullptr) logits->clear();
  if (steps.empty()) return;
  const StepOutput output = logits != nullptr ? StepOutput::Logits : StepOutput::None;
  run_decode_batch(steps, output);
  if (output == StepOutput::None) return;
  LAZYSCOPE_CUDA_CHECK(cudaStreamSynchronize(stream_));  // the one sync of a step: its result to the host
  if (!owns_residual()) return;                          // a tensor-parallel rank > 0 keeps no logits
  const float* rows = host_logits_.as<float>();
  logits->assign(rows, rows + steps.size() * std::size_t(output_vocab()));
}

void CudaBackend::forward_batch_greedy(std::span<const ForwardStep> steps, std::span<int32_t> tokens) {
  if (!loaded_ || num_blocks_ == 0) throw Error("cuda backend: forward_batch_greedy before load and allocate_pool");
  if (tokens.size() != steps.size()) {
    throw Error("forward_batch_greedy: " + std::to_string(tokens.size()) + " output tokens for " +
                std::to_string(steps.size()) + " steps (one per step)");
  }
  validate_decode_batch(steps, step_limits(), "forward_batch_greedy");
  if (steps.empty()) return;
  run_decode_batch(steps, StepOutput::Greedy);
  LAZYSCOPE_CUDA_CHECK(cudaStreamSynchronize(stream_));
  std::memcpy(tokens.data(), host_tokens_.as<int32_t>(), steps.size() * sizeof(int32_t));
}

int32_t CudaBackend::run_step(const ForwardStep& step, StepOutput output, std::vector<float>* logits) {
  if (!loaded_ || num_blocks_ == 0) throw Error("cuda backend: forward before load and allocate_pool");
  const int total_keys = validate_step(step, step_limits());
  if (step.tokens.size() == 1) {
    run_decode(step, output);
  } else {
    run_prefill(step, total_keys, output);
  }
  if (output == StepOutput::None) return -1;
  LAZYSCOPE_CUDA_CHECK(cudaStreamSynchronize(stream_));  // the one sync of a step: its result to the host
  if (output == StepOutput::Greedy) return *host_tokens_.as<int32_t>();
  if (!owns_residual()) return -1;  // a tensor-parallel rank > 0 keeps no logits
  logits->assign(host_logits_.as<float>(), host_logits_.as<float>() + output_vocab());
  return -1;
}

// Grows the step buffers; any reallocation drops the graphs (they hold the old addresses).
void CudaBackend::ensure_workspace(int n, int rows_splits, int output_rows) {
  if (n > capacity_tokens_) {
    invalidate_graphs();
    const std::size_t H = shape_.hidden_size, I = shape_.intermediate_size;
    const std::size_t Q = shape_.q_dim(), K = shape_.kv_dim();
    x_.resize(n * H * 4);
    h_.resize(n * H * 2);
    qkv_.resize(n * (Q + 2 * K) * 2);
    attn_.resize(n * Q * 2);
    gate_up_.resize(n * 2 * I * 2);
    act_.resize(n * I * 2);
    capacity_tokens_ = n;
  }
  if (std::size_t(rows_splits) > partial_rows_splits_) {
    invalidate_graphs();
    partial_o_.resize(std::size_t(rows_splits) * shape_.head_dim * 4);
    partial_ml_.resize(std::size_t(rows_splits) * 2 * 4);
    partial_rows_splits_ = rows_splits;
  }
  if (output_rows > capacity_output_rows_) {
    invalidate_graphs();
    const std::size_t rows = std::size_t(output_rows);
    logits_.resize(rows * output_vocab() * 4);
    if (sharded()) {
      logits_shard_.resize(rows * shape_.vocab_size * 4);
      if (shard_.ranks > 1) logits_gathered_.resize(rows * output_vocab() * 4);
    }
    host_logits_.reserve(rows * output_vocab() * 4);
    device_tokens_.resize(rows * sizeof(int32_t));
    host_tokens_.reserve(rows * sizeof(int32_t));
    argmax_scratch_.resize(2 * rows * sizeof(unsigned long long));
    LAZYSCOPE_CUDA_CHECK(cudaMemsetAsync(argmax_scratch_.as<void>(), 0, argmax_scratch_.bytes(), stream_));
    capacity_output_rows_ = output_rows;
  }
}

// out[m, n] = x[m, k] @ w[n, k]^T (HF layout), through cuBLAS with fp32 accumulation.
void CudaBackend::gemm(const bf16_bits* x, const bf16_bits* w, int m, int n, int k, void* out, bool out_fp32,
                       bool accumulate) {
  if (m == 1 && k % 8 == 0) {
    // One token: a bandwidth-bound GEMV beats cuBLAS's choice on the narrower projections.
    gemv_bf16(x, w, n, k, out, out_fp32, accumulate, stream_, gemv_);
    return;
  }
  const float alpha = 1.0f, beta = accumulate ? 1.0f : 0.0f;
  if (!accumulate && tool_switches().zero_gemm_outputs) {
    // For initcheck only (tool_switches.h): exactly the bytes this GEMM writes (ldc = n).
    const std::size_t bytes = std::size_t(m) * std::size_t(n) * (out_fp32 ? 4 : 2);
    LAZYSCOPE_CUDA_CHECK(cudaMemsetAsync(out, 0, bytes, stream_));
  }
  LAZYSCOPE_CUBLAS_CHECK(cublasGemmEx(cublas_, CUBLAS_OP_T, CUBLAS_OP_N, n, m, k, &alpha, w, CUDA_R_16BF, k, x,
                                      CUDA_R_16BF, k, &beta, out, out_fp32 ? CUDA_R_32F : CUDA_R_16BF, n,
                                      CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
}

void CudaBackend::enqueue_head(const float* x, int rows, StepOutput output) {
  if (output == StepOutput::None) return;
  const int H = shape_.hidden_size;
  const std::size_t V = std::size_t(output_vocab());
  bf16_bits* h = h_.as<bf16_bits>();
  const bf16_bits* head = tied_ ? embed_.as<bf16_bits>() : lm_head_.as<bf16_bits>();
  // The LM head keeps its separate norm: folded in, each of its ~8K CTAs would re-read the
  // residual and the norm weights (a quarter more on-chip traffic for one launch saved).
  rmsnorm(x, final_norm_.as<float>(), rows, H, shape_.rms_norm_eps, h, stream_);
  if (sharded()) {
    gemm(h, head, rows, shape_.vocab_size, H, logits_shard_.as<float>(), true, false);  // this rank's vocabulary
    gather_logits(rows);
  } else {
    gemm(h, head, rows, shape_.vocab_size, H, logits_.as<float>(), true, false);
  }
  if (output == StepOutput::Logits) {
    if (!owns_residual()) return;
    LAZYSCOPE_CUDA_CHECK(cudaMemcpyAsync(host_logits_.as<void>(), logits_.as<float>(), rows * V * 4,
                                         cudaMemcpyDeviceToHost, stream_));
    return;
  }
  argmax_rows(logits_.as<float>(), rows, int(V), device_tokens_.as<int32_t>(),
              argmax_scratch_.as<unsigned long long>(), stream_);
  LAZYSCOPE_CUDA_CHECK(cudaMemcpyAsync(host_tokens_.as<void>(), device_tokens_.as<void>(), rows * sizeof(int32_t),
                                       cudaMemcpyDeviceToHost, stream_));
}

// Two pinned staging buffers alternate, so the host fills one while the stream may still be
// reading the other; before reusing a buffer the host waits for the upload that last read it.
unsigned char* CudaBackend::stage_meta(std::size_t bytes) {
  meta_slot_ = 1 - meta_slot_;
  LAZYSCOPE_CUDA_CHECK(cudaEventSynchronize(meta_uploaded_[meta_slot_]));
  PinnedBuffer& staged = staged_meta_[meta_slot_];
  if (bytes > staged.bytes()) staged.reserve(std::max<std::size_t>({bytes, 2 * staged.bytes(), 4096}));
  return staged.as<unsigned char>();
}

void CudaBackend::upload_meta(std::size_t bytes) {
  if (bytes > step_meta_.bytes()) {
    // Kernels of earlier steps may still read the old buffer; graphs hold its address.
    LAZYSCOPE_CUDA_CHECK(cudaStreamSynchronize(stream_));
    invalidate_graphs();
    step_meta_.resize(std::max<std::size_t>({bytes, 2 * step_meta_.bytes(), 1024}));
  }
  LAZYSCOPE_CUDA_CHECK(cudaMemcpyAsync(step_meta_.as<void>(), staged_meta_[meta_slot_].as<void>(), bytes,
                                       cudaMemcpyHostToDevice, stream_));
  LAZYSCOPE_CUDA_CHECK(cudaEventRecord(meta_uploaded_[meta_slot_], stream_));
}

}  // namespace lazyscope::cuda

// A tensor-parallel rank's slices of the weights: uploaded from the host model, or made on its own
// GPU as exactly the blocks of the tensors the unsharded backend's load_synthetic makes (same
// seeds, same values), so every TP size computes the same model.
#include <vector>

#include "base/error.h"
#include "kernels/cuda/check.h"
#include "kernels/cuda/cuda_backend.h"
#include "kernels/cuda/ops.h"

namespace lazyscope::cuda {
namespace {

// dst[dst_offset + r * cols + c] = bf16(src[(row_begin + r) * src_cols + col_begin + c]).
void upload_bf16_block(DeviceBuffer& dst, std::size_t dst_offset, const float* src,
                       std::size_t rows, std::size_t cols, std::size_t src_cols,
                       std::size_t row_begin, std::size_t col_begin) {
  std::vector<bf16_bits> converted(rows * cols);
  for (std::size_t r = 0; r < rows; ++r) {
    const float* row = src + (row_begin + r) * src_cols + col_begin;
    for (std::size_t c = 0; c < cols; ++c) converted[r * cols + c] = float_to_bf16(row[c]);
  }
  LAZYSCOPE_CUDA_CHECK(cudaMemcpy(dst.as<bf16_bits>() + dst_offset, converted.data(),
                                  converted.size() * sizeof(bf16_bits), cudaMemcpyHostToDevice));
}

void upload_f32(DeviceBuffer& dst, const float* src, std::size_t count) {
  LAZYSCOPE_CUDA_CHECK(
      cudaMemcpy(dst.as<float>(), src, count * sizeof(float), cudaMemcpyHostToDevice));
}

}  // namespace

void CudaBackend::load_shard(const ModelShape& shape, const WeightsView& w) {
  allocate_weights(shape);
  const std::size_t H = shape.hidden_size, I = shape.intermediate_size, D = shape.head_dim;
  const std::size_t Q = shape.q_dim();
  const std::size_t q0 = shard_.heads.begin * D, q = shard_.heads.count * D;
  const std::size_t k0 = shard_.kv_heads.begin * D, k = shard_.kv_heads.count * D;
  const std::size_t i0 = shard_.intermediate.begin, i = shard_.intermediate.count;
  const std::size_t v0 = shard_.vocab.begin, v = shard_.vocab.count;
  upload_bf16_block(embed_, 0, w.embed, v, H, H, v0, 0);
  if (!tied_) upload_bf16_block(lm_head_, 0, w.lm_head, v, H, H, v0, 0);
  upload_f32(final_norm_, w.final_norm, H);
  for (int l = 0; l < shape.num_layers; ++l) {
    const LayerWeightsView& src = w.layers[l];
    LayerWeights& dst = layers_[l];
    upload_f32(dst.attn_norm, src.attn_norm, H);
    upload_f32(dst.mlp_norm, src.mlp_norm, H);
    // Column-parallel: this rank's rows of [q | k | v] and [gate | up].
    upload_bf16_block(dst.wqkv, 0, src.wq, q, H, H, q0, 0);
    upload_bf16_block(dst.wqkv, q * H, src.wk, k, H, H, k0, 0);
    upload_bf16_block(dst.wqkv, (q + k) * H, src.wv, k, H, H, k0, 0);
    upload_bf16_block(dst.w_gate_up, 0, src.w_gate, i, H, H, i0, 0);
    upload_bf16_block(dst.w_gate_up, i * H, src.w_up, i, H, H, i0, 0);
    // Row-parallel: this rank's input columns of o_proj and down.
    upload_bf16_block(dst.wo, 0, src.wo, H, q, Q, 0, q0);
    upload_bf16_block(dst.w_down, 0, src.w_down, H, i, I, 0, i0);
  }
  loaded_ = true;
}

void CudaBackend::load_synthetic_shard(const ModelShape& shape, uint64_t seed) {
  allocate_weights(shape);
  const int64_t H = shape.hidden_size, I = shape.intermediate_size, D = shape.head_dim;
  const int64_t Q = shape.q_dim(), K = shape.kv_dim();
  const int64_t q0 = shard_.heads.begin * D, q = shard_.heads.count * D;
  const int64_t k0 = shard_.kv_heads.begin * D, k = shard_.kv_heads.count * D;
  const int64_t i0 = shard_.intermediate.begin, i = shard_.intermediate.count;
  const int64_t v0 = shard_.vocab.begin, v = shard_.vocab.count;
  // The same stream ids, in the same order, as CudaBackend::load_synthetic.
  uint64_t stream_id = seed * 1000003ull;
  auto block = [&](DeviceBuffer& buffer, int64_t offset, int64_t rows, int64_t cols,
                   int64_t full_cols, int64_t row_begin, int64_t col_begin) {
    fill_random_bf16_block(buffer.as<bf16_bits>() + offset, rows, cols, full_cols, row_begin,
                           col_begin, stream_id, 0.02f, stream_);
  };
  ++stream_id;
  block(embed_, 0, v, H, H, v0, 0);
  if (!tied_) {
    ++stream_id;
    block(lm_head_, 0, v, H, H, v0, 0);
  }
  fill_float(final_norm_.as<float>(), H, 1.0f, stream_);
  for (LayerWeights& lw : layers_) {
    fill_float(lw.attn_norm.as<float>(), H, 1.0f, stream_);
    fill_float(lw.mlp_norm.as<float>(), H, 1.0f, stream_);
    ++stream_id;  // wqkv [Q + 2K, H]: rows q0.., Q + k0.., Q + K + k0..
    block(lw.wqkv, 0, q, H, H, q0, 0);
    block(lw.wqkv, q * H, k, H, H, Q + k0, 0);
    block(lw.wqkv, (q + k) * H, k, H, H, Q + K + k0, 0);
    ++stream_id;  // wo [H, Q]: columns q0..
    block(lw.wo, 0, H, q, Q, 0, q0);
    ++stream_id;  // gate_up [2I, H]: rows i0.., I + i0..
    block(lw.w_gate_up, 0, i, H, H, i0, 0);
    block(lw.w_gate_up, i * H, i, H, H, I + i0, 0);
    ++stream_id;  // down [H, I]: columns i0..
    block(lw.w_down, 0, H, i, I, 0, i0);
  }
  LAZYSCOPE_CUDA_CHECK(cudaStreamSynchronize(stream_));
  loaded_ = true;
}

}  // namespace lazyscope::cuda

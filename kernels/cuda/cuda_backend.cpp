// The CUDA backend's construction, weights (uploaded or synthetic), KV pool, block copies and
// launch choices; the steps themselves are in cuda_step.cpp, cuda_decode_step.cpp and
// cuda_prefill_step.cpp.
#include "kernels/cuda/cuda_backend.h"
#include "kernels/cuda/device_arch.h"

#include <algorithm>
#include <string>

#include "base/error.h"
#include "kernels/cuda/attention_plan.h"
#include "kernels/cuda/check.h"
#include "kernels/cuda/decode_layer.h"
#include "kernels/cuda/ops.h"
#include "kernels/cuda_entry.h"
#include "kernels/rope.h"

namespace lazyscope::cuda {
namespace {

void upload_bf16(DeviceBuffer& dst, const float* src, std::size_t count, std::size_t dst_offset_elements = 0) {
  std::vector<bf16_bits> converted(count);
  for (std::size_t i = 0; i < count; ++i) converted[i] = float_to_bf16(src[i]);
  LAZYSCOPE_CUDA_CHECK(cudaMemcpy(dst.as<bf16_bits>() + dst_offset_elements, converted.data(),
                                  count * sizeof(bf16_bits), cudaMemcpyHostToDevice));
}

void upload_f32(DeviceBuffer& dst, const float* src, std::size_t count) {
  LAZYSCOPE_CUDA_CHECK(cudaMemcpy(dst.as<float>(), src, count * sizeof(float), cudaMemcpyHostToDevice));
}

void check_tuning(const CudaTuning& tuning) {
  if (tuning.decode_splits_cap < 0) {
    throw Error("cuda backend: decode_splits_cap " + std::to_string(tuning.decode_splits_cap) +
                " is negative (0 for no cap, else the most KV splits)");
  }
  if (tuning.gemv_prefetch_steps < 0 || tuning.gemv_prefetch_steps > 64) {
    throw Error("cuda backend: gemv_prefetch_steps " + std::to_string(tuning.gemv_prefetch_steps) +
                " is out of range (0..64)");
  }
  if (tuning.gemv_split_ctas_per_sm < 0 || tuning.gemv_split_ctas_per_sm > 8) {
    throw Error("cuda backend: gemv_split_ctas_per_sm " + std::to_string(tuning.gemv_split_ctas_per_sm) +
                " is out of range (0..8)");
  }
  if (tuning.decode_layer_stages < 2 || tuning.decode_layer_stages > 8) {
    throw Error("cuda backend: decode_layer_stages " + std::to_string(tuning.decode_layer_stages) +
                " is out of range (2..8)");
  }
  if (tuning.decode_layer_l2_prefetch_kib < 0 || tuning.decode_layer_l2_prefetch_kib > 1024) {
    throw Error("cuda backend: decode_layer_l2_prefetch_kib " + std::to_string(tuning.decode_layer_l2_prefetch_kib) +
                " is out of range (0..1024)");
  }
  if (tuning.attention_l2_prefetch_mib < 0 || tuning.attention_l2_prefetch_mib > 48) {
    throw Error("cuda backend: attention_l2_prefetch_mib " + std::to_string(tuning.attention_l2_prefetch_mib) +
                " is out of range (0..48)");
  }
}

}  // namespace

CudaBackend::CudaBackend(const CudaTuning& tuning) : tuning_(tuning) {
  check_tuning(tuning);
  (void)current_kernel_path();  // a GPU the kernels cannot run on is refused here, by name
  LAZYSCOPE_CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
  LAZYSCOPE_CUBLAS_CHECK(cublasCreate(&cublas_));
  LAZYSCOPE_CUBLAS_CHECK(cublasSetStream(cublas_, stream_));
  // A workspace of our own (32 MiB, cuBLAS's size for Hopper), so that a captured batched decode
  // step never asks cuBLAS to allocate.
  cublas_workspace_.resize(std::size_t(32) << 20);
  LAZYSCOPE_CUBLAS_CHECK(cublasSetWorkspace(cublas_, cublas_workspace_.as<void>(), cublas_workspace_.bytes()));
  sm_count_ = device_sm_count();
  for (cudaEvent_t& event : meta_uploaded_) {
    LAZYSCOPE_CUDA_CHECK(cudaEventCreateWithFlags(&event, cudaEventDisableTiming));
  }
  set_tuning(tuning);
}

CudaBackend::~CudaBackend() {
  for (auto& [key, exec] : graphs_) {
    if (exec != nullptr) cudaGraphExecDestroy(exec);
  }
  for (cudaEvent_t event : meta_uploaded_) {
    if (event != nullptr) cudaEventDestroy(event);
  }
  if (cublas_ != nullptr) cublasDestroy(cublas_);
  if (stream_ != nullptr) cudaStreamDestroy(stream_);
}

std::string CudaBackend::device() const {
  int index = 0;
  cudaGetDevice(&index);
  cudaDeviceProp prop{};
  if (cudaGetDeviceProperties(&prop, index) != cudaSuccess) return "CUDA device " + std::to_string(index);
  return std::string(prop.name) + " (" + std::to_string(prop.multiProcessorCount) + " SMs, " +
         std::to_string(prop.totalGlobalMem >> 30) + " GiB)";
}

// The kernels are instantiated for these head sizes and GQA ratios (attention_decode.cu,
// attention_prefill.cu); anything else is refused here, before any allocation.
std::string CudaBackend::unsupported_reason(const ModelShape& shape) const {
  if (shape.num_layers <= 0 || shape.hidden_size <= 0 || shape.intermediate_size <= 0 || shape.vocab_size <= 0 ||
      shape.num_heads <= 0) {
    return "model shape has a zero or negative size (layers " + std::to_string(shape.num_layers) + ", hidden " +
           std::to_string(shape.hidden_size) + ", intermediate " + std::to_string(shape.intermediate_size) +
           ", vocab " + std::to_string(shape.vocab_size) + ", heads " + std::to_string(shape.num_heads) + ")";
  }
  if (shape.head_dim != 16 && shape.head_dim != 32 && shape.head_dim != 64 && shape.head_dim != 128) {
    return "head_dim " + std::to_string(shape.head_dim) + " is not supported by the CUDA kernels (16, 32, 64, 128)";
  }
  if (shape.num_kv_heads <= 0 || shape.num_heads % shape.num_kv_heads != 0) {
    return std::to_string(shape.num_heads) + " query heads are not a multiple of " +
           std::to_string(shape.num_kv_heads) + " KV heads";
  }
  const int ratio = shape.num_heads / shape.num_kv_heads;
  if (ratio > 8) {
    return "GQA ratio " + std::to_string(ratio) + " (" + std::to_string(shape.num_heads) + " query / " +
           std::to_string(shape.num_kv_heads) + " KV heads) is not supported by the CUDA kernels (1 to 8)";
  }
  return {};
}

void CudaBackend::allocate_weights(const ModelShape& model) {
  const std::string why = unsupported_reason(model);
  if (!why.empty()) throw Error("cuda backend: " + why);
  LAZYSCOPE_CUDA_CHECK(cudaStreamSynchronize(stream_));
  invalidate_graphs();
  shape_ = sharded() ? shard_shape(model, shard_) : model;  // a tensor-parallel rank: its share
  vocab_total_ = model.vocab_size;
  const ModelShape& shape = shape_;
  gemv_ok_ = shape.hidden_size % 8 == 0 && shape.q_dim() % 8 == 0 && shape.intermediate_size % 8 == 0;
  const std::size_t H = shape.hidden_size, V = shape.vocab_size, I = shape.intermediate_size;
  const std::size_t Q = shape.q_dim(), K = shape.kv_dim();
  embed_.resize(V * H * 2);
  tied_ = shape.tie_word_embeddings;
  if (!tied_) lm_head_.resize(V * H * 2);
  final_norm_.resize(H * 4);
  layers_.clear();
  layers_.resize(shape.num_layers);
  for (LayerWeights& lw : layers_) {
    lw.attn_norm.resize(H * 4);
    lw.mlp_norm.resize(H * 4);
    lw.wqkv.resize((Q + 2 * K) * H * 2);
    lw.wo.resize(H * Q * 2);
    lw.w_gate_up.resize(2 * I * H * 2);
    lw.w_down.resize(H * I * 2);
  }
  // Split-K scratch for the largest need among the step's GEMVs under either split rule the tuning
  // may choose (the fill rule splits most at its largest n, 8); counters start (and stay) zero.
  GemvWorkspaceSize need;
  const int gemv_shapes[5][2] = {{int(Q + 2 * K), int(H)}, {int(H), int(Q)}, {int(2 * I), int(H)}, {int(H), int(I)},
                                 {int(V), int(H)}};
  for (const auto& rc : gemv_shapes) {
    const int splits = std::max(gemv_num_splits(rc[0], rc[1]), gemv_splits_to_fill(rc[0], rc[1], sm_count_, 8));
    const GemvWorkspaceSize size = gemv_workspace_size_for_splits(rc[0], splits);
    need.partial_floats = std::max(need.partial_floats, size.partial_floats);
    need.num_counters = std::max(need.num_counters, size.num_counters);
  }
  gemv_partial_.resize(std::max<std::size_t>(need.partial_floats, 1) * sizeof(float));
  gemv_counters_.resize(std::size_t(std::max(need.num_counters, 1)) * sizeof(unsigned));
  LAZYSCOPE_CUDA_CHECK(cudaMemset(gemv_counters_.as<void>(), 0, gemv_counters_.bytes()));
  gemv_.workspace = GemvWorkspace{gemv_partial_.as<float>(), need.partial_floats, gemv_counters_.as<unsigned>(),
                                  need.num_counters};
  layer_sync_.resize(2 * sizeof(unsigned long long));  // the barrier counter, then the gate_up claims
  LAZYSCOPE_CUDA_CHECK(cudaMemset(layer_sync_.as<void>(), 0, layer_sync_.bytes()));
  choose_decode_layer();
  const std::vector<float> inv = rope_inv_freq(shape.rope, shape.head_dim);
  inv_freq_.resize(inv.size() * sizeof(float));
  upload_f32(inv_freq_, inv.data(), inv.size());
  capacity_tokens_ = 0;
  capacity_output_rows_ = 0;
  partial_rows_splits_ = 0;  // head_dim may differ from the last model's
  num_blocks_ = 0;
  block_size_ = 0;
}

void CudaBackend::load(const ModelShape& shape, const WeightsView& w) {
  if (int(w.layers.size()) != shape.num_layers) throw Error("cuda backend: weights have the wrong layer count");
  if (sharded()) return load_shard(shape, w);
  allocate_weights(shape);
  const std::size_t H = shape.hidden_size, V = shape.vocab_size, I = shape.intermediate_size;
  const std::size_t Q = shape.q_dim(), K = shape.kv_dim();
  upload_bf16(embed_, w.embed, V * H);
  if (!tied_) upload_bf16(lm_head_, w.lm_head, V * H);
  upload_f32(final_norm_, w.final_norm, H);
  for (int l = 0; l < shape.num_layers; ++l) {
    const LayerWeightsView& src = w.layers[l];
    LayerWeights& dst = layers_[l];
    upload_f32(dst.attn_norm, src.attn_norm, H);
    upload_f32(dst.mlp_norm, src.mlp_norm, H);
    // Fused projections: rows [q | k | v] and [gate | up] (HF [out, in] layout).
    upload_bf16(dst.wqkv, src.wq, Q * H, 0);
    upload_bf16(dst.wqkv, src.wk, K * H, Q * H);
    upload_bf16(dst.wqkv, src.wv, K * H, (Q + K) * H);
    upload_bf16(dst.wo, src.wo, H * Q);
    upload_bf16(dst.w_gate_up, src.w_gate, I * H, 0);
    upload_bf16(dst.w_gate_up, src.w_up, I * H, I * H);
    upload_bf16(dst.w_down, src.w_down, H * I);
  }
  loaded_ = true;
}

void CudaBackend::load_synthetic(const ModelShape& shape, uint64_t seed) {
  if (sharded()) return load_synthetic_shard(shape, seed);
  allocate_weights(shape);
  const int64_t H = shape.hidden_size, V = shape.vocab_size, I = shape.intermediate_size;
  const int64_t Q = shape.q_dim(), K = shape.kv_dim();
  uint64_t stream_id = seed * 1000003ull;
  auto random = [&](DeviceBuffer& buffer, int64_t count) {
    fill_random_bf16(buffer.as<bf16_bits>(), count, ++stream_id, 0.02f, stream_);
  };
  random(embed_, V * H);
  if (!tied_) random(lm_head_, V * H);
  fill_float(final_norm_.as<float>(), H, 1.0f, stream_);
  for (LayerWeights& lw : layers_) {
    fill_float(lw.attn_norm.as<float>(), H, 1.0f, stream_);
    fill_float(lw.mlp_norm.as<float>(), H, 1.0f, stream_);
    random(lw.wqkv, (Q + 2 * K) * H);
    random(lw.wo, H * Q);
    random(lw.w_gate_up, 2 * I * H);
    random(lw.w_down, H * I);
  }
  LAZYSCOPE_CUDA_CHECK(cudaStreamSynchronize(stream_));
  loaded_ = true;
}

void CudaBackend::allocate_pool(int num_blocks, int block_size) {
  if (!loaded_) throw Error("cuda backend: allocate_pool before load");
  if (block_size < 1 || kPrefillTileKeys % block_size != 0) {
    throw Error("cuda backend: block size " + std::to_string(block_size) + " must divide " +
                std::to_string(kPrefillTileKeys));
  }
  LAZYSCOPE_CUDA_CHECK(cudaStreamSynchronize(stream_));
  invalidate_graphs();
  num_blocks_ = num_blocks;
  block_size_ = block_size;
  const std::size_t bytes = std::size_t(shape_.num_layers) * layer_pool_elements() * 2;
  k_pool_.resize(bytes);
  v_pool_.resize(bytes);
  // Zeroed so that reading a never-written slot is deterministic (the CPU pool starts at zero).
  LAZYSCOPE_CUDA_CHECK(cudaMemsetAsync(k_pool_.as<void>(), 0, bytes, stream_));
  LAZYSCOPE_CUDA_CHECK(cudaMemsetAsync(v_pool_.as<void>(), 0, bytes, stream_));
}

void CudaBackend::copy_blocks(std::span<const BlockCopy> copies) {
  if (copies.empty()) return;
  for (const BlockCopy& c : copies) {
    if (c.src < 0 || c.src >= num_blocks_ || c.dst < 0 || c.dst >= num_blocks_) {
      throw Error("copy_blocks: block out of the pool");
    }
    if (c.valid < 1 || c.valid > block_size_) throw Error("copy_blocks: bad valid count");
  }
  copies_.reserve(copies.size() * sizeof(BlockCopyOp));
  LAZYSCOPE_CUDA_CHECK(cudaMemcpyAsync(copies_.as<void>(), copies.data(), copies.size() * sizeof(BlockCopyOp),
                                       cudaMemcpyHostToDevice, stream_));
  MaterializeParams mp;
  mp.copies = copies_.as<BlockCopyOp>();
  mp.num_copies = int(copies.size());
  mp.num_layers = shape_.num_layers;
  mp.layer_stride = layer_pool_elements();
  mp.num_kv_heads = shape_.num_kv_heads;
  mp.head_dim = shape_.head_dim;
  mp.block_size = block_size_;
  mp.inv_freq = inv_freq_.as<float>();
  mp.k_pool = k_pool_.as<bf16_bits>();
  mp.v_pool = v_pool_.as<bf16_bits>();
  materialize(mp, stream_);
}

void CudaBackend::synchronize() { LAZYSCOPE_CUDA_CHECK(cudaStreamSynchronize(stream_)); }

void CudaBackend::set_tuning(const CudaTuning& tuning) {
  check_tuning(tuning);
  LAZYSCOPE_CUDA_CHECK(cudaStreamSynchronize(stream_));
  invalidate_graphs();  // the graphs hold the other choices' launches
  tuning_ = tuning;
  gemv_.programmatic = tuning.programmatic_gemv;
  gemv_.prefetch_steps = tuning.gemv_prefetch_steps;
  gemv_.split_ctas_per_sm = tuning.gemv_split_ctas_per_sm;
  choose_decode_layer();
}

void CudaBackend::choose_decode_layer() {
  decode_layer_ok_ = false;
  if (!tuning_.decode_layer_kernel || !tuning_.fused_decode || !tuning_.fused_kv_write || !gemv_ok_ || sharded() ||
      layers_.empty()) {
    return;
  }
  decode_layer_ok_ = decode_layer_unsupported(shape_.hidden_size, shape_.intermediate_size, shape_.q_dim(),
                                              shape_.kv_dim(), shape_.head_dim, tuning_.decode_layer_stages)
                         .empty();
}

void CudaBackend::drop_graphs() {
  synchronize();
  invalidate_graphs();
}

void CudaBackend::invalidate_graphs() {
  for (auto& [key, exec] : graphs_) {
    if (exec != nullptr) LAZYSCOPE_CUDA_CHECK(cudaGraphExecDestroy(exec));
  }
  graphs_.clear();
}

StepLimits CudaBackend::step_limits() const { return StepLimits{output_vocab(), num_blocks_, block_size_}; }

int device_count() {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess) {
    cudaGetLastError();  // clear the sticky "no driver" status
    return 0;
  }
  return count;
}

std::unique_ptr<Backend> make_backend() { return std::make_unique<CudaBackend>(); }

}  // namespace lazyscope::cuda

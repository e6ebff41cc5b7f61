#include "kernels/cuda/cuda_backend.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <string>

#include "kernels/cuda/attention.h"
#include "kernels/cuda/attention_plan.h"
#include "kernels/cuda/check.h"
#include "kernels/cuda/ops.h"
#include "kernels/cuda_entry.h"
#include "base/error.h"
#include "kernels/rope.h"

namespace lazyscope::cuda {
namespace {

// Appends `count` items to a byte buffer at a 16-byte boundary; returns their offset.
template <typename T>
std::size_t append_aligned(std::vector<unsigned char>& bytes, const T* items, std::size_t count) {
  std::size_t offset = (bytes.size() + 15) / 16 * 16;
  bytes.resize(offset + count * sizeof(T));
  if (count > 0) std::memcpy(bytes.data() + offset, items, count * sizeof(T));
  return offset;
}

void upload_bf16(DeviceBuffer& dst, const float* src, std::size_t count, std::size_t dst_offset_elements = 0) {
  std::vector<bf16_bits> converted(count);
  for (std::size_t i = 0; i < count; ++i) converted[i] = float_to_bf16(src[i]);
  LAZYSCOPE_CUDA_CHECK(cudaMemcpy(dst.as<bf16_bits>() + dst_offset_elements, converted.data(),
                                  count * sizeof(bf16_bits), cudaMemcpyHostToDevice));
}

void upload_f32(DeviceBuffer& dst, const float* src, std::size_t count) {
  LAZYSCOPE_CUDA_CHECK(cudaMemcpy(dst.as<float>(), src, count * sizeof(float), cudaMemcpyHostToDevice));
}

}  // namespace

CudaBackend::CudaBackend() {
  LAZYSCOPE_CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
  LAZYSCOPE_CUBLAS_CHECK(cublasCreate(&cublas_));
  LAZYSCOPE_CUBLAS_CHECK(cublasSetStream(cublas_, stream_));
  sm_count_ = device_sm_count();
  for (cudaEvent_t& event : meta_uploaded_) {
    LAZYSCOPE_CUDA_CHECK(cudaEventCreateWithFlags(&event, cudaEventDisableTiming));
  }
  const char* env = std::getenv("LAZYSCOPE_CUDA_GRAPHS");
  graphs_enabled_ = env == nullptr || std::string(env) != "0";
  const char* fuse = std::getenv("LAZYSCOPE_CUDA_FUSE");
  fused_decode_ = fuse == nullptr || std::string(fuse) != "0";
  const char* fuse_kv = std::getenv("LAZYSCOPE_CUDA_FUSE_KV");
  fused_kv_write_ = fuse_kv == nullptr || std::string(fuse_kv) != "0";
  const char* pdl = std::getenv("LAZYSCOPE_CUDA_PDL");
  if (pdl != nullptr) gemv_set_programmatic_launch(std::string(pdl) != "0");
}

CudaBackend::~CudaBackend() {
  for (auto& [key, exec] : graphs_) {
    if (exec != nullptr) cudaGraphExecDestroy(exec);
  }
  for (cudaEvent_t event : meta_uploaded_) {
    if (event != nullptr) cudaEventDestroy(event);
  }
  if (host_token_ != nullptr) cudaFreeHost(host_token_);
  if (host_logits_ != nullptr) cudaFreeHost(host_logits_);
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

void CudaBackend::allocate_weights(const ModelShape& shape) {
  const std::string why = unsupported_reason(shape);
  if (!why.empty()) throw Error("cuda backend: " + why);
  LAZYSCOPE_CUDA_CHECK(cudaStreamSynchronize(stream_));
  invalidate_graphs();
  shape_ = shape;
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
  // Split-K scratch for the largest need among the step's GEMVs; counters start (and stay) zero.
  GemvWorkspaceSize need;
  const int gemv_shapes[5][2] = {{int(Q + 2 * K), int(H)}, {int(H), int(Q)}, {int(2 * I), int(H)}, {int(H), int(I)},
                                 {int(V), int(H)}};
  for (const auto& rc : gemv_shapes) {
    const GemvWorkspaceSize size = gemv_workspace_size(rc[0], rc[1]);
    need.partial_floats = std::max(need.partial_floats, size.partial_floats);
    need.num_counters = std::max(need.num_counters, size.num_counters);
  }
  gemv_partial_.resize(std::max<std::size_t>(need.partial_floats, 1) * sizeof(float));
  gemv_counters_.resize(std::size_t(std::max(need.num_counters, 1)) * sizeof(unsigned));
  LAZYSCOPE_CUDA_CHECK(cudaMemset(gemv_counters_.as<void>(), 0, gemv_counters_.bytes()));
  gemv_workspace_ = GemvWorkspace{gemv_partial_.as<float>(), need.partial_floats, gemv_counters_.as<unsigned>(),
                                  need.num_counters};
  const std::vector<float> inv = rope_inv_freq(shape.rope, shape.head_dim);
  inv_freq_.resize(inv.size() * sizeof(float));
  upload_f32(inv_freq_, inv.data(), inv.size());
  capacity_tokens_ = 0;
  partial_rows_splits_ = 0;  // head_dim may differ from the last model's
  num_blocks_ = 0;
  block_size_ = 0;
}

void CudaBackend::load(const ModelShape& shape, const WeightsView& w) {
  if (int(w.layers.size()) != shape.num_layers) throw Error("cuda backend: weights have the wrong layer count");
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

// Grows the step buffers; any reallocation drops the graphs (they hold the old addresses).
void CudaBackend::ensure_workspace(int n, int rows_splits) {
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
  if (logits_.bytes() != std::size_t(shape_.vocab_size) * 4) {
    invalidate_graphs();
    logits_.resize(std::size_t(shape_.vocab_size) * 4);
    if (host_logits_ != nullptr) LAZYSCOPE_CUDA_CHECK(cudaFreeHost(host_logits_));
    host_logits_ = nullptr;
    LAZYSCOPE_CUDA_CHECK(cudaMallocHost(reinterpret_cast<void**>(&host_logits_), std::size_t(shape_.vocab_size) * 4));
  }
  if (host_token_ == nullptr) {
    LAZYSCOPE_CUDA_CHECK(cudaMallocHost(reinterpret_cast<void**>(&host_token_), sizeof(int32_t)));
    device_token_.resize(sizeof(int32_t));
    argmax_scratch_.resize(2 * sizeof(unsigned long long));
    LAZYSCOPE_CUDA_CHECK(cudaMemsetAsync(argmax_scratch_.as<void>(), 0, argmax_scratch_.bytes(), stream_));
  }
}

// out[m, n] = x[m, k] @ w[n, k]^T (HF layout), through cuBLAS with fp32 accumulation.
void CudaBackend::gemm(const bf16_bits* x, const bf16_bits* w, int m, int n, int k, void* out, bool out_fp32,
                       bool accumulate) {
  if (m == 1 && k % 8 == 0) {
    // One token: a bandwidth-bound GEMV beats cuBLAS's choice on the narrower projections.
    gemv_bf16(x, w, n, k, out, out_fp32, accumulate, stream_, &gemv_workspace_);
    return;
  }
  const float alpha = 1.0f, beta = accumulate ? 1.0f : 0.0f;
  LAZYSCOPE_CUBLAS_CHECK(cublasGemmEx(cublas_, CUBLAS_OP_T, CUBLAS_OP_N, n, m, k, &alpha, w, CUDA_R_16BF, k, x,
                                      CUDA_R_16BF, k, &beta, out, out_fp32 ? CUDA_R_32F : CUDA_R_16BF, n,
                                      CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
}

void CudaBackend::validate_step(const ForwardStep& step) const {
  if (!loaded_ || num_blocks_ == 0) throw Error("cuda backend: forward before load and allocate_pool");
  const int n = int(step.tokens.size());
  if (n == 0) throw Error("forward: no tokens");
  if (step.positions.size() != step.tokens.size() || step.slots.size() != step.tokens.size()) {
    throw Error("forward: tokens, positions and slots differ in length");
  }
  for (int32_t id : step.tokens) {
    if (id < 0 || id >= shape_.vocab_size) throw Error("forward: token id " + std::to_string(id) + " out of range");
  }
  for (int32_t slot : step.slots) {
    if (slot < 0 || slot >= num_blocks_ * block_size_) throw Error("forward: KV slot out of the pool");
  }
  for (const BlockRef& ref : step.table) {
    if (ref.block < 0 || ref.block >= num_blocks_) throw Error("forward: table block out of the pool");
  }
}

void CudaBackend::forward(const ForwardStep& step, std::vector<float>* logits) {
  const bool want = step.want_logits && logits != nullptr;
  run_step(step, want ? StepOutput::Logits : StepOutput::None, logits);
}

int32_t CudaBackend::forward_greedy(const ForwardStep& step) { return run_step(step, StepOutput::Greedy, nullptr); }

int32_t CudaBackend::run_step(const ForwardStep& step, StepOutput output, std::vector<float>* logits) {
  validate_step(step);
  if (step.tokens.size() == 1) {
    run_decode(step, output);
  } else {
    run_prefill(step, output);
  }
  if (output == StepOutput::None) return -1;
  LAZYSCOPE_CUDA_CHECK(cudaStreamSynchronize(stream_));  // the one sync of a step: its result to the host
  if (output == StepOutput::Greedy) return *host_token_;
  logits->assign(host_logits_, host_logits_ + shape_.vocab_size);
  return -1;
}

void CudaBackend::set_graphs_enabled(bool enabled) {
  if (!enabled) {
    LAZYSCOPE_CUDA_CHECK(cudaStreamSynchronize(stream_));
    invalidate_graphs();
  }
  graphs_enabled_ = enabled;
}

void CudaBackend::set_fused_decode(bool enabled) {
  LAZYSCOPE_CUDA_CHECK(cudaStreamSynchronize(stream_));
  invalidate_graphs();  // the graphs hold the other variant's launches
  fused_decode_ = enabled;
}

void CudaBackend::set_fused_kv_write(bool enabled) {
  LAZYSCOPE_CUDA_CHECK(cudaStreamSynchronize(stream_));
  invalidate_graphs();
  fused_kv_write_ = enabled;
}

void CudaBackend::set_decode_splits_cap(int cap) {
  LAZYSCOPE_CUDA_CHECK(cudaStreamSynchronize(stream_));
  invalidate_graphs();
  decode_splits_cap_ = std::max(0, cap);
}

void CudaBackend::set_programmatic_gemv(bool enabled) {
  LAZYSCOPE_CUDA_CHECK(cudaStreamSynchronize(stream_));
  invalidate_graphs();
  gemv_set_programmatic_launch(enabled);
}

void CudaBackend::invalidate_graphs() {
  for (auto& [key, exec] : graphs_) {
    if (exec != nullptr) LAZYSCOPE_CUDA_CHECK(cudaGraphExecDestroy(exec));
  }
  graphs_.clear();
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

// Fixed decode metadata layout, so a graph's kernels find every per-step value at one address:
// [0] token, [4] position, [8] slot, [16] entry offsets {0, count}, [32] entries (KvEntry).
namespace {
constexpr std::size_t kDecodeTokenAt = 0, kDecodePositionAt = 4, kDecodeSlotAt = 8, kDecodeOffsetsAt = 16,
                      kDecodeEntriesAt = 32;
}  // namespace

void CudaBackend::run_decode(const ForwardStep& step, StepOutput output) {
  const int count = int(step.table.size());
  if (count == 0) throw Error("forward: more new tokens than table entries");
  int splits = decode_num_splits(1, shape_.num_kv_heads, count, sm_count_);
  if (decode_splits_cap_ > 0) splits = std::min(splits, decode_splits_cap_);
  ensure_workspace(1, shape_.num_heads * splits);
  const std::size_t bytes = kDecodeEntriesAt + std::size_t(count) * sizeof(KvEntry);
  unsigned char* meta = stage_meta(bytes);
  std::memset(meta, 0, kDecodeEntriesAt);
  std::memcpy(meta + kDecodeTokenAt, step.tokens.data(), 4);
  std::memcpy(meta + kDecodePositionAt, step.positions.data(), 4);
  std::memcpy(meta + kDecodeSlotAt, step.slots.data(), 4);
  KvEntry* entries = reinterpret_cast<KvEntry*>(meta + kDecodeEntriesAt);
  int key = 0;
  for (int i = 0; i < count; ++i) {
    const BlockRef& ref = step.table[i];
    if (ref.valid < 1 || ref.valid > block_size_) {
      throw Error("cuda attention: table entry " + std::to_string(i) + " (block " + std::to_string(ref.block) +
                  ") has " + std::to_string(ref.valid) + " valid slots");
    }
    if (!step.lazy_rotation && ref.shift != 0) {
      throw Error("cuda attention: shifted block " + std::to_string(ref.block) + " in a plain attention call");
    }
    entries[i] = KvEntry{ref.block, ref.shift, ref.valid, key};
    key += ref.valid;
  }
  const int32_t offsets[2] = {0, count};
  std::memcpy(meta + kDecodeOffsetsAt, offsets, sizeof(offsets));
  upload_meta(bytes);

  // Graphs need every GEMM on the GEMV path (cuBLAS would be captured with its own choices).
  if (!graphs_enabled_ || !gemv_ok_) {
    enqueue_decode(splits, step.lazy_rotation, count, output);
    return;
  }
  const auto key_of_graph = std::make_tuple(splits, step.lazy_rotation, int(output));
  auto found = graphs_.find(key_of_graph);
  if (found == graphs_.end()) {
    cudaGraph_t graph = nullptr;
    LAZYSCOPE_CUDA_CHECK(cudaStreamBeginCapture(stream_, cudaStreamCaptureModeThreadLocal));
    try {
      enqueue_decode(splits, step.lazy_rotation, count, output);
    } catch (...) {
      cudaGraph_t partial = nullptr;
      cudaStreamEndCapture(stream_, &partial);
      if (partial != nullptr) cudaGraphDestroy(partial);
      cudaGetLastError();
      throw;
    }
    LAZYSCOPE_CUDA_CHECK(cudaStreamEndCapture(stream_, &graph));
    cudaGraphExec_t exec = nullptr;
    const cudaError_t status = cudaGraphInstantiate(&exec, graph, 0);
    cudaGraphDestroy(graph);
    LAZYSCOPE_CUDA_CHECK(status);
    found = graphs_.emplace(key_of_graph, exec).first;
    ++graph_captures_;
  }
  LAZYSCOPE_CUDA_CHECK(cudaGraphLaunch(found->second, stream_));
  ++graph_replays_;
}

void CudaBackend::enqueue_decode(int splits, bool lazy, int num_entries, StepOutput output) {
  const int H = shape_.hidden_size, I = shape_.intermediate_size, Q = shape_.q_dim(), K = shape_.kv_dim();
  const int D = shape_.head_dim;
  const unsigned char* meta = step_meta_.as<unsigned char>();
  const int32_t* d_tokens = reinterpret_cast<const int32_t*>(meta + kDecodeTokenAt);
  const int32_t* d_positions = reinterpret_cast<const int32_t*>(meta + kDecodePositionAt);
  const int32_t* d_slots = reinterpret_cast<const int32_t*>(meta + kDecodeSlotAt);
  const int32_t* d_offsets = reinterpret_cast<const int32_t*>(meta + kDecodeOffsetsAt);
  const KvEntry* d_entries = reinterpret_cast<const KvEntry*>(meta + kDecodeEntriesAt);
  float* x = x_.as<float>();
  bf16_bits* h = h_.as<bf16_bits>();
  bf16_bits* qkv = qkv_.as<bf16_bits>();
  bf16_bits* attn = attn_.as<bf16_bits>();
  const int64_t qkv_stride = Q + 2 * K;
  const bool fused = fused_decode_ && gemv_ok_;
  embedding(d_tokens, 1, embed_.as<bf16_bits>(), H, x, stream_);
  for (int l = 0; l < shape_.num_layers; ++l) {
    const LayerWeights& w = layers_[l];
    bf16_bits* k_pool = k_pool_.as<bf16_bits>() + l * layer_pool_elements();
    bf16_bits* v_pool = v_pool_.as<bf16_bits>() + l * layer_pool_elements();
    bool kv_written = false;
    if (fused && fused_kv_write_) {
      QkvRopeOutput qo;
      qo.q = qkv;
      qo.k_pool = k_pool;
      qo.v_pool = v_pool;
      qo.positions = d_positions;
      qo.slots = d_slots;
      qo.inv_freq = inv_freq_.as<float>();
      qo.q_dim = Q;
      qo.kv_dim = K;
      qo.head_dim = D;
      qo.num_kv_heads = shape_.num_kv_heads;
      qo.block_size = block_size_;
      qo.rotate_q = !lazy;
      kv_written = gemv_rmsnorm_qkv_rope(x, w.attn_norm.as<float>(), shape_.rms_norm_eps, w.wqkv.as<bf16_bits>(), H,
                                         qo, stream_, &gemv_workspace_);
    }
    if (!kv_written && fused) {
      gemv_rmsnorm_bf16(x, w.attn_norm.as<float>(), shape_.rms_norm_eps, w.wqkv.as<bf16_bits>(), Q + 2 * K, H, qkv,
                        false, false, stream_, &gemv_workspace_, h);
    } else if (!kv_written) {
      rmsnorm(x, w.attn_norm.as<float>(), 1, H, shape_.rms_norm_eps, h, stream_);
      gemm(h, w.wqkv.as<bf16_bits>(), 1, Q + 2 * K, H, qkv, false, false);
    }
    KvWriteParams kw;
    kw.k = qkv + Q;
    kw.v = qkv + Q + K;
    kw.row_stride = qkv_stride;
    kw.q = lazy ? nullptr : qkv;  // plain attention wants q rotated at its position
    kw.q_row_stride = qkv_stride;
    kw.num_heads = shape_.num_heads;
    kw.positions = d_positions;
    kw.slots = d_slots;
    kw.n = 1;
    kw.num_kv_heads = shape_.num_kv_heads;
    kw.head_dim = D;
    kw.block_size = block_size_;
    kw.inv_freq = inv_freq_.as<float>();
    kw.k_pool = k_pool;
    kw.v_pool = v_pool;
    if (!kv_written) kv_write(kw, stream_);
    DecodeParams ap;
    ap.q = qkv;
    ap.q_row_stride = qkv_stride;
    ap.q_positions = d_positions;
    ap.k_pool = k_pool;
    ap.v_pool = v_pool;
    ap.entries = d_entries;
    ap.seq_entry_offsets = d_offsets;
    ap.batch = 1;
    ap.max_entries = num_entries;  // host-side sizing only: the kernels read the table from d_offsets
    ap.num_heads = shape_.num_heads;
    ap.num_kv_heads = shape_.num_kv_heads;
    ap.head_dim = D;
    ap.block_size = block_size_;
    ap.inv_freq = inv_freq_.as<float>();
    ap.lazy = lazy;
    ap.out = attn;
    ap.num_splits = splits;
    ap.partial_o = partial_o_.as<float>();
    ap.partial_ml = partial_ml_.as<float>();
    decode_attention(ap, stream_);
    gemm(attn, w.wo.as<bf16_bits>(), 1, H, Q, x, true, true);  // x += attn @ wo^T
    if (fused) {
      gemv_rmsnorm_bf16(x, w.mlp_norm.as<float>(), shape_.rms_norm_eps, w.w_gate_up.as<bf16_bits>(), 2 * I, H,
                        gate_up_.as<bf16_bits>(), false, false, stream_, &gemv_workspace_, h);
      gemv_swiglu_bf16(gate_up_.as<bf16_bits>(), w.w_down.as<bf16_bits>(), H, I, x, true, true, stream_,
                       &gemv_workspace_, act_.as<bf16_bits>());  // x += mlp
      continue;
    }
    rmsnorm(x, w.mlp_norm.as<float>(), 1, H, shape_.rms_norm_eps, h, stream_);
    gemm(h, w.w_gate_up.as<bf16_bits>(), 1, 2 * I, H, gate_up_.as<bf16_bits>(), false, false);
    swiglu(gate_up_.as<bf16_bits>(), 1, I, act_.as<bf16_bits>(), stream_);
    gemm(act_.as<bf16_bits>(), w.w_down.as<bf16_bits>(), 1, H, I, x, true, true);  // x += mlp
  }
  enqueue_head(1, output);
}

void CudaBackend::enqueue_head(int n, StepOutput output) {
  if (output == StepOutput::None) return;
  const int H = shape_.hidden_size;
  bf16_bits* h = h_.as<bf16_bits>();
  const float* last = x_.as<float>() + int64_t(n - 1) * H;
  const bf16_bits* head = tied_ ? embed_.as<bf16_bits>() : lm_head_.as<bf16_bits>();
  // The LM head keeps its separate norm: folded in, each of its ~8K CTAs would re-read the
  // residual and the norm weights (a quarter more on-chip traffic for one launch saved).
  rmsnorm(last, final_norm_.as<float>(), 1, H, shape_.rms_norm_eps, h, stream_);
  gemm(h, head, 1, shape_.vocab_size, H, logits_.as<float>(), true, false);
  if (output == StepOutput::Logits) {
    LAZYSCOPE_CUDA_CHECK(cudaMemcpyAsync(host_logits_, logits_.as<float>(), std::size_t(shape_.vocab_size) * 4,
                                         cudaMemcpyDeviceToHost, stream_));
    return;
  }
  argmax(logits_.as<float>(), shape_.vocab_size, device_token_.as<int32_t>(),
         argmax_scratch_.as<unsigned long long>(), stream_);
  LAZYSCOPE_CUDA_CHECK(
      cudaMemcpyAsync(host_token_, device_token_.as<void>(), sizeof(int32_t), cudaMemcpyDeviceToHost, stream_));
}

void CudaBackend::run_prefill(const ForwardStep& step, StepOutput output) {
  const int n = int(step.tokens.size());
  AttentionPlan plan;
  append_sequence(plan, step.table, block_size_, step.lazy_rotation);
  const int total_keys = plan.seq_total_keys[0];
  if (n > total_keys) throw Error("forward: more new tokens than table entries");

  const int H = shape_.hidden_size, I = shape_.intermediate_size, Q = shape_.q_dim(), K = shape_.kv_dim();
  const int D = shape_.head_dim;
  const int splits =
      prefill_num_splits(n, shape_.num_heads, shape_.num_kv_heads, int(plan.tiles.size()), sm_count_);
  // Lazy prefill splits follow the shift runs (see lazy_split_ranges).
  std::vector<int32_t> ranges;
  int num_splits = splits;
  if (step.lazy_rotation) {
    ranges = lazy_split_ranges(plan, 0, splits);
    num_splits = int(ranges.size() / 2);
  }
  ensure_workspace(n, n * shape_.num_heads * num_splits);

  // One upload per step: tokens, positions, slots, entries, tiles.
  host_meta_.clear();
  const std::size_t tokens_at = append_aligned(host_meta_, step.tokens.data(), n);
  const std::size_t positions_at = append_aligned(host_meta_, step.positions.data(), n);
  const std::size_t slots_at = append_aligned(host_meta_, step.slots.data(), n);
  const std::size_t entries_at = append_aligned(host_meta_, plan.entries.data(), plan.entries.size());
  const std::size_t tiles_at = append_aligned(host_meta_, plan.tiles.data(), plan.tiles.size());
  const std::size_t shifts_at = append_aligned(host_meta_, plan.distinct_shifts.data(), plan.distinct_shifts.size());
  const std::size_t tile_shift_at =
      append_aligned(host_meta_, plan.tile_shift_index.data(), plan.tile_shift_index.size());
  const std::size_t ranges_at = append_aligned(host_meta_, ranges.data(), ranges.size());
  const int num_shifts = int(plan.distinct_shifts.size());
  if (step.lazy_rotation) {
    q_rotated_.reserve(lazy_query_workspace_elements(n, shape_.num_heads, shape_.head_dim, num_shifts) * 2);
  }
  std::memcpy(stage_meta(host_meta_.size()), host_meta_.data(), host_meta_.size());
  upload_meta(host_meta_.size());
  unsigned char* meta = step_meta_.as<unsigned char>();
  const int32_t* d_tokens = reinterpret_cast<const int32_t*>(meta + tokens_at);
  const int32_t* d_positions = reinterpret_cast<const int32_t*>(meta + positions_at);
  const int32_t* d_slots = reinterpret_cast<const int32_t*>(meta + slots_at);
  const KvEntry* d_entries = reinterpret_cast<const KvEntry*>(meta + entries_at);
  const KvTile* d_tiles = reinterpret_cast<const KvTile*>(meta + tiles_at);
  const int32_t* d_shifts = reinterpret_cast<const int32_t*>(meta + shifts_at);
  const int32_t* d_tile_shift = reinterpret_cast<const int32_t*>(meta + tile_shift_at);
  const int32_t* d_ranges = reinterpret_cast<const int32_t*>(meta + ranges_at);

  float* x = x_.as<float>();
  bf16_bits* h = h_.as<bf16_bits>();
  bf16_bits* qkv = qkv_.as<bf16_bits>();
  bf16_bits* attn = attn_.as<bf16_bits>();
  const int64_t qkv_stride = Q + 2 * K;
  embedding(d_tokens, n, embed_.as<bf16_bits>(), H, x, stream_);
  for (int l = 0; l < shape_.num_layers; ++l) {
    const LayerWeights& w = layers_[l];
    bf16_bits* k_pool = k_pool_.as<bf16_bits>() + l * layer_pool_elements();
    bf16_bits* v_pool = v_pool_.as<bf16_bits>() + l * layer_pool_elements();
    rmsnorm(x, w.attn_norm.as<float>(), n, H, shape_.rms_norm_eps, h, stream_);
    gemm(h, w.wqkv.as<bf16_bits>(), n, Q + 2 * K, H, qkv, false, false);
    KvWriteParams kw;
    kw.k = qkv + Q;
    kw.v = qkv + Q + K;
    kw.row_stride = qkv_stride;
    // Plain attention wants q rotated at its position (in place); lazy wants it rotated once per
    // distinct shift into q_rotated, done by the same KV-write launch (no separate pre-pass).
    kw.q = qkv;
    kw.q_row_stride = qkv_stride;
    if (step.lazy_rotation) {
      kw.shifts = d_shifts;
      kw.num_shifts = num_shifts;
      kw.q_rotated = q_rotated_.as<bf16_bits>();
    }
    kw.num_heads = shape_.num_heads;
    kw.positions = d_positions;
    kw.slots = d_slots;
    kw.n = n;
    kw.num_kv_heads = shape_.num_kv_heads;
    kw.head_dim = D;
    kw.block_size = block_size_;
    kw.inv_freq = inv_freq_.as<float>();
    kw.k_pool = k_pool;
    kw.v_pool = v_pool;
    kv_write(kw, stream_);
    PrefillParams ap;
    ap.q = qkv;
    ap.q_row_stride = qkv_stride;
    ap.q_positions = d_positions;
    ap.k_pool = k_pool;
    ap.v_pool = v_pool;
    ap.entries = d_entries;
    ap.tiles = d_tiles;
    ap.num_tiles = int(plan.tiles.size());
    ap.n = n;
    ap.prior = total_keys - n;
    ap.num_heads = shape_.num_heads;
    ap.num_kv_heads = shape_.num_kv_heads;
    ap.head_dim = D;
    ap.block_size = block_size_;
    ap.inv_freq = inv_freq_.as<float>();
    ap.lazy = step.lazy_rotation;
    ap.shifts = d_shifts;
    ap.tile_shift_index = d_tile_shift;
    ap.num_shifts = num_shifts;
    ap.q_rotated = step.lazy_rotation ? q_rotated_.as<bf16_bits>() : nullptr;
    ap.split_ranges = step.lazy_rotation ? d_ranges : nullptr;
    ap.q_rotated_ready = step.lazy_rotation;  // filled by kv_write above
    ap.out = attn;
    ap.num_splits = num_splits;
    ap.partial_o = partial_o_.as<float>();
    ap.partial_ml = partial_ml_.as<float>();
    prefill_attention(ap, stream_);
    gemm(attn, w.wo.as<bf16_bits>(), n, H, Q, x, true, true);  // x += attn @ wo^T
    rmsnorm(x, w.mlp_norm.as<float>(), n, H, shape_.rms_norm_eps, h, stream_);
    gemm(h, w.w_gate_up.as<bf16_bits>(), n, 2 * I, H, gate_up_.as<bf16_bits>(), false, false);
    swiglu(gate_up_.as<bf16_bits>(), n, I, act_.as<bf16_bits>(), stream_);
    gemm(act_.as<bf16_bits>(), w.w_down.as<bf16_bits>(), n, H, I, x, true, true);  // x += mlp
  }
  enqueue_head(n, output);
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

#pragma once
// The CUDA backend: the Llama forward in bf16 (fp32 residual stream) with cuBLAS GEMMs (GEMVs at
// one token), the lazy/plain paged attention kernels and a bf16 KV pool. One stream; a step
// synchronises only to read logits or the greedy token back. A one-token step is replayed from a
// CUDA graph captured once per launch signature (splits, lazy, output): every per-step value
// (token, position, slot, block table) is read by the kernels from one device metadata buffer.
#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include <map>
#include <tuple>
#include <vector>

#include "kernels/backend.h"
#include "kernels/cuda/bf16_host.h"
#include "kernels/cuda/device_buffer.h"
#include "kernels/cuda/ops.h"

namespace lazyscope::cuda {

class CudaBackend final : public Backend {
 public:
  CudaBackend();
  ~CudaBackend() override;
  std::string name() const override { return "cuda"; }
  std::string device() const override;
  std::size_t kv_element_bytes() const override { return 2; }
  std::string unsupported_reason(const ModelShape& shape) const override;
  void load(const ModelShape& shape, const WeightsView& weights) override;
  void load_synthetic(const ModelShape& shape, uint64_t seed) override;
  void allocate_pool(int num_blocks, int block_size) override;
  void forward(const ForwardStep& step, std::vector<float>* logits) override;
  // Argmax on the device; only the 4-byte token crosses to the host.
  int32_t forward_greedy(const ForwardStep& step) override;
  void copy_blocks(std::span<const BlockCopy> copies) override;
  void synchronize() override;

  // CUDA graphs for one-token steps: on unless LAZYSCOPE_CUDA_GRAPHS=0 in the environment.
  void set_graphs_enabled(bool enabled);
  bool graphs_enabled() const { return graphs_enabled_; }
  // One-token steps fold RMSNorm and SwiGLU into the GEMVs' input staging (3 fewer launches a
  // layer): on unless LAZYSCOPE_CUDA_FUSE=0.
  void set_fused_decode(bool enabled);
  bool fused_decode() const { return fused_decode_; }
  // With fused decode, the wqkv GEMV also rotates and stores K/V (and q) itself, replacing
  // kv_write in one-token steps: on unless LAZYSCOPE_CUDA_FUSE_KV=0.
  void set_fused_kv_write(bool enabled);
  bool fused_kv_write() const { return fused_kv_write_; }
  // Programmatic dependent launch of the GEMVs (gemv_set_programmatic_launch is process-wide;
  // this also drops this backend's graphs): on unless LAZYSCOPE_CUDA_PDL=0.
  void set_programmatic_gemv(bool enabled);
  // At most this many KV splits in one-token attention (0: decode_num_splits' choice). Run 3:
  // a cap of 16 was 0.8 % (8B) to 4.5 % (SmolLM2) faster than the uncapped 33 (less to merge).
  static constexpr int kDefaultDecodeSplitsCap = 16;
  void set_decode_splits_cap(int cap);
  int graph_captures() const { return graph_captures_; }  // graphs instantiated so far
  int graph_replays() const { return graph_replays_; }    // steps run from a graph

  // Test and benchmark access.
  cudaStream_t stream() const { return stream_; }
  const bf16_bits* k_pool(int layer) const { return k_pool_.as<bf16_bits>() + layer * layer_pool_elements(); }
  const bf16_bits* v_pool(int layer) const { return v_pool_.as<bf16_bits>() + layer * layer_pool_elements(); }
  int64_t layer_pool_elements() const {
    return int64_t(num_blocks_) * block_size_ * shape_.kv_dim();
  }

 private:
  struct LayerWeights {
    DeviceBuffer attn_norm, wqkv, wo, mlp_norm, w_gate_up, w_down;
  };
  enum class StepOutput { None, Logits, Greedy };
  void allocate_weights(const ModelShape& shape);
  void ensure_workspace(int n, int splits_rows);
  void gemm(const bf16_bits* x, const bf16_bits* w, int m, int n, int k, void* out, bool out_fp32, bool accumulate);
  void validate_step(const ForwardStep& step) const;
  // Runs the step; returns the greedy token for StepOutput::Greedy, else -1.
  int32_t run_step(const ForwardStep& step, StepOutput output, std::vector<float>* logits);
  void run_prefill(const ForwardStep& step, StepOutput output);
  void run_decode(const ForwardStep& step, StepOutput output);
  // The one-token forward from the fixed-layout metadata (the body a graph captures).
  void enqueue_decode(int splits, bool lazy, int num_entries, StepOutput output);
  // Final norm, LM head and (Greedy) argmax of token row n - 1, plus the copy to pinned memory.
  void enqueue_head(int n, StepOutput output);
  // Pinned staging of a step's metadata (double-buffered); then one async upload.
  unsigned char* stage_meta(std::size_t bytes);
  void upload_meta(std::size_t bytes);
  void invalidate_graphs();

  cudaStream_t stream_ = nullptr;
  cublasHandle_t cublas_ = nullptr;
  int sm_count_ = 0;
  ModelShape shape_;
  bool loaded_ = false;
  DeviceBuffer embed_, lm_head_, final_norm_, inv_freq_;
  bool tied_ = false;
  std::vector<LayerWeights> layers_;
  int num_blocks_ = 0, block_size_ = 0;
  DeviceBuffer k_pool_, v_pool_;
  // Per-step workspace, grown to the largest step seen.
  int capacity_tokens_ = 0;
  DeviceBuffer x_, h_, qkv_, attn_, gate_up_, act_, logits_;
  DeviceBuffer partial_o_, partial_ml_, q_rotated_;
  std::size_t partial_rows_splits_ = 0;
  DeviceBuffer step_meta_;
  DeviceBuffer copies_;
  std::vector<unsigned char> host_meta_;   // prefill metadata being assembled
  PinnedBuffer staged_meta_[2];            // what the uploads read, alternating
  cudaEvent_t meta_uploaded_[2] = {nullptr, nullptr};
  int meta_slot_ = 0;
  DeviceBuffer gemv_partial_, gemv_counters_;
  GemvWorkspace gemv_workspace_;
  DeviceBuffer device_token_, argmax_scratch_;
  float* host_logits_ = nullptr;  // pinned
  int32_t* host_token_ = nullptr;  // pinned
  // Instantiated decode graphs by (splits, lazy, output); they bake in every buffer address, so
  // any reallocation clears them.
  std::map<std::tuple<int, bool, int>, cudaGraphExec_t> graphs_;
  bool graphs_enabled_ = true;
  bool fused_decode_ = true;
  bool fused_kv_write_ = true;
  int decode_splits_cap_ = kDefaultDecodeSplitsCap;
  bool gemv_ok_ = false;  // every decode GEMM can take the GEMV path (hidden, q and mlp widths % 8)
  int graph_captures_ = 0, graph_replays_ = 0;
};

}  // namespace lazyscope::cuda

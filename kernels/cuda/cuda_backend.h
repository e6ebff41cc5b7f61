#pragma once
// The CUDA backend: the Llama forward in bf16 (fp32 residual stream) with cuBLAS GEMMs, the
// lazy/plain paged attention kernels and a bf16 KV pool. One stream; a step synchronises only
// to read logits back.
#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include <vector>

#include "kernels/backend.h"
#include "kernels/cuda/bf16_host.h"
#include "kernels/cuda/device_buffer.h"

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
  void copy_blocks(std::span<const BlockCopy> copies) override;
  void synchronize() override;

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
  void allocate_weights(const ModelShape& shape);
  void ensure_workspace(int n, int splits_rows);
  void gemm(const bf16_bits* x, const bf16_bits* w, int m, int n, int k, void* out, bool out_fp32, bool accumulate);

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
  std::vector<unsigned char> host_meta_;
  float* host_logits_ = nullptr;  // pinned
};

}  // namespace lazyscope::cuda

#pragma once
// The fast CPU backend (--cpu-precision fast): weights stay in their stored format (GGUF
// quantized blocks; bf16 when every fp32 value is one, else fp32), fused dequantize-and-dot
// kernels with Q8 activations, vectorised lazy attention, one persistent thread pool, buffers
// reused across steps. Same pool layout and semantics as the exact CpuBackend; logits differ
// from it by the activation rounding (bench/cpu_numerics measures by how much).
#include <memory>
#include <vector>

#include "kernels/backend.h"
#include "kernels/cpu/fast_attention.h"
#include "kernels/cpu/quant_matmul.h"
#include "kernels/cpu/thread_pool.h"

namespace lazyscope {

class CpuFastBackend final : public Backend {
 public:
  explicit CpuFastBackend(int threads = 0);
  std::string name() const override { return "cpu"; }
  std::string device() const override;
  std::size_t kv_element_bytes() const override { return sizeof(float); }
  void load(const ModelShape& shape, const WeightsView& weights) override;
  // Random weights quantized like the default model: Q4_1 layers, Q8_0 embeddings.
  void load_synthetic(const ModelShape& shape, uint64_t seed) override;
  void allocate_pool(int num_blocks, int block_size) override;
  void forward(const ForwardStep& step, std::vector<float>* logits) override;
  void copy_blocks(std::span<const BlockCopy> copies) override;

  const std::vector<float>& k_pool(int layer) const { return k_pool_[layer]; }
  // The format each layer matrix runs in (tests, the bench's header line).
  WeightFormat layer_format() const { return layers_.empty() ? WeightFormat::F32 : layers_[0].wq.format; }

 private:
  struct Layer {
    const float* attn_norm = nullptr;
    const float* mlp_norm = nullptr;
    PackedMatrix wq, wk, wv, wo, w_gate, w_up, w_down;
  };
  struct Job {
    const PackedMatrix* w;
    const cpu::MatmulInput* in;
    float* out;
  };
  PackedMatrix adopt(const PackedMatrix& packed, const float* fp32, int rows, int cols, const char* what);
  void run_matmuls(std::initializer_list<Job> jobs);
  static constexpr int kChunksPerThread = 4;
  void rmsnorm_quantize(const float* x, const float* weight, int n, float* out, cpu::MatmulInput& in);
  void ensure_buffers(int n);

  int threads_;
  std::unique_ptr<cpu::ThreadPool> pool_;
  cpu::Isa isa_;
  ModelShape shape_;
  std::vector<Layer> layers_;
  const float* final_norm_ = nullptr;
  PackedMatrix embed_, lm_head_;
  std::vector<std::vector<uint8_t>> owned_;  // matrices this backend converted (bf16, synthetic)
  std::vector<float> synthetic_norms_;
  cpu::RopeTable rope_;
  int num_blocks_ = 0;
  int block_size_ = 0;
  std::vector<std::vector<float>> k_pool_, v_pool_;
  // Step buffers, grown to the largest step seen and then reused.
  int capacity_ = 0;
  std::vector<float> x_, h_, q_, k_, v_, attn_, o_, gate_, up_;
  cpu::MatmulInput in_h_, in_attn_, in_act_;
};

}  // namespace lazyscope

#pragma once
// The exact fp32 CPU reference backend.
#include <vector>

#include "kernels/backend.h"
#include "kernels/random_weights.h"

namespace lazyscope {

class CpuBackend final : public Backend {
 public:
  explicit CpuBackend(int threads = 0);
  std::string name() const override { return "cpu"; }
  std::string device() const override;
  std::size_t kv_element_bytes() const override { return sizeof(float); }
  void load(const ModelShape& shape, const WeightsView& weights) override;
  void load_synthetic(const ModelShape& shape, uint64_t seed) override;
  void allocate_pool(int num_blocks, int block_size) override;
  void forward(const ForwardStep& step, std::vector<float>* logits) override;
  void copy_blocks(std::span<const BlockCopy> copies) override;

  // Test access to the pool of one layer.
  const std::vector<float>& k_pool(int layer) const { return k_pool_[layer]; }
  const std::vector<float>& v_pool(int layer) const { return v_pool_[layer]; }

 private:
  int threads_;
  ModelShape shape_;
  WeightsView weights_;
  HostWeights synthetic_;  // owns weights made by load_synthetic
  std::vector<float> inv_freq_;
  int num_blocks_ = 0;
  int block_size_ = 0;
  std::vector<std::vector<float>> k_pool_, v_pool_;
};

}  // namespace lazyscope

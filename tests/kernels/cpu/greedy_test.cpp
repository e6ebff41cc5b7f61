// Backend::forward_greedy's default (used by the CPU backend): the argmax of the step's logits,
// first index on ties, with want_logits ignored.
#include <gtest/gtest.h>

#include <algorithm>
#include <vector>

#include "kernels/backend.h"
#include "kernels/cpu/cpu_backend.h"
#include "kernels/random_weights.h"

namespace lazyscope {
namespace {

ModelShape small_shape() {
  ModelShape s;
  s.vocab_size = 64;
  s.hidden_size = 32;
  s.intermediate_size = 64;
  s.num_layers = 1;
  s.num_heads = 4;
  s.num_kv_heads = 2;
  s.head_dim = 8;
  return s;
}

TEST(ForwardGreedy, CpuBackendReturnsTheArgmaxOfTheLogits) {
  const ModelShape shape = small_shape();
  HostWeights w = random_host_weights(shape, 3, {0.2f, false});
  CpuBackend cpu(1);
  cpu.load(shape, w.view);
  cpu.allocate_pool(4, 8);
  std::vector<int32_t> tokens{5, 9, 17}, positions{0, 1, 2}, slots{0, 1, 2};
  std::vector<BlockRef> table{{0, 0, 3}};
  ForwardStep step{tokens, positions, slots, table, false, false};
  const int32_t greedy = cpu.forward_greedy(step);  // want_logits false: still computes them
  std::vector<float> logits;
  step.want_logits = true;
  cpu.forward(step, &logits);
  ASSERT_EQ(logits.size(), std::size_t(shape.vocab_size));
  EXPECT_EQ(greedy, int32_t(std::max_element(logits.begin(), logits.end()) - logits.begin()));
}

// A stub backend with fixed logits pins down the tie rule of the default.
class FixedLogitsBackend final : public Backend {
 public:
  explicit FixedLogitsBackend(std::vector<float> logits) : logits_(std::move(logits)) {}
  std::string name() const override { return "fixed"; }
  std::string device() const override { return "none"; }
  std::size_t kv_element_bytes() const override { return 4; }
  void load(const ModelShape&, const WeightsView&) override {}
  void allocate_pool(int, int) override {}
  void forward(const ForwardStep& step, std::vector<float>* logits) override {
    saw_want_logits = step.want_logits;
    if (step.want_logits && logits != nullptr) *logits = logits_;
  }
  void copy_blocks(std::span<const BlockCopy>) override {}
  bool saw_want_logits = false;

 private:
  std::vector<float> logits_;
};

TEST(ForwardGreedy, DefaultPicksTheFirstOfEqualMaxima) {
  FixedLogitsBackend backend({0.5f, 2.0f, -1.0f, 2.0f, 1.9f});
  ForwardStep step;
  EXPECT_EQ(backend.forward_greedy(step), 1);
  EXPECT_TRUE(backend.saw_want_logits);
}

}  // namespace
}  // namespace lazyscope

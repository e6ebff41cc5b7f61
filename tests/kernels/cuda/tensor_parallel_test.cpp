// Tensor parallelism: the TP path at one NCCL rank against the plain CUDA backend (bit for bit,
// every output of a scenario with prefill, lazy reuse at a shift, graph and eager decode, a
// batched step and a materialized copy), the same at two ranks (within bf16 rounding), and the
// --tp range checks.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "backend_harness.h"
#include "base/error.h"
#include "gpu_test_util.h"
#include "kernels/cuda/cuda_backend.h"
#include "kernels/cuda/tensor_parallel_backend.h"
#include "kernels/synthetic_shapes.h"

namespace lazyscope::cuda {
namespace {

using test::random_tokens;

#define LAZYSCOPE_REQUIRE_GPUS(n)                                                       \
  do {                                                                                  \
    if (::lazyscope::cuda::device_count() < (n)) {                                      \
      GTEST_SKIP() << "needs " << (n) << " GPUs (" << ::lazyscope::cuda::device_count() \
                   << " visible): "                                                     \
                   << "skipped, not passed";                                            \
    }                                                                                   \
  } while (0)

constexpr int kBlock = 16;

// Every output the scenario produced, in order: logits rows and greedy tokens.
struct Outputs {
  std::vector<std::vector<float>> logits;
  std::vector<int32_t> tokens;
};

ForwardStep make_step(const std::vector<int32_t>& tokens, std::vector<int32_t>& positions,
                      std::vector<int32_t>& slots, const std::vector<BlockRef>& table,
                      int first_position, int first_slot, bool lazy) {
  positions.resize(tokens.size());
  slots.resize(tokens.size());
  for (std::size_t i = 0; i < tokens.size(); ++i) {
    positions[i] = first_position + int(i);
    slots[i] = first_slot + int(i);
  }
  ForwardStep step;
  step.tokens = tokens;
  step.positions = positions;
  step.slots = slots;
  step.table = table;
  step.lazy_rotation = lazy;
  step.want_logits = true;
  return step;
}

// Blocks first.. holding n tokens contiguously.
std::vector<BlockRef> blocks_of(int first, int n, int shift) {
  std::vector<BlockRef> out;
  for (int b = 0; b * kBlock < n; ++b)
    out.push_back(BlockRef{first + b, shift, std::min(kBlock, n - b * kBlock)});
  return out;
}

// A prefix (blocks 0..), a document encoded at 0 (blocks 8..) and reused after the prefix at a
// shift (lazy), then decode (logits, greedy with graphs, greedy eager), a batched step of two
// sequences, and the document materialized at its shift (blocks 16..) under plain attention.
Outputs run_scenario(Backend& backend, const ModelShape& shape) {
  backend.allocate_pool(64, kBlock);
  Outputs out;
  std::vector<float> logits;
  std::vector<int32_t> positions, slots;
  const std::vector<int32_t> prefix = random_tokens(40, shape.vocab_size, 11);
  const std::vector<int32_t> document = random_tokens(32, shape.vocab_size, 12);
  const std::vector<int32_t> query = random_tokens(9, shape.vocab_size, 13);
  const int shift = int(prefix.size());
  const std::vector<BlockRef> prefix_blocks = blocks_of(0, int(prefix.size()), 0);
  backend.forward(make_step(prefix, positions, slots, prefix_blocks, 0, 0, false), &logits);
  out.logits.push_back(logits);
  backend.forward(make_step(document, positions, slots, blocks_of(8, int(document.size()), 0), 0,
                            8 * kBlock, false),
                  &logits);
  out.logits.push_back(logits);
  // The query after the prefix and the document at its shift, in blocks 12..
  std::vector<BlockRef> table = prefix_blocks;
  for (const BlockRef& b : blocks_of(8, int(document.size()), shift)) table.push_back(b);
  const int query_position = shift + int(document.size());
  for (const BlockRef& b : blocks_of(12, int(query.size()), 0)) table.push_back(b);
  backend.forward(make_step(query, positions, slots, table, query_position, 12 * kBlock, true),
                  &logits);
  out.logits.push_back(logits);
  // Decode: one token at a time into block 12's free slots.
  int position = query_position + int(query.size());
  int slot = 12 * kBlock + int(query.size());
  int32_t token = int32_t(std::max_element(logits.begin(), logits.end()) - logits.begin());
  for (int i = 0; i < 4; ++i) {
    table.back().valid += 1;
    const std::vector<int32_t> one{token};
    const ForwardStep step = make_step(one, positions, slots, table, position, slot, true);
    if (i == 0) {
      backend.forward(step, &logits);
      out.logits.push_back(logits);
      token = int32_t(std::max_element(logits.begin(), logits.end()) - logits.begin());
    } else {
      if (i == 3) backend.next_decode_without_graph();
      token = backend.forward_greedy(step);
    }
    out.tokens.push_back(token);
    ++position;
    ++slot;
  }
  // A batched step: the lazy sequence and the prefix alone (its next token in block 3).
  std::vector<BlockRef> second = prefix_blocks;
  second.push_back(BlockRef{3, 0, 1});
  table.back().valid += 1;
  const std::vector<int32_t> first_token{token}, second_token{prefix[0]};
  std::vector<int32_t> p1, s1, p2, s2;
  const ForwardStep steps[2] = {
      make_step(first_token, p1, s1, table, position, slot, true),
      make_step(second_token, p2, s2, second, int(prefix.size()), 3 * kBlock, false)};
  backend.forward_batch(steps, &logits);
  out.logits.push_back(logits);
  int32_t batch_tokens[2] = {0, 0};
  backend.forward_batch_greedy(steps, batch_tokens);  // rewrites the same slots with the same K/V
  out.tokens.insert(out.tokens.end(), batch_tokens, batch_tokens + 2);
  // Materialized: the document's blocks copied to 16.. rotated by the shift, then plain attention.
  std::vector<BlockCopy> copies;
  for (const BlockRef& b : blocks_of(8, int(document.size()), 0))
    copies.push_back(BlockCopy{b.block, b.block + 8, shift, b.valid});
  backend.copy_blocks(copies);
  std::vector<BlockRef> plain = prefix_blocks;
  for (const BlockRef& b : blocks_of(16, int(document.size()), 0)) plain.push_back(b);
  for (const BlockRef& b : blocks_of(20, int(query.size()), 0)) plain.push_back(b);
  backend.forward(make_step(query, positions, slots, plain, query_position, 20 * kBlock, false),
                  &logits);
  out.logits.push_back(logits);
  backend.synchronize();
  return out;
}

// A tensor-parallel rank's residual is all-reduced between a layer's GEMVs, so ranks never take the
// persistent layer kernel; the plain backend here launches what a rank launches.
Outputs run_plain(const ModelShape& shape, bool synthetic, const HostWeights* weights) {
  CudaTuning tuning;
  tuning.decode_layer_kernel = false;
  CudaBackend backend(tuning);
  if (synthetic) {
    backend.load_synthetic(shape, 5);
  } else {
    backend.load(shape, weights->view);
  }
  return run_scenario(backend, shape);
}

Outputs run_tensor_parallel(int ranks, const ModelShape& shape, bool synthetic,
                            const HostWeights* weights) {
  TensorParallelBackend backend(ranks);
  if (synthetic) {
    backend.load_synthetic(shape, 5);
  } else {
    backend.load(shape, weights->view);
  }
  return run_scenario(backend, shape);
}

struct TpCase {
  const char* name;
  bool synthetic;  // weights made on each GPU per shard, else uploaded from host fp32
};

class TensorParallelOneRank : public testing::TestWithParam<TpCase> {};

// At one rank the TP path (NCCL all-reduce and all-gather of one rank, the sharded weight
// loaders, rank 0 owning the residual) computes exactly what the plain backend computes.
TEST_P(TensorParallelOneRank, MatchesThePlainBackendBitForBit) {
  LAZYSCOPE_REQUIRE_GPU();
  const ModelShape shape = synthetic_shape(GetParam().name);
  const HostWeights weights = test::random_weights(shape, 9);
  const Outputs plain = run_plain(shape, GetParam().synthetic, &weights);
  const Outputs tp = run_tensor_parallel(1, shape, GetParam().synthetic, &weights);
  ASSERT_EQ(plain.logits.size(), tp.logits.size());
  for (std::size_t i = 0; i < plain.logits.size(); ++i) {
    ASSERT_EQ(plain.logits[i].size(), tp.logits[i].size()) << "output " << i;
    std::size_t differ = 0;
    for (std::size_t j = 0; j < plain.logits[i].size(); ++j)
      differ += plain.logits[i][j] != tp.logits[i][j];
    EXPECT_EQ(differ, 0u) << "output " << i << ": " << differ << " of " << plain.logits[i].size()
                          << " logits differ";
  }
  EXPECT_EQ(plain.tokens, tp.tokens);
}

INSTANTIATE_TEST_SUITE_P(Shapes, TensorParallelOneRank,
                         testing::Values(TpCase{"tiny", true}, TpCase{"tiny", false},
                                         TpCase{"small", true}, TpCase{"small", false}),
                         [](const testing::TestParamInfo<TpCase>& info) {
                           return std::string(info.param.name) +
                                  (info.param.synthetic ? "Synthetic" : "Uploaded");
                         });

// Two ranks: each holds half the heads, MLP columns and vocabulary; the partial sums are added in
// another order, so the logits agree within bf16 rounding rather than bit for bit.
TEST(TensorParallelTwoRanks, MatchesOneGpuWithinBf16Rounding) {
  LAZYSCOPE_REQUIRE_GPUS(2);
  for (const char* name : {"tiny", "small"}) {
    SCOPED_TRACE(name);
    const ModelShape shape = synthetic_shape(name);
    const Outputs plain = run_plain(shape, true, nullptr);
    const Outputs tp = run_tensor_parallel(2, shape, true, nullptr);
    ASSERT_EQ(plain.logits.size(), tp.logits.size());
    for (std::size_t i = 0; i < plain.logits.size(); ++i) {
      EXPECT_LT(test::relative_error(tp.logits[i], plain.logits[i]), 2e-2) << "output " << i;
    }
  }
}

// The 70B shape made shard by shard on two GPUs (never whole on the host), then decoded.
TEST(TensorParallelTwoRanks, SeventyBShapeRunsFromShardsMadeOnEachGpu) {
  LAZYSCOPE_REQUIRE_GPUS(2);
  const ModelShape shape = synthetic_shape("llama-3.1-70b");
  TensorParallelBackend backend(2);
  ASSERT_EQ(backend.unsupported_reason(shape), "");
  backend.load_synthetic(shape, 1);
  backend.allocate_pool(16, kBlock);
  std::vector<float> logits;
  std::vector<int32_t> positions, slots;
  const std::vector<int32_t> prompt = random_tokens(20, shape.vocab_size, 3);
  backend.forward(make_step(prompt, positions, slots, blocks_of(0, 20, 0), 0, 0, false), &logits);
  ASSERT_EQ(logits.size(), std::size_t(shape.vocab_size));
  for (float v : logits) ASSERT_TRUE(std::isfinite(v));
}

TEST(TensorParallel, SizesOutsideTheGpusOfThisMachineAreRefused) {
  const int gpus = device_count();
  for (int ranks : {0, gpus + 1}) {
    try {
      TensorParallelBackend backend(ranks);
      ADD_FAILURE() << "--tp " << ranks << " was accepted with " << gpus << " GPUs";
    } catch (const Error& e) {
      const std::string what = e.what();
      const bool explained = what.find("compiled out") != std::string::npos ||
                             what.find("must be 1.." + std::to_string(gpus)) != std::string::npos;
      EXPECT_TRUE(explained) << what;
      EXPECT_NE(what.find("--tp " + std::to_string(ranks)), std::string::npos) << what;
    }
  }
}

}  // namespace
}  // namespace lazyscope::cuda

// Tensor-parallel shard math: which heads, KV heads, MLP columns and vocabulary rows each rank
// owns, that the ranks cover every dimension exactly once, and that uneven splits are refused.
#include "kernels/tensor_shard.h"

#include <gtest/gtest.h>

#include <string>

#include "base/error.h"
#include "kernels/synthetic_shapes.h"

namespace lazyscope {
namespace {

TEST(TensorShard, SeventyBAtTwoRanksSplitsEveryDimensionInHalves) {
  const ModelShape shape = synthetic_shape("llama-3.1-70b");
  ASSERT_EQ(tensor_split_error(shape, 2), "");
  const TensorShard second = tensor_shard(shape, 2, 1);
  EXPECT_EQ(second.heads.begin, 32);
  EXPECT_EQ(second.heads.count, 32);
  EXPECT_EQ(second.kv_heads.begin, 4);
  EXPECT_EQ(second.kv_heads.count, 4);
  EXPECT_EQ(second.intermediate.begin, 14336);
  EXPECT_EQ(second.intermediate.count, 14336);
  EXPECT_EQ(second.vocab.begin, 64128);
  EXPECT_EQ(second.vocab.end(), 128256);
  const ModelShape local = shard_shape(shape, second);
  EXPECT_EQ(local.num_heads, 32);
  EXPECT_EQ(local.num_kv_heads, 4);
  EXPECT_EQ(local.intermediate_size, 14336);
  EXPECT_EQ(local.vocab_size, 64128);
  EXPECT_EQ(local.hidden_size, 8192);  // the residual stream stays whole on every rank
  EXPECT_EQ(local.num_layers, 80);
  EXPECT_EQ(local.q_dim(), 32 * 128);
  EXPECT_EQ(local.kv_dim(), 4 * 128);
}

// Every rank's ranges are contiguous, in rank order and together cover each dimension once; a
// rank's query heads use only its own KV heads (GQA groups never straddle two GPUs).
TEST(TensorShard, RanksCoverEachDimensionOnceAndKeepGqaGroupsTogether) {
  for (const char* name : {"tiny", "small", "llama-3.1-8b", "llama-3.1-70b"}) {
    const ModelShape shape = synthetic_shape(name);
    for (int ranks : {1, 2}) {
      SCOPED_TRACE(std::string(name) + " at " + std::to_string(ranks) + " ranks");
      ASSERT_EQ(tensor_split_error(shape, ranks), "");
      int heads = 0, kv_heads = 0, intermediate = 0, vocab = 0;
      for (int r = 0; r < ranks; ++r) {
        const TensorShard s = tensor_shard(shape, ranks, r);
        EXPECT_EQ(s.rank, r);
        EXPECT_EQ(s.ranks, ranks);
        EXPECT_EQ(s.heads.begin, heads);
        EXPECT_EQ(s.kv_heads.begin, kv_heads);
        EXPECT_EQ(s.intermediate.begin, intermediate);
        EXPECT_EQ(s.vocab.begin, vocab);
        heads = s.heads.end();
        kv_heads = s.kv_heads.end();
        intermediate = s.intermediate.end();
        vocab = s.vocab.end();
        const int group = shape.num_heads / shape.num_kv_heads;
        for (int h = s.heads.begin; h < s.heads.end(); ++h) {
          EXPECT_GE(h / group, s.kv_heads.begin);
          EXPECT_LT(h / group, s.kv_heads.end());
        }
      }
      EXPECT_EQ(heads, shape.num_heads);
      EXPECT_EQ(kv_heads, shape.num_kv_heads);
      EXPECT_EQ(intermediate, shape.intermediate_size);
      EXPECT_EQ(vocab, shape.vocab_size);
    }
  }
  // The 8B shape at 8 ranks: one KV head and its four query heads a GPU.
  const TensorShard last = tensor_shard(synthetic_shape("llama-3.1-8b"), 8, 7);
  EXPECT_EQ(last.heads.begin, 28);
  EXPECT_EQ(last.heads.count, 4);
  EXPECT_EQ(last.kv_heads.begin, 7);
  EXPECT_EQ(last.kv_heads.count, 1);
  EXPECT_EQ(last.vocab.count, 128256 / 8);
}

void expect_refused(const ModelShape& shape, int ranks, const std::string& sentence) {
  SCOPED_TRACE(ranks);
  const std::string why = tensor_split_error(shape, ranks);
  EXPECT_NE(why.find(sentence), std::string::npos) << why;
  try {
    tensor_shard(shape, ranks, 0);
    ADD_FAILURE() << "an uneven split was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(sentence), std::string::npos) << e.what();
  }
}

TEST(TensorShard, UnevenSplitsAreRefusedNamingTheDimension) {
  const ModelShape seventy = synthetic_shape("llama-3.1-70b");
  expect_refused(seventy, 3, "query heads (64) do not split evenly over 3 GPUs (1 left over)");
  expect_refused(seventy, 16, "KV heads (8) do not split evenly over 16 GPUs (8 left over)");
  ModelShape odd_mlp = synthetic_shape("tiny");  // 4 heads, 2 KV heads, 192 MLP columns, 512 words
  odd_mlp.intermediate_size = 190;
  expect_refused(odd_mlp, 4, "KV heads (2) do not split evenly over 4 GPUs");
  EXPECT_EQ(tensor_split_error(odd_mlp, 2), "");
  odd_mlp.intermediate_size = 191;
  expect_refused(odd_mlp, 2,
                 "intermediate size (191) do not split evenly over 2 GPUs (1 left over)");
  ModelShape gpt2_vocab = synthetic_shape("tiny");
  gpt2_vocab.vocab_size = 50257;
  expect_refused(gpt2_vocab, 2, "vocabulary (50257) do not split evenly over 2 GPUs (1 left over)");
  expect_refused(seventy, 0, "tensor parallel size 0 is below 1");
}

TEST(TensorShard, RankOutsideTheGroupIsRefused) {
  const ModelShape shape = synthetic_shape("small");
  EXPECT_THROW(tensor_shard(shape, 2, 2), Error);
  EXPECT_THROW(tensor_shard(shape, 2, -1), Error);
}

}  // namespace
}  // namespace lazyscope

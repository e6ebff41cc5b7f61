// A tiny complete Llama GGUF written by the `gguf` Python package loads into LoadedModel with
// HF-layout weights; broken models give clear errors; the installed SmolLM2 loads when present.
#include "engine/model/gguf_loader.h"

#include <gtest/gtest.h>

#include <cstring>
#include <numeric>

#include "engine/model/gguf_test_util.h"
#include "engine/model/model_registry.h"
#include "base/error.h"

namespace lazyscope {
namespace {

using testing_gguf::shell_quoted;

std::vector<float> read_floats(const std::filesystem::path& path) {
  const std::string bytes = testing_gguf::read_text(path);
  std::vector<float> values(bytes.size() / sizeof(float));
  std::memcpy(values.data(), bytes.data(), values.size() * sizeof(float));
  return values;
}

class GgufLoaderTest : public ::testing::Test {
 protected:
  void SetUp() override { dir_ = testing_gguf::scratch_dir("loader"); }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::filesystem::path make(const std::string& options, const std::string& name = "tiny.gguf") {
    const auto path = dir_ / name;
    EXPECT_TRUE(testing_gguf::run_fixture("llama " + shell_quoted(path) + " " + shell_quoted(dir_) +
                                          " " + options));
    return path;
  }
  void expect_error(const std::string& options, std::vector<std::string> fragments) {
    const auto path = make(options, "bad.gguf");
    try {
      load_gguf_model(path);
      ADD_FAILURE() << "no error for " << options;
    } catch (const Error& e) {
      const std::string message = e.what();
      EXPECT_NE(message.find(path.string()), std::string::npos) << message;
      for (const auto& fragment : fragments) {
        EXPECT_NE(message.find(fragment), std::string::npos) << fragment << " not in: " << message;
      }
    }
  }
  std::filesystem::path dir_;
};

TEST(GgufPermute, UnpermuteInvertsLlamaCppsPermutation) {
  const int heads = 3, head_dim = 8, cols = 5;
  std::vector<float> original(std::size_t(heads * head_dim * cols));
  std::iota(original.begin(), original.end(), 0.0f);
  std::vector<float> weight = original;
  gguf_permute_qk_rows(weight, heads, head_dim, cols);
  EXPECT_NE(weight, original);
  // Row 1 of head 0 in GGUF order is HF row head_dim / 2 (the partner of row 0).
  EXPECT_EQ(weight[std::size_t(1 * cols)], original[std::size_t(head_dim / 2 * cols)]);
  gguf_unpermute_qk_rows(weight, heads, head_dim, cols);
  EXPECT_EQ(weight, original);
}

TEST_F(GgufLoaderTest, LoadsTinyLlamaWithHfLayout) {
  double last_fraction = -1;
  const auto path = make("--pre smollm");
  const LoadedModel model = load_gguf_model(path, [&](double fraction, std::string_view) {
    EXPECT_GE(fraction, last_fraction);
    last_fraction = fraction;
  });
  EXPECT_EQ(last_fraction, 1.0);
  const ModelShape& s = model.config.shape;
  EXPECT_EQ(s.vocab_size, 420);
  EXPECT_EQ(s.hidden_size, 64);
  EXPECT_EQ(s.intermediate_size, 96);
  EXPECT_EQ(s.num_layers, 2);
  EXPECT_EQ(s.num_heads, 4);
  EXPECT_EQ(s.num_kv_heads, 2);
  EXPECT_EQ(s.head_dim, 16);
  EXPECT_FLOAT_EQ(s.rms_norm_eps, 1e-6f);
  EXPECT_FLOAT_EQ(s.rope.theta, 10000.0f);
  EXPECT_FALSE(s.rope.llama3);
  EXPECT_FALSE(s.tie_word_embeddings);
  EXPECT_EQ(model.config.max_position_embeddings, 256);
  EXPECT_EQ(model.config.bos_token_id, 1);
  EXPECT_EQ(model.config.eos_token_ids, std::vector<int32_t>{2});
  EXPECT_NE(model.chat_template.find("<|im_start|>"), std::string::npos);
  EXPECT_EQ(model.identity.rfind("gguf:", 0), 0u);
  EXPECT_EQ(model.tokenizer.vocab_size(), 420);

  ASSERT_EQ(model.weights.layers.size(), 2u);
  EXPECT_EQ(model.weights.embed.size(), 420u * 64u);
  EXPECT_EQ(model.weights.lm_head.size(), 420u * 64u);
  EXPECT_EQ(model.weights.layers[1].w_down.size(), 64u * 96u);
  // q and k come back in HF's half-split layout, exactly (they were stored as F32).
  EXPECT_EQ(model.weights.layers[0].wq, read_floats(dir_ / "q0.bin"));
  EXPECT_EQ(model.weights.layers[0].wk, read_floats(dir_ / "k0.bin"));
  const WeightsView view = model.weights.view();
  EXPECT_EQ(view.lm_head, model.weights.lm_head.data());

  // The identity is stable across loads of the same file.
  EXPECT_EQ(load_gguf_model(path).identity, model.identity);
}

TEST_F(GgufLoaderTest, TiedEmbeddingsAndLlama3RopeScaling) {
  const LoadedModel model = load_gguf_model(make("--tied --llama3-rope --pre llama-bpe"));
  EXPECT_TRUE(model.config.shape.tie_word_embeddings);
  EXPECT_TRUE(model.weights.lm_head.empty());
  EXPECT_EQ(model.weights.view().lm_head, model.weights.embed.data());
  const RopeParams& rope = model.config.shape.rope;
  EXPECT_TRUE(rope.llama3);
  EXPECT_FLOAT_EQ(rope.theta, 500000.0f);
  EXPECT_FLOAT_EQ(rope.factor, 32.0f);
  EXPECT_FLOAT_EQ(rope.low_freq_factor, 1.0f);
  EXPECT_FLOAT_EQ(rope.high_freq_factor, 4.0f);
  EXPECT_EQ(rope.original_max_position, 8192);
}

TEST_F(GgufLoaderTest, BrokenModelsGiveClearErrors) {
  expect_error("--flaw=arch", {"architecture 'gpt2'", "not supported"});
  expect_error("--flaw=ffn", {"blk.0.ffn_gate.weight", "shape", "metadata implies"});
  expect_error("--flaw=drop", {"blk.1.ffn_up.weight", "missing"});
  expect_error("--flaw=extra", {"blk.0.attn_q.bias", "unexpected"});
  expect_error("--pre no-such-pre", {"tokenizer.ggml.pre 'no-such-pre'", "not a supported"});
}

TEST(GgufDefaultModel, InstalledSmolLM2LoadsWithItsPublishedShape) {
  const auto path = default_model_path();
  if (!path) GTEST_SKIP() << "SmolLM2 is not installed (scripts/install_default_model.sh)";
  const LoadedModel model = load_gguf_model(*path);
  const ModelShape& s = model.config.shape;
  EXPECT_EQ(s.num_layers, 30);
  EXPECT_EQ(s.hidden_size, 576);
  EXPECT_EQ(s.intermediate_size, 1536);
  EXPECT_EQ(s.num_heads, 9);
  EXPECT_EQ(s.num_kv_heads, 3);
  EXPECT_EQ(s.head_dim, 64);
  EXPECT_EQ(s.vocab_size, 49152);
  EXPECT_FLOAT_EQ(s.rope.theta, 100000.0f);
  EXPECT_TRUE(s.tie_word_embeddings);
  EXPECT_FALSE(model.tokenizer.add_bos());
  EXPECT_NE(model.chat_template.find("<|im_start|>"), std::string::npos);
  EXPECT_EQ(model.tokenizer.encode("<|im_start|>"), std::vector<int32_t>{1});
  for (float v : model.weights.layers[29].w_down) ASSERT_TRUE(std::isfinite(v));
}

}  // namespace
}  // namespace lazyscope

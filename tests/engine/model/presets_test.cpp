// Built-in presets and write_model_checkpoint: deterministic, complete, loadable checkpoints.
#include "engine/model/presets.h"

#include <gtest/gtest.h>

#include <cmath>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "engine/model/config.h"
#include "engine/model/hf_checkpoint.h"
#include "engine/model/model_loader.h"
#include "base/error.h"
#include "kernels/synthetic_shapes.h"
#include "model_test_util.h"

namespace lazyscope {
namespace {

using testing::read_bytes;
using testing::ScratchDir;

std::filesystem::path text_dir() {
  return std::filesystem::path(LAZYSCOPE_SOURCE_DIR) / "resources" / "text";
}

CheckpointWriteOptions options(TensorDtype dtype = TensorDtype::BF16) {
  CheckpointWriteOptions o;
  o.dtype = dtype;
  o.text_dir = text_dir();
  return o;
}

uint64_t parameter_count(const ModelShape& shape) {
  uint64_t params = 0;
  for (const HfTensorSpec& s : llama_tensor_specs(shape)) {
    uint64_t n = 1;
    for (int64_t d : s.shape) n *= uint64_t(d);
    params += n;
  }
  return params;
}

TEST(Presets, ShapesComeFromTheOneCatalogue) {
  for (const ModelPreset& p : model_presets()) {
    const ModelShape c = synthetic_shape(p.name);
    EXPECT_EQ(p.shape.vocab_size, c.vocab_size) << p.name;
    EXPECT_EQ(p.shape.hidden_size, c.hidden_size) << p.name;
    EXPECT_EQ(p.shape.intermediate_size, c.intermediate_size) << p.name;
    EXPECT_EQ(p.shape.num_layers, c.num_layers) << p.name;
    EXPECT_EQ(p.shape.num_kv_heads, c.num_kv_heads) << p.name;
    EXPECT_EQ(p.shape.rope.theta, c.rope.theta) << p.name;
    EXPECT_EQ(p.shape.tie_word_embeddings, c.tie_word_embeddings) << p.name;
  }
}

TEST(Presets, CatalogueHasLlama70B) {
  const ModelShape s = synthetic_shape("llama-3.1-70b");
  EXPECT_EQ(s.num_layers, 80);
  EXPECT_EQ(s.num_heads, 64);
  EXPECT_EQ(s.num_kv_heads, 8);
  EXPECT_EQ(s.hidden_size, 8192);
  EXPECT_EQ(s.intermediate_size, 28672);
  EXPECT_EQ(s.vocab_size, 128256);
  EXPECT_EQ(parameter_count(s), 70553706496ull);  // the real model's 70.6 billion
  // 80 layers x 8 KV heads x 128 x K and V x bf16: 2.5 MiB per 16-token block.
  EXPECT_EQ(s.kv_bytes_per_block(16, 2), 80ull * 2 * 16 * 1024 * 2);
  EXPECT_EQ(synthetic_shape_names().back(), "llama-3.1-70b");
}

TEST(Presets, KnownShapes) {
  const ModelPreset& tiny = find_model_preset("tiny");
  EXPECT_EQ(tiny.shape.vocab_size, 512);
  EXPECT_EQ(tiny.shape.hidden_size, 64);
  EXPECT_EQ(tiny.shape.intermediate_size, 192);
  EXPECT_EQ(tiny.shape.num_layers, 2);
  EXPECT_EQ(tiny.shape.num_heads, 4);
  EXPECT_EQ(tiny.shape.num_kv_heads, 2);
  EXPECT_EQ(tiny.shape.head_dim, 16);
  EXPECT_TRUE(tiny.shape.rope.llama3);
  EXPECT_EQ(tiny.shape.rope.theta, 500000.0f);
  EXPECT_FALSE(tiny.shape.tie_word_embeddings);
  const ModelPreset& small = find_model_preset("small");
  EXPECT_EQ(small.shape.vocab_size, 2048);
  EXPECT_EQ(small.shape.num_layers, 4);
  EXPECT_EQ(small.shape.head_dim, 32);
  const ModelPreset& big = find_model_preset("llama-3.1-8b");
  EXPECT_EQ(big.shape.vocab_size, 128256);
  EXPECT_EQ(big.shape.hidden_size, 4096);
  EXPECT_EQ(big.shape.intermediate_size, 14336);
  EXPECT_EQ(big.shape.num_kv_heads, 8);
  EXPECT_GT(big.max_shard_bytes, 0u);
  // 8.03 billion parameters, as the real model has.
  EXPECT_EQ(parameter_count(big.shape), 8030261248ull);
  try {
    find_model_preset("huge");
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("tiny, small, llama-3.1-8b"), std::string::npos);
  }
}

TEST(Presets, WeightValuesArePinned) {
  // Pinned bits: any change to the generator changes every checkpoint, so it must be deliberate.
  const uint64_t key = preset_tensor_key(7, "model.embed_tokens.weight");
  EXPECT_EQ(key, 18313037427512828190ull);
  EXPECT_EQ(preset_weight_value(key, 0, false), -0.0355285034f);
  EXPECT_EQ(preset_weight_value(key, 12345, false), -0.00451618712f);
  EXPECT_EQ(preset_weight_value(key, 3, true), 0.991234839f);
}

TEST(Presets, WeightStatistics) {
  const uint64_t key = preset_tensor_key(1, "w");
  double sum = 0, sq = 0;
  const int n = 200000;
  for (int i = 0; i < n; ++i) {
    double v = preset_weight_value(key, i, false);
    sum += v;
    sq += v * v;
  }
  EXPECT_NEAR(sum / n, 0.0, 0.0005);
  EXPECT_NEAR(std::sqrt(sq / n), 0.02, 0.0005);
  double norm_sum = 0;
  for (int i = 0; i < 1000; ++i) norm_sum += preset_weight_value(key, i, true);
  EXPECT_NEAR(norm_sum / 1000, 1.0, 0.01);
}

TEST(Presets, TinyCheckpointIsCompleteDeterministicAndLoadable) {
  ScratchDir a, b, c;
  const ModelPreset& tiny = find_model_preset("tiny");
  std::vector<double> progress;
  write_model_checkpoint(tiny, 42, a.path(), options(),
                         [&](double f, std::string_view) { progress.push_back(f); });
  ASSERT_FALSE(progress.empty());
  EXPECT_EQ(progress.back(), 1.0);
  write_model_checkpoint(tiny, 42, b.path(), options());
  write_model_checkpoint(tiny, 43, c.path(), options());
  for (const char* name : {"config.json", "model.safetensors", "tokenizer.json",
                           "tokenizer_config.json", "generation_config.json"}) {
    ASSERT_TRUE(std::filesystem::exists(a / name)) << name;
    EXPECT_EQ(read_bytes(a / name), read_bytes(b / name)) << name << " differs for the same seed";
  }
  EXPECT_NE(read_bytes(a / "model.safetensors"), read_bytes(c / "model.safetensors"));

  ModelConfig config = load_model_config(a / "config.json");
  EXPECT_EQ(config.shape.vocab_size, tiny.shape.vocab_size);
  EXPECT_EQ(config.shape.head_dim, 16);
  EXPECT_TRUE(config.shape.rope.llama3);
  EXPECT_EQ(config.shape.rope.original_max_position, 8192);
  EXPECT_FLOAT_EQ(config.shape.rms_norm_eps, 1e-5f);
  EXPECT_EQ(config.max_position_embeddings, 131072);
  EXPECT_GE(config.bos_token_id, 256);
  ASSERT_EQ(config.eos_token_ids.size(), 1u);

  SafetensorsCheckpoint ckpt = SafetensorsCheckpoint::open_directory(a.path());
  EXPECT_EQ(ckpt.files().front()->metadata().at("lazyscope_seed"), "42");
  EXPECT_EQ(ckpt.find("model.norm.weight")->tensor->dtype, TensorDtype::BF16);
  ModelWeights w = load_hf_weights(ckpt, config);
  const uint64_t key = preset_tensor_key(42, "model.layers.1.mlp.down_proj.weight");
  EXPECT_EQ(w.layers[1].w_down[17], bf16_to_f32(f32_to_bf16(preset_weight_value(key, 17, false))));
  EXPECT_NEAR(w.final_norm[0], 1.0f, 0.3f);
  EXPECT_NE(checkpoint_identity("x", ckpt),
            checkpoint_identity("x", SafetensorsCheckpoint::open_directory(c.path())));
}

TEST(Presets, F32AndForcedShards) {
  ScratchDir dir;
  CheckpointWriteOptions o = options(TensorDtype::F32);
  o.max_shard_bytes = 100000;
  write_model_checkpoint(find_model_preset("tiny"), 5, dir.path(), o);
  EXPECT_TRUE(std::filesystem::exists(dir / "model.safetensors.index.json"));
  EXPECT_FALSE(std::filesystem::exists(dir / "model.safetensors"));
  SafetensorsCheckpoint ckpt = SafetensorsCheckpoint::open_directory(dir.path());
  EXPECT_GE(ckpt.files().size(), 4u);
  ModelConfig config = load_model_config(dir / "config.json");
  ModelWeights w = load_hf_weights(ckpt, config);
  const uint64_t key = preset_tensor_key(5, "lm_head.weight");
  EXPECT_EQ(w.lm_head[1000], preset_weight_value(key, 1000, false));
}

TEST(Presets, MissingTextDirectoryIsAnError) {
  ScratchDir dir;
  CheckpointWriteOptions o = options();
  o.text_dir = dir / "no-texts";
  EXPECT_THROW(write_model_checkpoint(find_model_preset("tiny"), 1, dir / "out", o), Error);
  std::filesystem::create_directories(dir / "empty");
  o.text_dir = dir / "empty";
  try {
    write_model_checkpoint(find_model_preset("tiny"), 1, dir / "out", o);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("no *.txt files"), std::string::npos);
  }
}

// The whole path a user takes: make a checkpoint, load_model it.
TEST(ModelLoader, LoadsTinyCheckpoint) {
  ScratchDir dir;
  write_model_checkpoint(find_model_preset("tiny"), 9, dir / "tiny-9", options());
  LoadedModel m = load_model(dir / "tiny-9");
  EXPECT_EQ(m.config.name, "tiny-9");
  EXPECT_EQ(m.config.shape.num_layers, 2);
  EXPECT_EQ(m.identity.size(), 16u);
  EXPECT_EQ(m.weights.layers.size(), 2u);
  EXPECT_EQ(m.weights.embed.size(), 512u * 64u);
  EXPECT_EQ(m.tokenizer.bos_id(), m.config.bos_token_id);
  EXPECT_TRUE(m.tokenizer.add_bos());
  EXPECT_EQ(m.tokenizer.token_id("<|begin_of_text|>"), m.config.bos_token_id);
  EXPECT_EQ(m.tokenizer.eos_ids(), m.config.eos_token_ids);
  EXPECT_EQ(m.tokenizer.token_id("<|end_of_text|>"), m.config.eos_token_ids.at(0));
  EXPECT_EQ(load_model(dir / "tiny-9" / "config.json").identity, m.identity);
}

TEST(ModelLoader, ErrorsNameThePath) {
  ScratchDir dir;
  auto error_of = [](const std::filesystem::path& p) {
    try {
      load_model(p);
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  EXPECT_NE(error_of(dir / "absent").find("no such model"), std::string::npos);
  EXPECT_NE(error_of(dir.path()).find("no config.json"), std::string::npos);
  testing::write_bytes(dir / "weights.bin", "x");
  EXPECT_NE(error_of(dir / "weights.bin").find("expected a .gguf file"), std::string::npos);
  write_model_checkpoint(find_model_preset("tiny"), 9, dir / "m", options());
  std::filesystem::remove(dir / "m" / "tokenizer.json");
  EXPECT_NE(error_of(dir / "m").find("no tokenizer.json"), std::string::npos);
}

}  // namespace
}  // namespace lazyscope

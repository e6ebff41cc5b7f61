// HF checkpoint directories: tensor mapping into ModelWeights, shape/presence checks,
// identity hashes and special-token resolution.
#include "engine/model/hf_checkpoint.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "engine/model/hf_special_tokens.h"
#include "engine/model/safetensors_writer.h"
#include "base/error.h"
#include "model_test_util.h"

namespace lazyscope {
namespace {

using testing::ScratchDir;
using testing::write_bytes;

ModelConfig small_config(bool tied = false) {
  ModelConfig c;
  c.name = "unit";
  c.shape.vocab_size = 11;
  c.shape.hidden_size = 8;
  c.shape.intermediate_size = 12;
  c.shape.num_layers = 2;
  c.shape.num_heads = 4;
  c.shape.num_kv_heads = 2;
  c.shape.head_dim = 2;
  c.shape.tie_word_embeddings = tied;
  return c;
}

// A value that tells which tensor and element it came from.
float marker(std::size_t tensor, std::size_t element) {
  return float(tensor) * 1000.0f + float(element % 997) * 0.5f;
}

// Writes every tensor of `config` (dtype `dtype`), skipping `skip` and reshaping `reshape`.
void write_checkpoint(const std::filesystem::path& dir, const ModelConfig& config,
                      TensorDtype dtype = TensorDtype::F32, const std::string& skip = "",
                      const std::string& reshape = "", uint64_t shard_bytes = 0) {
  std::vector<TensorToWrite> tensors;
  for (const HfTensorSpec& s : llama_tensor_specs(config.shape)) {
    if (s.name == skip) continue;
    TensorToWrite t{s.name, dtype, s.shape};
    if (s.name == reshape) t.shape = {t.shape[0] + 1, t.shape.size() > 1 ? t.shape[1] : 1};
    tensors.push_back(t);
  }
  // An unrelated extra tensor is ignored by the loader.
  tensors.push_back({"model.layers.0.self_attn.rotary_emb.inv_freq", TensorDtype::F32, {1}});
  write_safetensors_checkpoint(
      dir, tensors,
      [&](std::size_t i, std::vector<float>& v) {
        for (std::size_t k = 0; k < v.size(); ++k) v[k] = marker(i, k);
      },
      shard_bytes);
}

std::string load_error(const std::filesystem::path& dir, const ModelConfig& config) {
  try {
    load_hf_weights(dir, config);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(HfCheckpoint, TensorSpecsFollowTheConfig) {
  ModelConfig c = small_config();
  auto specs = llama_tensor_specs(c.shape);
  ASSERT_EQ(specs.size(), 1 + 9 * 2 + 2u);
  EXPECT_EQ(specs[0].name, "model.embed_tokens.weight");
  EXPECT_EQ(specs[0].shape, (std::vector<int64_t>{11, 8}));
  EXPECT_EQ(specs[2].name, "model.layers.0.self_attn.q_proj.weight");
  EXPECT_EQ(specs[2].shape, (std::vector<int64_t>{8, 8}));
  EXPECT_EQ(specs[3].shape, (std::vector<int64_t>{4, 8}));  // k_proj: kv_dim x hidden
  EXPECT_EQ(specs[5].shape, (std::vector<int64_t>{8, 8}));  // o_proj: hidden x q_dim
  EXPECT_EQ(specs[9].name, "model.layers.0.mlp.down_proj.weight");
  EXPECT_EQ(specs[9].shape, (std::vector<int64_t>{8, 12}));
  EXPECT_EQ(specs.back().name, "lm_head.weight");
  EXPECT_EQ(llama_tensor_specs(small_config(true).shape).back().name, "model.norm.weight");
}

TEST(HfCheckpoint, LoadsEveryTensorIntoItsSlot) {
  ScratchDir dir;
  ModelConfig c = small_config();
  write_checkpoint(dir.path(), c);
  ModelWeights w = load_hf_weights(dir.path(), c);
  auto specs = llama_tensor_specs(c.shape);
  for (std::size_t i = 0; i < specs.size(); ++i) {
    const std::vector<float>& slot = weight_slot(w, specs[i]);
    ASSERT_EQ(slot.size(),
              std::size_t(specs[i].shape[0] * (specs[i].shape.size() > 1 ? specs[i].shape[1] : 1)))
        << specs[i].name;
    for (std::size_t k = 0; k < slot.size(); ++k) ASSERT_EQ(slot[k], marker(i, k)) << specs[i].name;
  }
  EXPECT_EQ(w.layers.size(), 2u);
  EXPECT_EQ(w.layers[1].w_up[3], marker(1 + 9 + 7, 3));
  WeightsView view = w.view();
  EXPECT_EQ(view.lm_head, w.lm_head.data());
}

TEST(HfCheckpoint, TiedEmbeddingsNeedNoLmHead) {
  ScratchDir dir;
  ModelConfig c = small_config(true);
  write_checkpoint(dir.path(), c);
  ModelWeights w = load_hf_weights(dir.path(), c);
  EXPECT_TRUE(w.lm_head.empty());
  EXPECT_EQ(w.view().lm_head, w.embed.data());
}

TEST(HfCheckpoint, ShardedBf16AndF16) {
  for (TensorDtype dtype : {TensorDtype::BF16, TensorDtype::F32}) {
    ScratchDir dir;
    ModelConfig c = small_config();
    write_checkpoint(dir.path(), c, dtype, "", "", 300);
    EXPECT_TRUE(std::filesystem::exists(dir / "model.safetensors.index.json"));
    ModelWeights w = load_hf_weights(dir.path(), c);
    const float want =
        dtype == TensorDtype::BF16 ? bf16_to_f32(f32_to_bf16(marker(2, 1))) : marker(2, 1);
    EXPECT_EQ(w.layers[0].wq[1], want);
  }
  // F16 written by hand: 1.5 and a subnormal.
  ScratchDir dir;
  uint16_t halves[2] = {0x3e00, 0x0001};
  const std::string header = R"({"t": {"dtype": "F16", "shape": [2], "data_offsets": [0, 4]}})";
  write_bytes(dir / "model.safetensors",
              testing::safetensors_bytes(header, std::string(reinterpret_cast<char*>(halves), 4)));
  SafetensorsCheckpoint ckpt = SafetensorsCheckpoint::open_directory(dir.path());
  std::vector<float> out;
  ckpt.find("t")->file->read_f32(*ckpt.find("t")->tensor, out);
  EXPECT_EQ(out, (std::vector<float>{1.5f, std::ldexp(1.0f, -24)}));
}

TEST(HfCheckpoint, MissingTensorsAreNamed) {
  ScratchDir dir;
  ModelConfig c = small_config();
  write_checkpoint(dir.path(), c, TensorDtype::F32, "model.layers.1.mlp.gate_proj.weight");
  std::string err = load_error(dir.path(), c);
  EXPECT_NE(err.find("missing tensor: model.layers.1.mlp.gate_proj.weight"), std::string::npos)
      << err;

  ScratchDir untied;
  write_checkpoint(untied.path(), small_config(true));  // no lm_head written
  err = load_error(untied.path(), small_config(false));
  EXPECT_NE(err.find("missing tensor: lm_head.weight"), std::string::npos) << err;

  // A config with more layers than the file: every missing name counted.
  ModelConfig deeper = small_config();
  deeper.shape.num_layers = 4;
  err = load_error(dir.path(), deeper);
  EXPECT_NE(err.find("missing tensors: "), std::string::npos) << err;
  EXPECT_NE(err.find("(19 in all)"), std::string::npos) << err;
}

TEST(HfCheckpoint, WrongShapeIsNamed) {
  ScratchDir dir;
  ModelConfig c = small_config();
  write_checkpoint(dir.path(), c, TensorDtype::F32, "", "model.layers.0.self_attn.k_proj.weight");
  std::string err = load_error(dir.path(), c);
  EXPECT_NE(
      err.find("model.safetensors: tensor 'model.layers.0.self_attn.k_proj.weight': shape [5, 8] "
               "does not match [4, 8]"),
      std::string::npos)
      << err;
}

TEST(HfCheckpoint, UnloadableDtypeIsNamed) {
  ScratchDir dir;
  ModelConfig c = small_config();
  c.shape.num_layers = 0;
  c.shape.tie_word_embeddings = true;
  const std::string header =
      R"({"model.embed_tokens.weight": {"dtype": "I32", "shape": [11, 8], "data_offsets": [0, 352]},
          "model.norm.weight": {"dtype": "F32", "shape": [8], "data_offsets": [352, 384]}})";
  write_bytes(dir / "model.safetensors",
              testing::safetensors_bytes(header, std::string(384, '\0')));
  std::string err = load_error(dir.path(), c);
  EXPECT_NE(err.find("tensor 'model.embed_tokens.weight': dtype I32 cannot be loaded"),
            std::string::npos)
      << err;
}

TEST(HfCheckpoint, ProgressReachesOne) {
  ScratchDir dir;
  ModelConfig c = small_config();
  write_checkpoint(dir.path(), c);
  std::vector<double> seen;
  load_hf_weights(dir.path(), c, [&](double f, std::string_view) { seen.push_back(f); });
  ASSERT_FALSE(seen.empty());
  EXPECT_EQ(seen.back(), 1.0);
  for (std::size_t i = 1; i < seen.size(); ++i) EXPECT_GE(seen[i], seen[i - 1]);
}

TEST(HfCheckpoint, IdentityIsStableAndSeesDataAndConfig) {
  ScratchDir a, b;
  ModelConfig c = small_config();
  write_checkpoint(a.path(), c);
  write_checkpoint(b.path(), c);
  auto id = [](const std::filesystem::path& dir, const std::string& config) {
    return checkpoint_identity(config, SafetensorsCheckpoint::open_directory(dir));
  };
  const std::string ida = id(a.path(), "{}");
  EXPECT_EQ(ida.size(), 16u);
  EXPECT_EQ(ida, id(b.path(), "{}"));  // same bytes in another directory
  EXPECT_NE(ida, id(a.path(), "{ }"));
  // Same shapes, one different value at the start of a tensor.
  std::vector<TensorToWrite> tensors;
  for (const HfTensorSpec& s : llama_tensor_specs(c.shape))
    tensors.push_back({s.name, TensorDtype::F32, s.shape});
  tensors.push_back({"model.layers.0.self_attn.rotary_emb.inv_freq", TensorDtype::F32, {1}});
  write_safetensors_checkpoint(
      b.path(), tensors,
      [&](std::size_t i, std::vector<float>& v) {
        for (std::size_t k = 0; k < v.size(); ++k)
          v[k] = marker(i, k) + (i == 3 && k == 0 ? 1.0f : 0.0f);
      },
      0);
  EXPECT_NE(ida, id(b.path(), "{}"));
}

TEST(HfSpecialTokens, Llama3Layout) {
  ScratchDir dir;
  ModelConfig c = small_config();
  c.bos_token_id = 128000;
  c.eos_token_ids = {128001};
  write_bytes(dir / "generation_config.json",
              R"({"bos_token_id": 128000, "eos_token_id": [128001, 128009]})");
  write_bytes(dir / "tokenizer_config.json",
              R"({"bos_token": "<|begin_of_text|>", "chat_template": "{{ bos_token }}hi"})");
  const std::string tokenizer = R"({"post_processor": {"type": "Sequence", "processors": [
      {"type": "ByteLevel"},
      {"type": "TemplateProcessing",
       "single": [{"SpecialToken": {"id": "<|begin_of_text|>", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}}],
       "special_tokens": {"<|begin_of_text|>": {"id": "<|begin_of_text|>", "ids": [128000], "tokens": ["<|begin_of_text|>"]}}}]}})";
  HfSpecialTokens t = read_hf_special_tokens(dir.path(), c, tokenizer, {});
  EXPECT_EQ(t.bos_id, 128000);
  EXPECT_EQ(t.eos_ids, (std::vector<int32_t>{128001, 128009}));
  EXPECT_TRUE(t.add_bos);
  EXPECT_EQ(t.chat_template, "{{ bos_token }}hi");
  // Without the post-processor and without add_bos_token nothing says to add BOS.
  EXPECT_FALSE(read_hf_special_tokens(dir.path(), c, R"({"post_processor": null})", {}).add_bos);
}

TEST(HfSpecialTokens, TokenizerConfigStringsAndExplicitAddBos) {
  ScratchDir dir;
  ModelConfig c = small_config();  // no ids in config.json
  write_bytes(dir / "tokenizer_config.json",
              R"({"add_bos_token": false, "bos_token": {"content": "<s>"}, "eos_token": "</s>",
                  "chat_template": [{"name": "tool_use", "template": "T"}, {"name": "default", "template": "D"}]})");
  write_bytes(dir / "chat_template.jinja", "ignored: tokenizer_config has one");
  auto lookup = [](std::string_view text) -> std::optional<int32_t> {
    if (text == "<s>") return 1;
    if (text == "</s>") return 2;
    return std::nullopt;
  };
  HfSpecialTokens t = read_hf_special_tokens(dir.path(), c, "", lookup);
  EXPECT_EQ(t.bos_id, 1);
  EXPECT_EQ(t.eos_ids, std::vector<int32_t>{2});
  EXPECT_FALSE(t.add_bos);
  EXPECT_EQ(t.chat_template, "D");
}

TEST(HfSpecialTokens, ChatTemplateFileAndBadJson) {
  ScratchDir dir;
  write_bytes(dir / "chat_template.jinja", "{% for m in messages %}{{ m.content }}{% endfor %}");
  EXPECT_EQ(read_hf_special_tokens(dir.path(), small_config(), "", {}).chat_template,
            "{% for m in messages %}{{ m.content }}{% endfor %}");
  write_bytes(dir / "generation_config.json", "{oops");
  try {
    read_hf_special_tokens(dir.path(), small_config(), "", {});
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("generation_config.json: not valid JSON"),
              std::string::npos);
  }
}

}  // namespace
}  // namespace lazyscope

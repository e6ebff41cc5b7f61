// HF config.json parsing: Llama-3 fields, defaults, rope layouts and clear errors.
#include "engine/model/config.h"

#include <gtest/gtest.h>

#include <functional>
#include <nlohmann/json.hpp>
#include <string>

#include "base/error.h"
#include "model_test_util.h"

namespace lazyscope {
namespace {

const char* kLlama31 = R"({
  "architectures": ["LlamaForCausalLM"], "model_type": "llama",
  "bos_token_id": 128000, "eos_token_id": [128001, 128008, 128009],
  "hidden_act": "silu", "hidden_size": 4096, "intermediate_size": 14336,
  "max_position_embeddings": 131072, "num_attention_heads": 32, "num_hidden_layers": 32,
  "num_key_value_heads": 8, "rms_norm_eps": 1e-05,
  "rope_scaling": {"factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                   "original_max_position_embeddings": 8192, "rope_type": "llama3"},
  "rope_theta": 500000.0, "tie_word_embeddings": false, "vocab_size": 128256})";

// Returns the error text of parsing `text`, or "" when it parsed.
std::string parse_error(const std::string& text) {
  try {
    parse_model_config(text, "dir/config.json");
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

// kLlama31 with `key` set to the JSON `value` (removed when value is empty).
std::string llama_with(const std::string& key, const std::string& value) {
  nlohmann::ordered_json j = nlohmann::ordered_json::parse(kLlama31);
  if (value.empty()) {
    j.erase(key);
  } else {
    try {
      j[key] = nlohmann::ordered_json::parse(value);
    } catch (const nlohmann::json::parse_error&) {
      j[key] = value;
    }
  }
  return j.dump();
}

// kLlama31 with several fields changed at once.
std::string llama_edit(const std::function<void(nlohmann::ordered_json&)>& edit) {
  nlohmann::ordered_json j = nlohmann::ordered_json::parse(kLlama31);
  edit(j);
  return j.dump();
}

TEST(ModelConfig, ParsesLlama31) {
  ModelConfig c = parse_model_config(kLlama31, "config.json");
  EXPECT_EQ(c.architecture, "LlamaForCausalLM");
  EXPECT_EQ(c.shape.vocab_size, 128256);
  EXPECT_EQ(c.shape.hidden_size, 4096);
  EXPECT_EQ(c.shape.intermediate_size, 14336);
  EXPECT_EQ(c.shape.num_layers, 32);
  EXPECT_EQ(c.shape.num_heads, 32);
  EXPECT_EQ(c.shape.num_kv_heads, 8);
  EXPECT_EQ(c.shape.head_dim, 128);  // derived: 4096 / 32
  EXPECT_FLOAT_EQ(c.shape.rms_norm_eps, 1e-5f);
  EXPECT_FLOAT_EQ(c.shape.rope.theta, 500000.0f);
  EXPECT_TRUE(c.shape.rope.llama3);
  EXPECT_FLOAT_EQ(c.shape.rope.factor, 8.0f);
  EXPECT_FLOAT_EQ(c.shape.rope.low_freq_factor, 1.0f);
  EXPECT_FLOAT_EQ(c.shape.rope.high_freq_factor, 4.0f);
  EXPECT_EQ(c.shape.rope.original_max_position, 8192);
  EXPECT_FALSE(c.shape.tie_word_embeddings);
  EXPECT_EQ(c.max_position_embeddings, 131072);
  EXPECT_EQ(c.bos_token_id, 128000);
  EXPECT_EQ(c.eos_token_ids, (std::vector<int32_t>{128001, 128008, 128009}));
}

TEST(ModelConfig, DefaultsWithoutOptionalFields) {
  ModelConfig c = parse_model_config(
      R"({"model_type": "llama", "vocab_size": 100, "hidden_size": 48, "intermediate_size": 96,
          "num_hidden_layers": 1, "num_attention_heads": 6})",
      "config.json");
  EXPECT_EQ(c.shape.num_kv_heads, 6);  // no GQA given: one KV head per query head
  EXPECT_EQ(c.shape.head_dim, 8);
  EXPECT_FALSE(c.shape.rope.llama3);
  EXPECT_FLOAT_EQ(c.shape.rope.theta, 10000.0f);
  EXPECT_FLOAT_EQ(c.shape.rms_norm_eps, 1e-6f);
  EXPECT_EQ(c.bos_token_id, -1);
  EXPECT_TRUE(c.eos_token_ids.empty());
}

TEST(ModelConfig, ExplicitHeadDimAndTiedEmbeddingsAndIntEos) {
  ModelConfig c = parse_model_config(llama_edit([](nlohmann::ordered_json& j) {
                                       j["hidden_size"] = 3072;
                                       j["head_dim"] = 64;
                                       j["tie_word_embeddings"] = true;
                                       j["eos_token_id"] = 128001;
                                     }),
                                     "config.json");
  EXPECT_EQ(c.shape.head_dim, 64);
  EXPECT_EQ(c.shape.q_dim(), 32 * 64);
  EXPECT_TRUE(c.shape.tie_word_embeddings);
  EXPECT_EQ(c.eos_token_ids, std::vector<int32_t>{128001});
}

TEST(ModelConfig, NullHeadDimIsDerived) {
  EXPECT_EQ(parse_model_config(llama_with("head_dim", "null"), "config.json").shape.head_dim, 128);
}

TEST(ModelConfig, RopeParametersLayout) {
  std::string text = llama_edit([](nlohmann::ordered_json& j) {
    j.erase("rope_scaling");
    j.erase("rope_theta");
    j["rope_parameters"] = {{"rope_type", "llama3"},   {"rope_theta", 250000.0},
                            {"factor", 32.0},          {"low_freq_factor", 1.0},
                            {"high_freq_factor", 4.0}, {"original_max_position_embeddings", 8192}};
  });
  ModelConfig c = parse_model_config(text, "config.json");
  EXPECT_TRUE(c.shape.rope.llama3);
  EXPECT_FLOAT_EQ(c.shape.rope.theta, 250000.0f);
  EXPECT_FLOAT_EQ(c.shape.rope.factor, 32.0f);
  EXPECT_EQ(c.shape.rope.original_max_position, 8192);
}

TEST(ModelConfig, RopeParametersDefaultType) {
  std::string text = llama_edit([](nlohmann::ordered_json& j) {
    j.erase("rope_scaling");
    j["rope_parameters"] = {{"rope_type", "default"}, {"rope_theta", 1000000.0}};
  });
  ModelConfig c = parse_model_config(text, "c");
  EXPECT_FALSE(c.shape.rope.llama3);
  EXPECT_FLOAT_EQ(c.shape.rope.theta, 1e6f);
  EXPECT_FALSE(parse_model_config(llama_with("rope_scaling", R"({"rope_type": "default"})"), "c")
                   .shape.rope.llama3);
}

TEST(ModelConfig, RopeParametersRejectsUnknownType) {
  std::string text = llama_edit([](nlohmann::ordered_json& j) {
    j.erase("rope_scaling");
    j["rope_parameters"] = {{"rope_type", "yarn"}, {"rope_theta", 10000.0}, {"factor", 4.0}};
  });
  std::string err = parse_error(text);
  EXPECT_NE(err.find("unsupported RoPE type 'yarn' in 'rope_parameters'"), std::string::npos)
      << err;
}

TEST(ModelConfig, OldStyleTypeKeyAndNullScaling) {
  std::string text =
      llama_with("rope_scaling", R"({"type": "llama3", "factor": 8, "low_freq_factor": 1,
                          "high_freq_factor": 4, "original_max_position_embeddings": 8192})");
  EXPECT_TRUE(parse_model_config(text, "c").shape.rope.llama3);
  EXPECT_FALSE(parse_model_config(llama_with("rope_scaling", "null"), "c").shape.rope.llama3);
}

TEST(ModelConfig, RejectsUnknownRopeTypes) {
  for (const char* type : {"yarn", "linear", "dynamic", "longrope"}) {
    std::string err = parse_error(llama_with(
        "rope_scaling", std::string(R"({"rope_type": ")") + type + R"(", "factor": 4.0})"));
    EXPECT_NE(err.find("unsupported RoPE type"), std::string::npos) << err;
    EXPECT_NE(err.find(type), std::string::npos) << err;
    EXPECT_NE(err.find("dir/config.json"), std::string::npos) << err;
  }
}

TEST(ModelConfig, ErrorsNameFileAndField) {
  struct Case {
    std::string text, expect;
  };
  const Case cases[] = {
      {"not json", "not valid JSON"},
      {"[1, 2]", "JSON object"},
      {llama_with("hidden_size", ""), "'hidden_size'"},
      {llama_with("hidden_size", "\"4096\""), "'hidden_size' must be an integer"},
      {llama_with("num_hidden_layers", "0"), "'num_hidden_layers' must be a positive"},
      {llama_with("vocab_size", "-5"), "'vocab_size'"},
      {llama_with("num_key_value_heads", "5"), "not a multiple of num_key_value_heads"},
      {llama_with("hidden_size", "4001"), "no 'head_dim'"},
      {llama_with("rms_norm_eps", "\"small\""), "'rms_norm_eps' must be a number"},
      {llama_with("tie_word_embeddings", "1"), "'tie_word_embeddings' must be true or false"},
      {llama_with("architectures", "[\"MistralForCausalLM\"]"), "unsupported architecture"},
      {llama_with("architectures", "\"LlamaForCausalLM\""), "'architectures'"},
      {llama_with("hidden_act", "\"gelu\""), "hidden_act"},
      {llama_with("eos_token_id", "\"</s>\""), "'eos_token_id'"},
      {llama_with("rope_scaling", "[1]"), "'rope_scaling' must be an object"},
      {llama_with("rope_scaling", R"({"rope_type": "llama3", "factor": 8.0})"),
       "rope_scaling.low_freq_factor"},
      {llama_with("rope_scaling", R"({"rope_type": 3})"), "rope_scaling.rope_type"},
      {llama_with("rope_theta", "-1"), "'rope_theta' must be positive"},
  };
  for (const Case& c : cases) {
    std::string err = parse_error(c.text);
    EXPECT_NE(err.find(c.expect), std::string::npos) << "expected '" << c.expect << "' in: " << err;
    EXPECT_NE(err.find("dir/config.json"), std::string::npos) << err;
  }
}

TEST(ModelConfig, LoadFromFileNamesTheDirectory) {
  testing::ScratchDir dir;
  std::filesystem::create_directories(dir / "My-Model");
  testing::write_bytes(dir / "My-Model" / "config.json", kLlama31);
  ModelConfig c = load_model_config(dir / "My-Model" / "config.json");
  EXPECT_EQ(c.name, "My-Model");
  try {
    load_model_config(dir / "absent" / "config.json");
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("absent/config.json"), std::string::npos);
  }
}

}  // namespace
}  // namespace lazyscope

#include "engine/model/config.h"

#include <cmath>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <sstream>

#include "base/error.h"

namespace lazyscope {
namespace {

using nlohmann::json;

[[noreturn]] void fail(const std::string& source, const std::string& problem) {
  throw Error(source + ": " + problem);
}

const char* type_name(const json& v) { return v.type_name(); }

// A required positive integer field.
int require_positive_int(const json& j, const std::string& key, const std::string& source) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) fail(source, "missing required field '" + key + "'");
  if (!it->is_number_integer()) {
    fail(source, "field '" + key + "' must be an integer, found " + type_name(*it));
  }
  int64_t v = it->get<int64_t>();
  if (v <= 0 || v > std::numeric_limits<int32_t>::max()) {
    fail(source, "field '" + key + "' must be a positive integer, found " + std::to_string(v));
  }
  return int(v);
}

// An optional positive integer field; null counts as absent (HF writes "head_dim": null).
int optional_positive_int(const json& j, const std::string& key, int fallback,
                          const std::string& source) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return fallback;
  return require_positive_int(j, key, source);
}

double optional_number(const json& j, const std::string& key, double fallback,
                       const std::string& source, const std::string& where = "") {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return fallback;
  if (!it->is_number()) {
    fail(source, "field '" + where + key + "' must be a number, found " + type_name(*it));
  }
  double v = it->get<double>();
  if (!std::isfinite(v)) fail(source, "field '" + where + key + "' must be finite");
  return v;
}

double require_positive_number(const json& j, const std::string& key, const std::string& source,
                               const std::string& where) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) fail(source, "missing required field '" + where + key + "'");
  double v = optional_number(j, key, 0.0, source, where);
  if (!(v > 0.0)) fail(source, "field '" + where + key + "' must be positive");
  return v;
}

bool optional_bool(const json& j, const std::string& key, bool fallback,
                   const std::string& source) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return fallback;
  if (!it->is_boolean()) {
    fail(source, "field '" + key + "' must be true or false, found " + type_name(*it));
  }
  return it->get<bool>();
}

// One token id: HF writes an int, sometimes null.
std::vector<int32_t> token_ids(const json& j, const std::string& key, const std::string& source) {
  std::vector<int32_t> ids;
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return ids;
  auto one = [&](const json& v) {
    if (!v.is_number_integer() || v.get<int64_t>() < 0 ||
        v.get<int64_t>() > std::numeric_limits<int32_t>::max()) {
      fail(source,
           "field '" + key + "' must hold non-negative integer token ids, found " + v.dump());
    }
    ids.push_back(int32_t(v.get<int64_t>()));
  };
  if (it->is_array()) {
    for (const json& v : *it) one(v);
  } else {
    one(*it);
  }
  return ids;
}

// Fills shape.rope from a rope_scaling / rope_parameters object (where names it in errors).
void parse_rope_object(const json& rope, const std::string& where, const std::string& source,
                       ModelShape& shape) {
  if (!rope.is_object()) {
    fail(source, "field '" + where + "' must be an object or null, found " + type_name(rope));
  }
  std::string type = "default";
  for (const char* key : {"rope_type", "type"}) {
    auto it = rope.find(key);
    if (it != rope.end() && !it->is_null()) {
      if (!it->is_string()) fail(source, "field '" + where + "." + key + "' must be a string");
      type = it->get<std::string>();
      break;
    }
  }
  if (type == "default") {
    shape.rope.llama3 = false;
    return;
  }
  if (type != "llama3") {
    fail(source,
         "unsupported RoPE type '" + type + "' in '" + where + "' (supported: default, llama3)");
  }
  const std::string prefix = where + ".";
  shape.rope.llama3 = true;
  shape.rope.factor = float(require_positive_number(rope, "factor", source, prefix));
  shape.rope.low_freq_factor =
      float(require_positive_number(rope, "low_freq_factor", source, prefix));
  shape.rope.high_freq_factor =
      float(require_positive_number(rope, "high_freq_factor", source, prefix));
  auto it = rope.find("original_max_position_embeddings");
  if (it == rope.end() || it->is_null()) {
    fail(source, "missing required field '" + prefix + "original_max_position_embeddings'");
  }
  if (!it->is_number_integer() || it->get<int64_t>() <= 0 ||
      it->get<int64_t>() > std::numeric_limits<int32_t>::max()) {
    fail(source,
         "field '" + prefix + "original_max_position_embeddings' must be a positive integer");
  }
  shape.rope.original_max_position = int(it->get<int64_t>());
  if (!(shape.rope.high_freq_factor > shape.rope.low_freq_factor)) {
    fail(source, "field '" + prefix + "high_freq_factor' must be larger than low_freq_factor");
  }
}

}  // namespace

ModelConfig parse_model_config(const std::string& json_text, const std::string& source_name) {
  const std::string& src = source_name;
  json j;
  try {
    j = json::parse(json_text);
  } catch (const json::exception& e) {
    fail(src, std::string("not valid JSON: ") + e.what());
  }
  if (!j.is_object()) fail(src, "top level must be a JSON object");

  ModelConfig config;
  // Llama family only: the architecture list or, without one, the model_type.
  auto arch = j.find("architectures");
  if (arch != j.end() && !arch->is_null()) {
    if (!arch->is_array() || arch->empty() || !(*arch)[0].is_string()) {
      fail(src, "field 'architectures' must be a non-empty list of strings");
    }
    config.architecture = (*arch)[0].get<std::string>();
    if (config.architecture != "LlamaForCausalLM") {
      fail(src,
           "unsupported architecture '" + config.architecture + "' (supported: LlamaForCausalLM)");
    }
  } else {
    auto type = j.find("model_type");
    if (type == j.end() || !type->is_string() || type->get<std::string>() != "llama") {
      fail(src, "missing field 'architectures' and 'model_type' is not \"llama\"");
    }
  }
  auto act = j.find("hidden_act");
  if (act != j.end() && !act->is_null() &&
      (!act->is_string() || act->get<std::string>() != "silu")) {
    fail(src, "unsupported hidden_act " + act->dump() + " (supported: \"silu\")");
  }
  for (const char* bias : {"attention_bias", "mlp_bias"}) {
    if (optional_bool(j, bias, false, src)) {
      fail(src, std::string("'") + bias + ": true' is not supported (Llama has no biases)");
    }
  }

  ModelShape& s = config.shape;
  s.vocab_size = require_positive_int(j, "vocab_size", src);
  s.hidden_size = require_positive_int(j, "hidden_size", src);
  s.intermediate_size = require_positive_int(j, "intermediate_size", src);
  s.num_layers = require_positive_int(j, "num_hidden_layers", src);
  s.num_heads = require_positive_int(j, "num_attention_heads", src);
  s.num_kv_heads = optional_positive_int(j, "num_key_value_heads", s.num_heads, src);
  if (s.num_heads % s.num_kv_heads != 0) {
    fail(src, "num_attention_heads (" + std::to_string(s.num_heads) +
                  ") is not a multiple of num_key_value_heads (" + std::to_string(s.num_kv_heads) +
                  ")");
  }
  auto head_dim = j.find("head_dim");
  if (head_dim == j.end() || head_dim->is_null()) {
    if (s.hidden_size % s.num_heads != 0) {
      fail(src, "no 'head_dim' and hidden_size (" + std::to_string(s.hidden_size) +
                    ") is not a multiple of num_attention_heads (" + std::to_string(s.num_heads) +
                    ")");
    }
    s.head_dim = s.hidden_size / s.num_heads;
  } else {
    s.head_dim = require_positive_int(j, "head_dim", src);
  }
  if (s.head_dim % 2 != 0) {
    fail(src, "head_dim " + std::to_string(s.head_dim) + " must be even for RoPE");
  }
  s.rms_norm_eps = float(optional_number(j, "rms_norm_eps", 1e-6, src));
  if (!(s.rms_norm_eps > 0.0f)) fail(src, "field 'rms_norm_eps' must be positive");
  s.tie_word_embeddings = optional_bool(j, "tie_word_embeddings", false, src);
  config.max_position_embeddings = optional_positive_int(j, "max_position_embeddings", 2048, src);

  // RoPE: the newer rope_parameters layout wins over rope_scaling + rope_theta.
  double theta = optional_number(j, "rope_theta", 10000.0, src);
  auto params = j.find("rope_parameters");
  if (params != j.end() && !params->is_null()) {
    if (params->is_object() && !params->empty() && params->begin()->is_object()) {
      fail(src, "per-layer-type 'rope_parameters' are not supported (Llama uses one set)");
    }
    parse_rope_object(*params, "rope_parameters", src, s);
    theta = optional_number(*params, "rope_theta", theta, src, "rope_parameters.");
  } else {
    auto scaling = j.find("rope_scaling");
    if (scaling != j.end() && !scaling->is_null())
      parse_rope_object(*scaling, "rope_scaling", src, s);
  }
  if (!(theta > 0.0)) fail(src, "field 'rope_theta' must be positive");
  s.rope.theta = float(theta);

  std::vector<int32_t> bos = token_ids(j, "bos_token_id", src);
  if (bos.size() > 1) fail(src, "field 'bos_token_id' must be a single token id");
  config.bos_token_id = bos.empty() ? -1 : bos[0];
  config.eos_token_ids = token_ids(j, "eos_token_id", src);
  return config;
}

ModelConfig load_model_config(const std::filesystem::path& config_json) {
  std::ifstream in(config_json, std::ios::binary);
  if (!in) throw Error(config_json.string() + ": cannot open model config");
  std::ostringstream text;
  text << in.rdbuf();
  ModelConfig config = parse_model_config(text.str(), config_json.string());
  // The checkpoint directory's name is what a user recognises the model by.
  config.name =
      std::filesystem::absolute(config_json).lexically_normal().parent_path().filename().string();
  if (config.name.empty()) config.name = "model";
  return config;
}

}  // namespace lazyscope

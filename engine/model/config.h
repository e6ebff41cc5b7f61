#pragma once
// Llama-family model configuration (HF config.json or GGUF metadata).
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "kernels/model_shape.h"

namespace lazyscope {

struct ModelConfig {
  ModelShape shape;
  std::string name;                  // directory or file stem, for display
  std::string architecture = "LlamaForCausalLM";
  int max_position_embeddings = 8192;
  int32_t bos_token_id = -1;         // -1: none
  std::vector<int32_t> eos_token_ids;
};

// Parses an HF config.json (rope_scaling + rope_theta, or rope_parameters; explicit or derived
// head_dim). Throws Error naming the file and the problem.
ModelConfig parse_model_config(const std::string& json_text, const std::string& source_name);
ModelConfig load_model_config(const std::filesystem::path& config_json);

}  // namespace lazyscope

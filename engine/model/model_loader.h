#pragma once
// Loads a model from an HF checkpoint directory or a single GGUF file.
#include <filesystem>
#include <memory>
#include <string>

#include "base/progress.h"
#include "engine/model/config.h"
#include "engine/model/weights.h"
#include "engine/tokenizer/tokenizer.h"

namespace lazyscope {

struct LoadedModel {
  ModelConfig config;
  ModelWeights weights;
  Tokenizer tokenizer;
  std::filesystem::path source;
  std::string identity;  // stable hash of config + weights file identity, part of cache keys
  std::string chat_template;  // jinja text from tokenizer_config.json / GGUF, may be empty
};

struct LoadOptions {
  // false: GGUF matrices kept only in their stored format (the fast CPU backend reads those);
  // norms and HF checkpoints are always converted to fp32.
  bool fp32_matrices = true;
};

// HF directory (config.json, model.safetensors or shards, tokenizer.json) or a .gguf file.
LoadedModel load_model(const std::filesystem::path& path, const ProgressFn& progress = {},
                       const LoadOptions& options = {});

}  // namespace lazyscope

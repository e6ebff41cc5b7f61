#pragma once
// Finds installed models: the per-user model cache that scripts/install_default_model.sh fills.
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

namespace lazyscope {

struct InstalledModel {
  std::string name;            // file stem or directory name
  std::filesystem::path path;  // .gguf file or HF checkpoint directory
  std::uintmax_t size_bytes = 0;
  bool is_default = false;  // the embedded default (SmolLM2-135M-Instruct)
  std::string format;       // "gguf" or "hf"
};

// $LAZYSCOPE_MODEL_DIR, else ${XDG_CACHE_HOME:-$HOME/.cache}/lazyscope/models.
std::filesystem::path model_cache_dir();

// The default model's .gguf when installed and plausible (size, GGUF magic); nullopt otherwise.
std::optional<std::filesystem::path> default_model_path();

// Every model in the cache dir: *.gguf files and directories holding a config.json. Sorted by name.
std::vector<InstalledModel> installed_models();

}  // namespace lazyscope

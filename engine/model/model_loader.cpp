#include "engine/model/model_loader.h"

#include <algorithm>
#include <cctype>
#include <fstream>
#include <sstream>

#include "engine/model/gguf_loader.h"
#include "engine/model/hf_checkpoint.h"
#include "engine/model/hf_special_tokens.h"
#include "base/error.h"

namespace lazyscope {
namespace {

std::string read_file(const std::filesystem::path& path, const std::string& what) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error(path.string() + ": cannot open " + what);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

bool has_gguf_extension(const std::filesystem::path& path) {
  std::string ext = path.extension().string();
  std::transform(ext.begin(), ext.end(), ext.begin(),
                 [](unsigned char c) { return std::tolower(c); });
  return ext == ".gguf";
}

// Maps the loader's stages onto one 0..1 bar: weights take most of the time.
ProgressFn stage(const ProgressFn& progress, double from, double to) {
  if (!progress) return {};
  return [progress, from, to](double f, std::string_view what) {
    progress(from + (to - from) * f, what);
  };
}

LoadedModel load_hf_directory(const std::filesystem::path& dir, const ProgressFn& progress) {
  const std::filesystem::path config_path = dir / "config.json";
  if (!std::filesystem::exists(config_path)) {
    throw Error(dir.string() +
                ": not a model: no config.json in the directory (and not a .gguf file)");
  }
  const std::filesystem::path tokenizer_path = dir / "tokenizer.json";
  if (!std::filesystem::exists(tokenizer_path)) {
    throw Error(dir.string() + ": no tokenizer.json in the checkpoint directory");
  }
  if (progress) progress(0.0, "reading config.json");
  const std::string config_text = read_file(config_path, "model config");
  LoadedModel model;
  model.source = dir;
  model.config = parse_model_config(config_text, config_path.string());
  model.config.name =
      std::filesystem::absolute(config_path).lexically_normal().parent_path().filename().string();

  SafetensorsCheckpoint checkpoint = SafetensorsCheckpoint::open_directory(dir);
  model.identity = checkpoint_identity(config_text, checkpoint);

  if (progress) progress(0.01, "reading tokenizer.json");
  const std::string tokenizer_text = read_file(tokenizer_path, "tokenizer");
  model.tokenizer = Tokenizer::from_json(tokenizer_text, tokenizer_path.string());
  if (model.tokenizer.vocab_size() > model.config.shape.vocab_size) {
    throw Error(tokenizer_path.string() + ": tokenizer has " +
                std::to_string(model.tokenizer.vocab_size()) +
                " tokens but config.json's vocab_size is " +
                std::to_string(model.config.shape.vocab_size));
  }
  const Tokenizer& tok = model.tokenizer;
  HfSpecialTokens special =
      read_hf_special_tokens(dir, model.config, tokenizer_text,
                             [&tok](std::string_view text) { return tok.token_id(text); });
  if (special.bos_id < 0) special.bos_id = tok.bos_id();
  if (special.eos_ids.empty()) special.eos_ids = tok.eos_ids();
  for (int32_t id : special.eos_ids) {
    if (id >= model.config.shape.vocab_size) {
      throw Error(dir.string() + ": EOS token id " + std::to_string(id) +
                  " is outside the vocabulary (" + std::to_string(model.config.shape.vocab_size) +
                  ")");
    }
  }
  if (special.bos_id >= model.config.shape.vocab_size) {
    throw Error(dir.string() + ": BOS token id " + std::to_string(special.bos_id) +
                " is outside the vocabulary (" + std::to_string(model.config.shape.vocab_size) +
                ")");
  }
  model.tokenizer.set_special_tokens(special.bos_id, special.eos_ids, special.add_bos);
  model.config.bos_token_id = special.bos_id;
  model.config.eos_token_ids = special.eos_ids;
  model.chat_template = std::move(special.chat_template);

  model.weights = load_hf_weights(checkpoint, model.config, stage(progress, 0.05, 1.0));
  return model;
}

}  // namespace

LoadedModel load_model(const std::filesystem::path& path, const ProgressFn& progress, const LoadOptions& options) {
  std::error_code ec;
  const auto status = std::filesystem::status(path, ec);
  if (ec || !std::filesystem::exists(status)) {
    throw Error(path.string() + ": no such model file or directory");
  }
  if (std::filesystem::is_regular_file(status)) {
    if (has_gguf_extension(path)) return load_gguf_model(path, progress, options.fp32_matrices);
    if (path.filename() == "config.json") return load_hf_directory(path.parent_path(), progress);
    throw Error(path.string() +
                ": not a model: expected a .gguf file or an HF checkpoint directory");
  }
  if (!std::filesystem::is_directory(status)) {
    throw Error(path.string() +
                ": not a model: expected a .gguf file or an HF checkpoint directory");
  }
  return load_hf_directory(path, progress);
}

}  // namespace lazyscope

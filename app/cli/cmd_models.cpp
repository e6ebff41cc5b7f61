// `lazyscope-cli models`: what is installed in the model cache, and which one is the default.
#include <cstdio>
#include <string>

#include "app/cli/commands.h"
#include "engine/model/config.h"
#include "engine/model/gguf_file.h"
#include "engine/model/gguf_loader.h"
#include "engine/model/model_registry.h"
#include "base/error.h"

namespace lazyscope::cli {
namespace {

std::string human_size(std::uintmax_t bytes) {
  char text[32];
  if (bytes >= (1ull << 30)) {
    std::snprintf(text, sizeof(text), "%.1f GiB", double(bytes) / double(1ull << 30));
  } else {
    std::snprintf(text, sizeof(text), "%.1f MiB", double(bytes) / double(1ull << 20));
  }
  return text;
}

// Shape summary read from the file's header only, or the reason it cannot be read.
std::string describe(const InstalledModel& model) {
  try {
    ModelConfig config;
    std::string quant;
    if (model.format == "gguf") {
      const GgufFile file = GgufFile::open(model.path);
      config = gguf_model_config(file);
      if (const GgufTensorInfo* q = file.find_tensor("blk.0.attn_q.weight")) {
        quant = ", " + ggml_type_name(q->type);
      }
    } else {
      config = load_model_config(model.path / "config.json");
    }
    const ModelShape& s = config.shape;
    return std::to_string(s.num_layers) + " layers, " + std::to_string(s.num_heads) + "/" +
           std::to_string(s.num_kv_heads) + " heads, hidden " + std::to_string(s.hidden_size) +
           ", vocab " + std::to_string(s.vocab_size) + quant;
  } catch (const Error& e) {
    return std::string("unreadable: ") + e.what();
  }
}

void run_models() {
  const auto models = installed_models();
  std::printf("model cache: %s\n", model_cache_dir().string().c_str());
  if (models.empty()) std::printf("no models installed\n");
  for (const InstalledModel& model : models) {
    std::printf("%s %-40s %10s  %s\n    %s\n", model.is_default ? "*" : " ", model.name.c_str(),
                human_size(model.size_bytes).c_str(), describe(model).c_str(),
                model.path.string().c_str());
  }
  if (const auto path = default_model_path()) {
    std::printf("default model: %s\n", path->string().c_str());
  } else {
    std::printf(
        "default model: not installed (run scripts/install_default_model.sh); the tiny "
        "generated model is used instead\n");
  }
}

}  // namespace

void add_models_command(CLI::App& app) {
  CLI::App* command = app.add_subcommand("models", "List installed models and the default one");
  command->callback([] { run_models(); });
}

}  // namespace lazyscope::cli

// make-model: writes a complete HF checkpoint directory with deterministic random weights.
#include <cstdio>
#include <memory>
#include <string>

#include "app/cli/commands.h"
#include "app/cli/progress_bar.h"
#include "engine/model/presets.h"
#include "base/data_dir.h"
#include "base/error.h"

namespace lazyscope::cli {
namespace {

struct MakeModelOptions {
  std::string preset = "tiny";
  uint64_t seed = 1;
  std::string out;
  std::string dtype = "bf16";
  std::string text_dir;
};

void run_make_model(const MakeModelOptions& o) {
  const ModelPreset& preset = find_model_preset(o.preset);
  CheckpointWriteOptions options;
  if (o.dtype == "bf16") {
    options.dtype = TensorDtype::BF16;
  } else if (o.dtype == "f32") {
    options.dtype = TensorDtype::F32;
  } else {
    throw Error("make-model: --dtype must be bf16 or f32, not '" + o.dtype + "'");
  }
  options.text_dir =
      o.text_dir.empty() ? data_path("text", "LAZYSCOPE_TEXT_DIR") : std::filesystem::path(o.text_dir);
  ProgressBar bar;
  write_model_checkpoint(preset, o.seed, o.out, options, bar.callback());
  bar.finish();
  std::printf("wrote %s checkpoint (seed %llu, %s) to %s\n", preset.name.c_str(),
              static_cast<unsigned long long>(o.seed), o.dtype.c_str(), o.out.c_str());
}

}  // namespace

void add_make_model_command(CLI::App& app) {
  auto options = std::make_shared<MakeModelOptions>();
  CLI::App* cmd = app.add_subcommand(
      "make-model",
      "Write a complete HF Llama checkpoint directory (config.json, safetensors, tokenizer.json "
      "trained on the bundled text, tokenizer_config.json, generation_config.json) with "
      "deterministic random weights. The same preset, seed and dtype give identical files on "
      "every machine. Presets: tiny (the test model: 2 layers, hidden 64, vocab 512), small "
      "(4 layers, hidden 256, vocab 2048), llama-3.1-8b (the real shapes, ~16 GB of bf16 in "
      "~2 GB shards; its tokenizer is the small 2048-token one, so ids past 2048 never occur).");
  cmd->add_option("--preset", options->preset, "Model shape: tiny, small or llama-3.1-8b")
      ->capture_default_str();
  cmd->add_option("--seed", options->seed, "Random seed of the weights")->capture_default_str();
  cmd->add_option("--out", options->out,
                  "Output directory (created; checkpoint files in it are replaced)")
      ->required();
  cmd->add_option("--dtype", options->dtype, "Weight dtype: bf16 or f32")
      ->check(CLI::IsMember({"bf16", "f32"}))
      ->capture_default_str();
  cmd->add_option("--text-dir", options->text_dir,
                  "Directory of *.txt files to train the tokenizer on (default: "
                  "$LAZYSCOPE_TEXT_DIR, else the installed text in share/lazyscope/text)");
  cmd->callback([options] { run_make_model(*options); });
}

}  // namespace lazyscope::cli

#include "engine/runtime/default_model.h"

#include "engine/model/model_registry.h"
#include "engine/model/presets.h"
#include "base/atomic_file.h"
#include "base/data_dir.h"
#include "base/error.h"

namespace lazyscope {
namespace {

bool holds_model(const std::filesystem::path& dir) {
  return std::filesystem::exists(dir / "config.json") && std::filesystem::exists(dir / "tokenizer.json");
}

std::filesystem::path generated_preset(const std::string& name, const ProgressFn& progress) {
  const std::filesystem::path dir = model_cache_dir() / ("lazyscope-" + name);
  write_generated_model(name, dir, progress);
  return dir;
}

}  // namespace

void write_generated_model(const std::string& name, const std::filesystem::path& dir, const ProgressFn& progress) {
  if (holds_model(dir)) return;
  // Write next to it and rename, so an interrupted first start never leaves half a model; what a
  // killed first start left behind is removed here.
  std::filesystem::create_directories(dir.parent_path());
  remove_orphaned_temporaries(dir);
  const std::filesystem::path tmp = temporary_sibling(dir);
  CheckpointWriteOptions options;
  options.text_dir = data_path("text", "LAZYSCOPE_TEXT_DIR");
  std::error_code ec;
  try {
    write_model_checkpoint(find_model_preset(name), 7, tmp, options, progress);
  } catch (...) {
    std::filesystem::remove_all(tmp, ec);  // a cancelled or failed write leaves nothing behind
    throw;
  }
  std::filesystem::rename(tmp, dir, ec);
  if (ec) std::filesystem::remove_all(tmp, ec);  // another process won the race
  if (!holds_model(dir)) throw Error(dir.string() + ": could not write the generated " + name + " model there");
}

ResolvedModel resolve_model(const std::string& spec, const ProgressFn& progress) {
  if (spec.empty() || spec == "default") {
    if (auto smol = default_model_path()) return {*smol, ""};
    return {generated_preset("tiny", progress),
            "SmolLM2-135M-Instruct is not installed (scripts/install_default_model.sh): using the generated tiny model"};
  }
  if (spec == "tiny" || spec == "small") return {generated_preset(spec, progress), ""};
  if (!std::filesystem::exists(spec)) throw Error(spec + ": no such model directory or file");
  return {spec, ""};
}

}  // namespace lazyscope

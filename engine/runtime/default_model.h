#pragma once
// What "the model" means when a user names none: SmolLM2-135M-Instruct when installed, else
// the generated tiny model (made once in the user's model cache).
#include <filesystem>
#include <string>

#include "base/progress.h"

namespace lazyscope {

struct ResolvedModel {
  std::filesystem::path path;
  std::string note;  // e.g. "SmolLM2 is not installed: using the generated tiny model"
};

// spec: "" or "default" -> the default; "tiny" / "small" -> that generated preset (made on
// first use); anything else is a path to an HF directory or a .gguf file.
ResolvedModel resolve_model(const std::string& spec, const ProgressFn& progress = {});

// The one maker of the generated models ("tiny", "small"): seed 7, bf16 weights, the tokenizer
// trained on the installed text. Written beside `dir` and renamed into place, so an interrupted
// write never leaves half a model; a `dir` that already holds the model is kept as it is.
// The CLI, the workbench and the tests all use it.
void write_generated_model(const std::string& name, const std::filesystem::path& dir,
                           const ProgressFn& progress = {});

}  // namespace lazyscope

#pragma once
// Where the workbench's model comes from: the installed default (SmolLM2) when present, else
// the generated tiny model, written once into the user's cache directory.
#include <QString>
#include <optional>

#include "base/progress.h"

namespace lazyscope::workbench {

// The installed default model (model registry), if any.
std::optional<QString> installed_default_model();
// <user cache>/models/tiny: where the generated tiny model lives.
QString tiny_model_dir();
bool tiny_model_present(const QString& dir);
// Writes the tiny preset (seed 1) into `dir`; throws lazyscope::Error.
void write_tiny_model(const QString& dir, const ProgressFn& progress = {});
// --kv-budget auto: this many blocks per policy pool, sized by the session with its backend's
// own KV element size (fp32 on the CPU, bf16 on the GPU).
constexpr int kAutoKvBlocksPerPolicy = 256;

}  // namespace lazyscope::workbench

// Registers the workbench's Qt resources (they live in a static library).
void lazyscope_init_workbench_resources();

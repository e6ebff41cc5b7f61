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
// A KV budget that gives about `target_blocks` blocks for the model at `path` (fp32 pool);
// 64 MiB when the model's shape cannot be read.
qint64 auto_kv_budget(const QString& path, int target_blocks = 640, int block_size = 16);

}  // namespace lazyscope::workbench

// Registers the workbench's Qt resources (they live in a static library).
void lazyscope_init_workbench_resources();

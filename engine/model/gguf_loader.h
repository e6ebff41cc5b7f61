#pragma once
// Single-file GGUF (llama.cpp's format): metadata, tokenizer, tensors dequantized to fp32.
#include <filesystem>

#include "engine/common/progress.h"
#include "engine/model/model_loader.h"

namespace lazyscope {

LoadedModel load_gguf_model(const std::filesystem::path& gguf_file, const ProgressFn& progress = {});

}  // namespace lazyscope

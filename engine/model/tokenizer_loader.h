#pragma once
// Loads only a model's tokenizer (never its weights): the tokenizer embedded in a .gguf file, or
// an HF directory's tokenizer.json with BOS/EOS read from its config files as the model loader does.
#include <filesystem>

#include "engine/tokenizer/tokenizer.h"

namespace lazyscope {

// Throws Error naming the file when it is missing or unreadable.
Tokenizer load_tokenizer_only(const std::filesystem::path& model);

}  // namespace lazyscope

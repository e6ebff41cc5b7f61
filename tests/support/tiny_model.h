#pragma once
// A tiny generated checkpoint shared by the tests of one process (made once, in a temp dir).
#include <filesystem>

namespace lazyscope::testing {

// The `tiny` preset, seed 7, fp32 weights, tokenizer trained on resources/text.
const std::filesystem::path& tiny_model_dir();

}  // namespace lazyscope::testing

#pragma once
// The make-model presets (tiny, small, llama-3.1-8b: shapes from kernels/synthetic_shapes.h) and
// a writer of complete, deterministic HF checkpoint directories with random weights and a BPE
// tokenizer trained on bundled text.
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/progress.h"
#include "engine/model/safetensors.h"
#include "kernels/model_shape.h"

namespace lazyscope {

struct ModelPreset {
  std::string name;
  ModelShape shape;
  int max_position_embeddings = 131072;
  // Size of the trained BPE vocabulary. For llama-3.1-8b it is smaller than the config's
  // vocab_size (128256): the embedding rows past it are never produced by the tokenizer.
  int tokenizer_vocab_size = 512;
  uint64_t max_shard_bytes = 0;  // 0: a single model.safetensors
};

const std::vector<ModelPreset>& model_presets();
// Throws Error listing the known names.
const ModelPreset& find_model_preset(std::string_view name);

struct CheckpointWriteOptions {
  TensorDtype dtype = TensorDtype::BF16;    // BF16 or F32
  std::filesystem::path text_dir;           // every *.txt in it trains the tokenizer
  std::optional<uint64_t> max_shard_bytes;  // overrides the preset's shard size
};

// Writes config.json, generation_config.json, tokenizer.json, tokenizer_config.json and the
// weights (model.safetensors or shards + index) into `out` (created if needed). Identical
// bytes for the same preset, seed, dtype and texts, on every machine.
void write_model_checkpoint(const ModelPreset& preset, uint64_t seed,
                            const std::filesystem::path& out, const CheckpointWriteOptions& options,
                            const ProgressFn& progress = {});

// Contents of every *.txt file directly in `dir`, sorted by file name. Throws when none.
std::vector<std::string> read_training_texts(const std::filesystem::path& dir);

// Element `index` of the tensor with key preset_tensor_key(seed, name): a normal-ish value (std
// 0.02), or 1 + 0.05*normal for norm weights. Pure integer/IEEE arithmetic (no libm) so every
// machine gets the same bits.
float preset_weight_value(uint64_t tensor_key, uint64_t index, bool is_norm);
uint64_t preset_tensor_key(uint64_t seed, std::string_view tensor_name);

}  // namespace lazyscope

#pragma once
// HF Llama checkpoint directories: tensor naming, weight loading with shape checks, identity.
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "base/progress.h"
#include "engine/model/config.h"
#include "engine/model/safetensors.h"
#include "engine/model/weights.h"

namespace lazyscope {

// One tensor a Llama checkpoint holds, in HF state-dict order.
struct HfTensorSpec {
  std::string name;            // e.g. "model.layers.3.self_attn.q_proj.weight"
  std::vector<int64_t> shape;  // HF Linear layout [out, in]
  int layer = -1;              // -1 for embed / final norm / lm_head
  bool is_norm = false;
};

// Every tensor the config implies (lm_head.weight only when not tied).
std::vector<HfTensorSpec> llama_tensor_specs(const ModelShape& shape);

// The fp32 slot of `weights` that holds `spec` (sized by the caller).
std::vector<float>& weight_slot(ModelWeights& weights, const HfTensorSpec& spec);

// Converts every required tensor to fp32, checking presence (all missing names reported at
// once), shape and dtype. Extra tensors are ignored.
ModelWeights load_hf_weights(const SafetensorsCheckpoint& checkpoint, const ModelConfig& config,
                             const ProgressFn& progress = {});
ModelWeights load_hf_weights(const std::filesystem::path& dir, const ModelConfig& config,
                             const ProgressFn& progress = {});

// FNV-1a 64 over config.json, every file's name, size and header, and samples of its data;
// 16 lowercase hex digits. Stable across copies of the same checkpoint.
std::string checkpoint_identity(const std::string& config_json_text,
                                const SafetensorsCheckpoint& checkpoint);

uint64_t fnv1a64(const void* data, std::size_t size, uint64_t hash = 0xcbf29ce484222325ull);

}  // namespace lazyscope

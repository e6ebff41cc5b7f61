#pragma once
// Writes .safetensors files (F32 or BF16 from fp32 values) and sharded checkpoints with
// model.safetensors.index.json, streaming one tensor at a time.
#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "base/progress.h"
#include "engine/model/safetensors.h"

namespace lazyscope {

struct TensorToWrite {
  std::string name;
  TensorDtype dtype = TensorDtype::F32;  // F32 or BF16
  std::vector<int64_t> shape;
  uint64_t byte_size() const;
};

// Produces the fp32 values of tensor `index` (the vector arrives sized to its element count).
using TensorProducer = std::function<void(std::size_t index, std::vector<float>& values)>;

// One file holding `tensors` in order; data aligned to 8 bytes as the format recommends.
void write_safetensors_file(const std::filesystem::path& path,
                            const std::vector<TensorToWrite>& tensors,
                            const TensorProducer& produce,
                            const std::map<std::string, std::string>& metadata = {},
                            const ProgressFn& progress = {});

// Convenience for small tensors already in memory.
struct TensorWithValues {
  TensorToWrite info;
  std::vector<float> values;
};
void write_safetensors_file(const std::filesystem::path& path,
                            const std::vector<TensorWithValues>& tensors,
                            const std::map<std::string, std::string>& metadata = {});

// Writes model.safetensors when everything fits in `max_shard_bytes` (0: no limit), otherwise
// model-0000i-of-0000n.safetensors + model.safetensors.index.json, in tensor order like HF.
// Removes stale checkpoint files of the other layout in `dir`. Returns the files written.
std::vector<std::filesystem::path> write_safetensors_checkpoint(
    const std::filesystem::path& dir, const std::vector<TensorToWrite>& tensors,
    const TensorProducer& produce, uint64_t max_shard_bytes,
    const std::map<std::string, std::string>& metadata = {}, const ProgressFn& progress = {});

}  // namespace lazyscope

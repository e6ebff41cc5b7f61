#pragma once
// Memory-mapped safetensors files (one file or a sharded checkpoint) with strict validation,
// and exact BF16/F16 -> fp32 conversion.
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <vector>

namespace lazyscope {

enum class TensorDtype {
  BOOL,
  U8,
  I8,
  I16,
  U16,
  F16,
  BF16,
  I32,
  U32,
  F32,
  F64,
  I64,
  U64,
  F8_E4M3,
  F8_E5M2
};

std::string dtype_name(TensorDtype dtype);
std::size_t dtype_size(TensorDtype dtype);
// Only these three convert to fp32.
bool dtype_is_loadable(TensorDtype dtype);

// Exact conversions by bit manipulation (every BF16/F16 value is representable in fp32).
float bf16_to_f32(uint16_t bits);
float f16_to_f32(uint16_t bits);
// Round-to-nearest-even; NaN stays NaN (quiet).
uint16_t f32_to_bf16(float value);

struct TensorInfo {
  std::string name;
  TensorDtype dtype = TensorDtype::F32;
  std::vector<int64_t> shape;
  uint64_t begin = 0;  // data_offsets, relative to the end of the header
  uint64_t end = 0;
  uint64_t element_count() const;
  uint64_t byte_size() const { return end - begin; }
};

// One read-only, memory-mapped .safetensors file. Opening validates the whole header.
class SafetensorsFile {
 public:
  // Throws Error naming the file, the tensor and the problem.
  explicit SafetensorsFile(const std::filesystem::path& path);
  ~SafetensorsFile();
  SafetensorsFile(const SafetensorsFile&) = delete;
  SafetensorsFile& operator=(const SafetensorsFile&) = delete;

  const std::filesystem::path& path() const { return path_; }
  uint64_t file_size() const { return file_size_; }
  const std::vector<TensorInfo>& tensors() const { return tensors_; }  // in file order
  const TensorInfo* find(const std::string& name) const;
  const std::map<std::string, std::string>& metadata() const { return metadata_; }
  // The raw 8-byte length + JSON header, for identity hashes.
  std::span<const uint8_t> header_bytes() const;
  std::span<const uint8_t> tensor_bytes(const TensorInfo& tensor) const;
  // Converts to fp32 (BF16, F16, F32 only) into `out` (resized).
  void read_f32(const TensorInfo& tensor, std::vector<float>& out) const;

 private:
  std::filesystem::path path_;
  const uint8_t* data_ = nullptr;  // the whole mapping
  uint64_t file_size_ = 0;
  uint64_t data_start_ = 0;  // 8 + header length
  std::vector<TensorInfo> tensors_;
  std::map<std::string, std::size_t> index_;
  std::map<std::string, std::string> metadata_;
};

// A checkpoint directory's tensors: model.safetensors, or the shards named by
// model.safetensors.index.json (weight_map), each opened once.
class SafetensorsCheckpoint {
 public:
  struct Entry {
    const SafetensorsFile* file = nullptr;
    const TensorInfo* tensor = nullptr;
  };

  static SafetensorsCheckpoint open_directory(const std::filesystem::path& dir);
  static SafetensorsCheckpoint open_index(const std::filesystem::path& index_json);
  static SafetensorsCheckpoint open_file(const std::filesystem::path& safetensors_file);

  const Entry* find(const std::string& name) const;
  const std::vector<std::unique_ptr<SafetensorsFile>>& files() const { return files_; }
  const std::map<std::string, Entry>& tensors() const { return tensors_; }
  // The index JSON text when sharded (empty otherwise).
  const std::string& index_text() const { return index_text_; }

 private:
  std::vector<std::unique_ptr<SafetensorsFile>> files_;
  std::map<std::string, Entry> tensors_;
  std::string index_text_;
};

}  // namespace lazyscope

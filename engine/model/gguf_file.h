#pragma once
// A memory-mapped, fully validated GGUF container (versions 2 and 3): metadata key/values of
// every type, tensor infos, alignment and data offsets. No interpretation of the contents.
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "engine/model/dequantize.h"

namespace lazyscope {

enum class GgufValueType : uint32_t {
  Uint8 = 0,
  Int8 = 1,
  Uint16 = 2,
  Int16 = 3,
  Uint32 = 4,
  Int32 = 5,
  Float32 = 6,
  Bool = 7,
  String = 8,
  Array = 9,
  Uint64 = 10,
  Int64 = 11,
  Float64 = 12,
};

const char* to_string(GgufValueType type);

// One metadata value. Scalars keep their exact value in the member for their kind; arrays
// hold their elements (which may themselves be arrays).
struct GgufValue {
  GgufValueType type = GgufValueType::Uint8;
  GgufValueType element_type = GgufValueType::Uint8;  // arrays only
  uint64_t uint_value = 0;                            // Uint*, Bool
  int64_t int_value = 0;                              // Int*
  double float_value = 0;                             // Float*
  std::string string_value;
  std::vector<GgufValue> elements;

  bool is_integer() const;
  bool is_float() const;
};

struct GgufTensorInfo {
  std::string name;
  std::vector<int64_t> dims;  // ggml order: dims[0] is the contiguous (row) dimension
  uint32_t type = 0;          // GgmlType id
  uint64_t offset = 0;        // relative to the data section
  uint64_t bytes = 0;
  int64_t elements = 0;
  std::string shape_string() const;  // "[576, 49152]"
};

class GgufFile {
 public:
  // Maps and validates the whole container. Throws Error naming the file and the problem.
  static GgufFile open(const std::filesystem::path& path);
  GgufFile(GgufFile&&) noexcept;
  GgufFile& operator=(GgufFile&&) noexcept;
  ~GgufFile();

  const std::filesystem::path& path() const { return path_; }
  uint32_t version() const { return version_; }
  uint64_t alignment() const { return alignment_; }
  uint64_t data_offset() const { return data_offset_; }
  uint64_t file_size() const { return file_size_; }
  uint64_t header_bytes() const { return data_offset_; }  // metadata + tensor infos

  const std::map<std::string, GgufValue>& metadata() const { return metadata_; }
  const std::vector<GgufTensorInfo>& tensors() const { return tensors_; }

  const GgufValue* find(const std::string& key) const;
  const GgufTensorInfo* find_tensor(const std::string& name) const;

  // Typed getters: nullopt when the key is absent, Error when present with the wrong type.
  std::optional<int64_t> get_int(const std::string& key) const;   // any integer type
  std::optional<double> get_float(const std::string& key) const;  // any float or integer type
  std::optional<bool> get_bool(const std::string& key) const;
  std::optional<std::string> get_string(const std::string& key) const;
  std::optional<std::vector<std::string>> get_string_array(const std::string& key) const;
  std::optional<std::vector<int64_t>> get_int_array(const std::string& key) const;

  // The raw bytes of a tensor (inside the mapping; valid while this object lives).
  const uint8_t* tensor_data(const GgufTensorInfo& tensor) const;
  const uint8_t* bytes() const;  // the whole mapped file
  // Converts the whole tensor to fp32.
  std::vector<float> dequantize(const GgufTensorInfo& tensor) const;

 private:
  GgufFile() = default;
  struct Mapping;
  std::filesystem::path path_;
  std::unique_ptr<Mapping> mapping_;
  uint32_t version_ = 0;
  uint64_t alignment_ = 32;
  uint64_t data_offset_ = 0;
  uint64_t file_size_ = 0;
  std::map<std::string, GgufValue> metadata_;
  std::vector<GgufTensorInfo> tensors_;
  std::map<std::string, std::size_t> tensor_index_;
};

}  // namespace lazyscope

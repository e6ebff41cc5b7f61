#include "engine/model/gguf_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <limits>

#include "base/error.h"

namespace lazyscope {

struct GgufFile::Mapping {
  const uint8_t* data = nullptr;
  std::size_t size = 0;
  ~Mapping() {
    if (data && size) munmap(const_cast<uint8_t*>(data), size);
  }
};

namespace {

constexpr uint32_t kMaxDims = 4;  // ggml's GGML_MAX_DIMS
constexpr uint64_t kMaxStringBytes = 1u << 30;

// Bounds-checked little-endian reader over the header; every failure names file and offset.
class HeaderReader {
 public:
  HeaderReader(const uint8_t* data, uint64_t size, std::string file)
      : data_(data), size_(size), file_(std::move(file)) {}

  uint64_t offset() const { return offset_; }
  uint64_t remaining() const { return size_ - offset_; }

  [[noreturn]] void fail(const std::string& what) const {
    throw Error(file_ + ": " + what + " (at byte offset " + std::to_string(offset_) + ")");
  }

  void need(uint64_t bytes, const char* what) const {
    if (bytes > remaining()) {
      fail(std::string("file is truncated: ") + what + " needs " + std::to_string(bytes) +
           " bytes but only " + std::to_string(remaining()) + " remain");
    }
  }

  template <typename T>
  T read(const char* what) {
    need(sizeof(T), what);
    T value;
    std::memcpy(&value, data_ + offset_, sizeof(T));  // GGUF is little-endian, as is the host
    offset_ += sizeof(T);
    return value;
  }

  std::string read_string(const char* what) {
    const uint64_t length = read<uint64_t>(what);
    if (length > kMaxStringBytes)
      fail(std::string(what) + " has an implausible length " + std::to_string(length));
    need(length, what);
    std::string text(reinterpret_cast<const char*>(data_ + offset_), std::size_t(length));
    offset_ += length;
    return text;
  }

 private:
  const uint8_t* data_;
  uint64_t size_;
  uint64_t offset_ = 0;
  std::string file_;
};

// Smallest encoded size of one value, to reject absurd array counts before allocating.
uint64_t min_encoded_bytes(GgufValueType type) {
  switch (type) {
    case GgufValueType::Uint8:
    case GgufValueType::Int8:
    case GgufValueType::Bool:
      return 1;
    case GgufValueType::Uint16:
    case GgufValueType::Int16:
      return 2;
    case GgufValueType::Uint32:
    case GgufValueType::Int32:
    case GgufValueType::Float32:
      return 4;
    case GgufValueType::Uint64:
    case GgufValueType::Int64:
    case GgufValueType::Float64:
      return 8;
    case GgufValueType::String:
      return 8;
    case GgufValueType::Array:
      return 12;
  }
  return 1;
}

bool valid_value_type(uint32_t type) { return type <= uint32_t(GgufValueType::Float64); }

GgufValue read_value(HeaderReader& in, GgufValueType type, const std::string& key, int depth) {
  GgufValue value;
  value.type = type;
  const char* what = "metadata value";
  switch (type) {
    case GgufValueType::Uint8:
      value.uint_value = in.read<uint8_t>(what);
      break;
    case GgufValueType::Int8:
      value.int_value = in.read<int8_t>(what);
      break;
    case GgufValueType::Uint16:
      value.uint_value = in.read<uint16_t>(what);
      break;
    case GgufValueType::Int16:
      value.int_value = in.read<int16_t>(what);
      break;
    case GgufValueType::Uint32:
      value.uint_value = in.read<uint32_t>(what);
      break;
    case GgufValueType::Int32:
      value.int_value = in.read<int32_t>(what);
      break;
    case GgufValueType::Uint64:
      value.uint_value = in.read<uint64_t>(what);
      break;
    case GgufValueType::Int64:
      value.int_value = in.read<int64_t>(what);
      break;
    case GgufValueType::Float32:
      value.float_value = in.read<float>(what);
      break;
    case GgufValueType::Float64:
      value.float_value = in.read<double>(what);
      break;
    case GgufValueType::Bool: {
      const uint8_t b = in.read<uint8_t>(what);
      if (b > 1) in.fail("metadata key '" + key + "' has a bool value of " + std::to_string(b));
      value.uint_value = b;
      break;
    }
    case GgufValueType::String:
      value.string_value = in.read_string("metadata string");
      break;
    case GgufValueType::Array: {
      if (depth > 8) in.fail("metadata key '" + key + "' nests arrays too deeply");
      const uint32_t element_type = in.read<uint32_t>("array element type");
      if (!valid_value_type(element_type)) {
        in.fail("metadata key '" + key + "' has an array of unknown value type " +
                std::to_string(element_type));
      }
      value.element_type = GgufValueType(element_type);
      const uint64_t count = in.read<uint64_t>("array length");
      if (count > in.remaining() / min_encoded_bytes(value.element_type)) {
        in.fail("file is truncated: metadata key '" + key + "' claims " + std::to_string(count) +
                " array elements, more than the file holds");
      }
      value.elements.reserve(std::size_t(count));
      for (uint64_t i = 0; i < count; ++i) {
        value.elements.push_back(read_value(in, value.element_type, key, depth + 1));
      }
      break;
    }
  }
  return value;
}

}  // namespace

const char* to_string(GgufValueType type) {
  switch (type) {
    case GgufValueType::Uint8:
      return "uint8";
    case GgufValueType::Int8:
      return "int8";
    case GgufValueType::Uint16:
      return "uint16";
    case GgufValueType::Int16:
      return "int16";
    case GgufValueType::Uint32:
      return "uint32";
    case GgufValueType::Int32:
      return "int32";
    case GgufValueType::Float32:
      return "float32";
    case GgufValueType::Bool:
      return "bool";
    case GgufValueType::String:
      return "string";
    case GgufValueType::Array:
      return "array";
    case GgufValueType::Uint64:
      return "uint64";
    case GgufValueType::Int64:
      return "int64";
    case GgufValueType::Float64:
      return "float64";
  }
  return "unknown";
}

bool GgufValue::is_integer() const {
  switch (type) {
    case GgufValueType::Uint8:
    case GgufValueType::Int8:
    case GgufValueType::Uint16:
    case GgufValueType::Int16:
    case GgufValueType::Uint32:
    case GgufValueType::Int32:
    case GgufValueType::Uint64:
    case GgufValueType::Int64:
      return true;
    default:
      return false;
  }
}

bool GgufValue::is_float() const {
  return type == GgufValueType::Float32 || type == GgufValueType::Float64;
}

std::string GgufTensorInfo::shape_string() const {
  std::string text = "[";
  for (std::size_t i = 0; i < dims.size(); ++i) {
    if (i) text += ", ";
    text += std::to_string(dims[i]);
  }
  return text + "]";
}

GgufFile::GgufFile(GgufFile&&) noexcept = default;
GgufFile& GgufFile::operator=(GgufFile&&) noexcept = default;
GgufFile::~GgufFile() = default;

GgufFile GgufFile::open(const std::filesystem::path& path) {
  GgufFile file;
  file.path_ = path;
  const std::string name = path.string();

  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw Error(name + ": cannot open: " + std::strerror(errno));
  struct stat st {};
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    throw Error(name + ": not a regular file");
  }
  file.file_size_ = uint64_t(st.st_size);
  file.mapping_ = std::make_unique<Mapping>();
  if (file.file_size_ > 0) {
    void* data = mmap(nullptr, std::size_t(file.file_size_), PROT_READ, MAP_PRIVATE, fd, 0);
    if (data == MAP_FAILED) {
      const int err = errno;
      ::close(fd);
      throw Error(name + ": cannot map the file: " + std::strerror(err));
    }
    file.mapping_->data = static_cast<const uint8_t*>(data);
    file.mapping_->size = std::size_t(file.file_size_);
  }
  ::close(fd);

  HeaderReader in(file.mapping_->data, file.file_size_, name);
  if (file.file_size_ < 4) in.fail("file is truncated: too short to be a GGUF file");
  if (std::memcmp(file.mapping_->data, "GGUF", 4) != 0) {
    throw Error(name + ": not a GGUF file (bad magic; expected the bytes 'GGUF')");
  }
  in.read<uint32_t>("magic");
  file.version_ = in.read<uint32_t>("version");
  if (file.version_ != 2 && file.version_ != 3) {
    throw Error(name + ": GGUF version " + std::to_string(file.version_) +
                " is not supported (supported: 2, 3)");
  }
  const uint64_t tensor_count = in.read<uint64_t>("tensor count");
  const uint64_t kv_count = in.read<uint64_t>("metadata count");
  if (kv_count > in.remaining() / 12) {
    in.fail("file is truncated: header claims " + std::to_string(kv_count) +
            " metadata entries, more than the file holds");
  }
  for (uint64_t i = 0; i < kv_count; ++i) {
    std::string key = in.read_string("metadata key");
    const uint32_t type = in.read<uint32_t>("metadata value type");
    if (!valid_value_type(type)) {
      in.fail("metadata key '" + key + "' has unknown value type " + std::to_string(type));
    }
    GgufValue value = read_value(in, GgufValueType(type), key, 0);
    if (!file.metadata_.emplace(key, std::move(value)).second) {
      in.fail("metadata key '" + key + "' appears twice");
    }
  }

  if (const GgufValue* alignment = file.find("general.alignment")) {
    if (alignment->type != GgufValueType::Uint32) {
      throw Error(name + ": general.alignment must be uint32, not " + to_string(alignment->type));
    }
    const uint64_t a = alignment->uint_value;
    if (a == 0 || (a & (a - 1)) != 0) {
      throw Error(name + ": general.alignment " + std::to_string(a) + " is not a power of two");
    }
    file.alignment_ = a;
  }

  if (tensor_count > in.remaining() / 24) {
    in.fail("file is truncated: header claims " + std::to_string(tensor_count) +
            " tensors, more than the file holds");
  }
  file.tensors_.reserve(std::size_t(tensor_count));
  for (uint64_t i = 0; i < tensor_count; ++i) {
    GgufTensorInfo tensor;
    tensor.name = in.read_string("tensor name");
    const uint32_t n_dims = in.read<uint32_t>("tensor dimension count");
    if (n_dims == 0 || n_dims > kMaxDims) {
      in.fail("tensor '" + tensor.name + "' has " + std::to_string(n_dims) +
              " dimensions (1 to 4 allowed)");
    }
    int64_t elements = 1;
    for (uint32_t d = 0; d < n_dims; ++d) {
      const uint64_t dim = in.read<uint64_t>("tensor dimension");
      if (dim == 0 || dim > uint64_t(std::numeric_limits<int64_t>::max()) ||
          uint64_t(elements) > uint64_t(std::numeric_limits<int64_t>::max()) / dim) {
        in.fail("tensor '" + tensor.name + "' has an invalid dimension " + std::to_string(dim));
      }
      tensor.dims.push_back(int64_t(dim));
      elements *= int64_t(dim);
    }
    tensor.elements = elements;
    tensor.type = in.read<uint32_t>("tensor type");
    const GgmlTypeInfo* info = ggml_type_info(tensor.type);
    if (!info) {
      in.fail("tensor '" + tensor.name + "' has unknown type id " + std::to_string(tensor.type));
    }
    if (tensor.dims[0] % info->block_size != 0) {
      in.fail("tensor '" + tensor.name + "' rows of " + std::to_string(tensor.dims[0]) +
              " elements are not a whole number of " + info->name + " blocks of " +
              std::to_string(info->block_size));
    }
    tensor.bytes = uint64_t(elements / info->block_size) * uint64_t(info->block_bytes);
    tensor.offset = in.read<uint64_t>("tensor offset");
    if (tensor.offset % file.alignment_ != 0) {
      in.fail("tensor '" + tensor.name + "' offset " + std::to_string(tensor.offset) +
              " is not a multiple of the alignment " + std::to_string(file.alignment_));
    }
    if (file.tensor_index_.count(tensor.name))
      in.fail("tensor '" + tensor.name + "' appears twice");
    file.tensor_index_.emplace(tensor.name, file.tensors_.size());
    file.tensors_.push_back(std::move(tensor));
  }

  const uint64_t header_end = in.offset();
  file.data_offset_ = (header_end + file.alignment_ - 1) / file.alignment_ * file.alignment_;
  const uint64_t data_bytes =
      file.file_size_ >= file.data_offset_ ? file.file_size_ - file.data_offset_ : 0;
  if (!file.tensors_.empty() && file.data_offset_ > file.file_size_) {
    throw Error(name + ": file is truncated: the tensor data section would start at byte " +
                std::to_string(file.data_offset_) + " but the file has " +
                std::to_string(file.file_size_) + " bytes");
  }
  for (const GgufTensorInfo& tensor : file.tensors_) {
    if (tensor.offset > data_bytes || tensor.bytes > data_bytes - tensor.offset) {
      throw Error(name + ": tensor '" + tensor.name + "' (" + ggml_type_name(tensor.type) + " " +
                  tensor.shape_string() + ", " + std::to_string(tensor.bytes) +
                  " bytes at data offset " + std::to_string(tensor.offset) +
                  ") runs past the end of the file (file is truncated or the offset is wrong)");
    }
  }
  // Tensors must not share bytes: sort by offset and compare neighbours.
  std::vector<const GgufTensorInfo*> by_offset;
  for (const GgufTensorInfo& tensor : file.tensors_) by_offset.push_back(&tensor);
  std::sort(by_offset.begin(), by_offset.end(),
            [](const GgufTensorInfo* a, const GgufTensorInfo* b) { return a->offset < b->offset; });
  for (std::size_t i = 1; i < by_offset.size(); ++i) {
    const GgufTensorInfo& prev = *by_offset[i - 1];
    const GgufTensorInfo& next = *by_offset[i];
    if (prev.offset + prev.bytes > next.offset) {
      throw Error(name + ": tensors '" + prev.name + "' and '" + next.name +
                  "' overlap (data offsets " + std::to_string(prev.offset) + "+" +
                  std::to_string(prev.bytes) + " and " + std::to_string(next.offset) + ")");
    }
  }
  return file;
}

const GgufValue* GgufFile::find(const std::string& key) const {
  const auto it = metadata_.find(key);
  return it == metadata_.end() ? nullptr : &it->second;
}

const GgufTensorInfo* GgufFile::find_tensor(const std::string& name) const {
  const auto it = tensor_index_.find(name);
  return it == tensor_index_.end() ? nullptr : &tensors_[it->second];
}

namespace {

[[noreturn]] void wrong_type(const std::filesystem::path& path, const std::string& key,
                             const GgufValue& value, const char* expected) {
  std::string actual = to_string(value.type);
  if (value.type == GgufValueType::Array)
    actual += std::string(" of ") + to_string(value.element_type);
  throw Error(path.string() + ": metadata key '" + key + "' should be " + expected + " but is " +
              actual);
}

int64_t integer_of(const GgufValue& value) {
  if (value.type == GgufValueType::Uint64 &&
      value.uint_value > uint64_t(std::numeric_limits<int64_t>::max())) {
    return std::numeric_limits<int64_t>::max();
  }
  switch (value.type) {
    case GgufValueType::Int8:
    case GgufValueType::Int16:
    case GgufValueType::Int32:
    case GgufValueType::Int64:
      return value.int_value;
    default:
      return int64_t(value.uint_value);
  }
}

}  // namespace

std::optional<int64_t> GgufFile::get_int(const std::string& key) const {
  const GgufValue* value = find(key);
  if (!value) return std::nullopt;
  if (!value->is_integer()) wrong_type(path_, key, *value, "an integer");
  return integer_of(*value);
}

std::optional<double> GgufFile::get_float(const std::string& key) const {
  const GgufValue* value = find(key);
  if (!value) return std::nullopt;
  if (value->is_float()) return value->float_value;
  if (value->is_integer()) return double(integer_of(*value));
  wrong_type(path_, key, *value, "a number");
}

std::optional<bool> GgufFile::get_bool(const std::string& key) const {
  const GgufValue* value = find(key);
  if (!value) return std::nullopt;
  if (value->type != GgufValueType::Bool) wrong_type(path_, key, *value, "a bool");
  return value->uint_value != 0;
}

std::optional<std::string> GgufFile::get_string(const std::string& key) const {
  const GgufValue* value = find(key);
  if (!value) return std::nullopt;
  if (value->type != GgufValueType::String) wrong_type(path_, key, *value, "a string");
  return value->string_value;
}

std::optional<std::vector<std::string>> GgufFile::get_string_array(const std::string& key) const {
  const GgufValue* value = find(key);
  if (!value) return std::nullopt;
  if (value->type != GgufValueType::Array || value->element_type != GgufValueType::String) {
    wrong_type(path_, key, *value, "an array of strings");
  }
  std::vector<std::string> out;
  out.reserve(value->elements.size());
  for (const GgufValue& element : value->elements) out.push_back(element.string_value);
  return out;
}

std::optional<std::vector<int64_t>> GgufFile::get_int_array(const std::string& key) const {
  const GgufValue* value = find(key);
  if (!value) return std::nullopt;
  GgufValue probe;
  probe.type = value->element_type;
  if (value->type != GgufValueType::Array || !probe.is_integer()) {
    wrong_type(path_, key, *value, "an array of integers");
  }
  std::vector<int64_t> out;
  out.reserve(value->elements.size());
  for (const GgufValue& element : value->elements) out.push_back(integer_of(element));
  return out;
}

const uint8_t* GgufFile::bytes() const { return mapping_->data; }

const uint8_t* GgufFile::tensor_data(const GgufTensorInfo& tensor) const {
  return mapping_->data + data_offset_ + tensor.offset;
}

std::vector<float> GgufFile::dequantize(const GgufTensorInfo& tensor) const {
  std::vector<float> out(std::size_t(tensor.elements));
  try {
    dequantize_row(GgmlType(tensor.type), tensor_data(tensor), out.data(), tensor.elements);
  } catch (const Error& e) {
    throw Error(path_.string() + ": tensor '" + tensor.name + "': " + e.what());
  }
  return out;
}

}  // namespace lazyscope

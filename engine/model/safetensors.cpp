#include "engine/model/safetensors.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <thread>

#include "base/error.h"

namespace lazyscope {

// safetensors stores little-endian data; reading it in place assumes a little-endian host.
static_assert(std::endian::native == std::endian::little, "safetensors needs a little-endian host");

namespace {

using nlohmann::json;

// Larger headers are refused: safetensors itself caps them at 100 MB.
constexpr uint64_t kMaxHeaderBytes = 100ull << 20;

struct DtypeEntry {
  TensorDtype dtype;
  const char* name;
  std::size_t size;
};

constexpr DtypeEntry kDtypes[] = {
    {TensorDtype::BOOL, "BOOL", 1},       {TensorDtype::U8, "U8", 1},
    {TensorDtype::I8, "I8", 1},           {TensorDtype::I16, "I16", 2},
    {TensorDtype::U16, "U16", 2},         {TensorDtype::F16, "F16", 2},
    {TensorDtype::BF16, "BF16", 2},       {TensorDtype::I32, "I32", 4},
    {TensorDtype::U32, "U32", 4},         {TensorDtype::F32, "F32", 4},
    {TensorDtype::F64, "F64", 8},         {TensorDtype::I64, "I64", 8},
    {TensorDtype::U64, "U64", 8},         {TensorDtype::F8_E4M3, "F8_E4M3", 1},
    {TensorDtype::F8_E5M2, "F8_E5M2", 1},
};

const DtypeEntry& entry(TensorDtype dtype) {
  for (const DtypeEntry& e : kDtypes) {
    if (e.dtype == dtype) return e;
  }
  throw Error("internal: unknown TensorDtype");
}

std::string where(const std::filesystem::path& file, const std::string& tensor = "") {
  return tensor.empty() ? file.string() : file.string() + ": tensor '" + tensor + "'";
}

std::string read_text_file(const std::filesystem::path& path, const std::string& what) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error(path.string() + ": cannot open " + what);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

uint64_t read_offset(const json& v, const std::string& context) {
  if (!v.is_number_unsigned() && !(v.is_number_integer() && v.get<int64_t>() >= 0)) {
    throw Error(context + ": data_offsets must be non-negative integers, found " + v.dump());
  }
  return v.get<uint64_t>();
}

}  // namespace

std::string dtype_name(TensorDtype dtype) { return entry(dtype).name; }
std::size_t dtype_size(TensorDtype dtype) { return entry(dtype).size; }
bool dtype_is_loadable(TensorDtype dtype) {
  return dtype == TensorDtype::F32 || dtype == TensorDtype::BF16 || dtype == TensorDtype::F16;
}

float bf16_to_f32(uint16_t bits) { return std::bit_cast<float>(uint32_t(bits) << 16); }

float f16_to_f32(uint16_t h) {
  const uint32_t sign = uint32_t(h & 0x8000u) << 16;
  uint32_t exponent = (h >> 10) & 0x1fu;
  uint32_t mantissa = h & 0x3ffu;
  uint32_t bits;
  if (exponent == 0) {
    if (mantissa == 0) {
      bits = sign;  // signed zero
    } else {
      // Subnormal: shift the mantissa up until its leading one becomes the implicit bit.
      int32_t e = 127 - 15 + 1;
      while ((mantissa & 0x400u) == 0) {
        mantissa <<= 1;
        --e;
      }
      bits = sign | (uint32_t(e) << 23) | ((mantissa & 0x3ffu) << 13);
    }
  } else if (exponent == 0x1f) {
    bits = sign | 0x7f800000u | (mantissa << 13);  // inf, or NaN keeping its payload
  } else {
    bits = sign | ((exponent + 127 - 15) << 23) | (mantissa << 13);
  }
  return std::bit_cast<float>(bits);
}

uint16_t f32_to_bf16(float value) {
  uint32_t bits = std::bit_cast<uint32_t>(value);
  if ((bits & 0x7f800000u) == 0x7f800000u && (bits & 0x007fffffu) != 0) {
    return uint16_t((bits >> 16) | 0x0040u);  // keep NaN a (quiet) NaN
  }
  const uint32_t rounding = 0x7fffu + ((bits >> 16) & 1u);
  return uint16_t((bits + rounding) >> 16);
}

uint64_t TensorInfo::element_count() const {
  uint64_t count = 1;
  for (int64_t d : shape) count *= uint64_t(d);
  return count;
}

SafetensorsFile::SafetensorsFile(const std::filesystem::path& path) : path_(path) {
  const std::string file = path.string();
  int fd = ::open(file.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw Error(file + ": cannot open safetensors file: " + std::strerror(errno));
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    throw Error(file + ": not a regular file");
  }
  file_size_ = uint64_t(st.st_size);
  if (file_size_ < 8) {
    ::close(fd);
    throw Error(file + ": truncated safetensors file (" + std::to_string(file_size_) +
                " bytes, the 8-byte header length alone needs 8)");
  }
  void* mapping = ::mmap(nullptr, file_size_, PROT_READ, MAP_PRIVATE, fd, 0);
  ::close(fd);
  if (mapping == MAP_FAILED) throw Error(file + ": mmap failed: " + std::strerror(errno));
  data_ = static_cast<const uint8_t*>(mapping);

  try {
    uint64_t header_len = 0;
    std::memcpy(&header_len, data_, 8);
    if (header_len > kMaxHeaderBytes) {
      throw Error(file + ": header length " + std::to_string(header_len) + " is absurd (limit " +
                  std::to_string(kMaxHeaderBytes) + " bytes)");
    }
    if (header_len > file_size_ - 8) {
      throw Error(file + ": header length " + std::to_string(header_len) +
                  " runs past the end of the file (" + std::to_string(file_size_) + " bytes)");
    }
    data_start_ = 8 + header_len;
    const uint64_t data_size = file_size_ - data_start_;
    const char* header = reinterpret_cast<const char*>(data_ + 8);
    json j;
    try {
      j = json::parse(header, header + header_len);
    } catch (const json::exception& e) {
      throw Error(file + ": header is not valid JSON: " + e.what());
    }
    if (!j.is_object()) throw Error(file + ": header must be a JSON object");

    for (auto it = j.begin(); it != j.end(); ++it) {
      const std::string& name = it.key();
      const std::string ctx = where(path, name);
      if (name == "__metadata__") {
        if (!it->is_object()) throw Error(file + ": __metadata__ must be an object");
        for (auto m = it->begin(); m != it->end(); ++m) {
          if (!m->is_string())
            throw Error(file + ": __metadata__ value '" + m.key() + "' is not a string");
          metadata_[m.key()] = m->get<std::string>();
        }
        continue;
      }
      const json& t = *it;
      if (!t.is_object()) throw Error(ctx + ": entry must be an object");
      TensorInfo info;
      info.name = name;
      auto dt = t.find("dtype");
      if (dt == t.end() || !dt->is_string()) throw Error(ctx + ": missing or non-string 'dtype'");
      const std::string dname = dt->get<std::string>();
      const DtypeEntry* found = nullptr;
      for (const DtypeEntry& e : kDtypes) {
        if (dname == e.name) found = &e;
      }
      if (!found) throw Error(ctx + ": unknown dtype '" + dname + "'");
      info.dtype = found->dtype;
      auto sh = t.find("shape");
      if (sh == t.end() || !sh->is_array()) throw Error(ctx + ": missing or non-list 'shape'");
      uint64_t elements = 1;
      bool overflow = false;
      for (const json& d : *sh) {
        if (!d.is_number_integer() || d.get<int64_t>() < 0) {
          throw Error(ctx + ": shape entries must be non-negative integers, found " + sh->dump());
        }
        uint64_t dim = d.get<uint64_t>();
        if (dim != 0 && elements > std::numeric_limits<uint64_t>::max() / dim) overflow = true;
        elements *= dim;
        info.shape.push_back(int64_t(dim));
      }
      auto off = t.find("data_offsets");
      if (off == t.end() || !off->is_array() || off->size() != 2) {
        throw Error(ctx + ": 'data_offsets' must be a list of two integers");
      }
      info.begin = read_offset((*off)[0], ctx);
      info.end = read_offset((*off)[1], ctx);
      if (info.begin > info.end) {
        throw Error(ctx + ": data_offsets begin " + std::to_string(info.begin) + " > end " +
                    std::to_string(info.end));
      }
      if (info.end > data_size) {
        throw Error(ctx + ": data_offsets [" + std::to_string(info.begin) + ", " +
                    std::to_string(info.end) + ") run past the data section (" +
                    std::to_string(data_size) + " bytes)");
      }
      if (overflow || elements > std::numeric_limits<uint64_t>::max() / found->size ||
          elements * found->size != info.byte_size()) {
        throw Error(ctx + ": shape " + sh->dump() + " of " + dname + " needs " +
                    (overflow ? std::string("too many") : std::to_string(elements * found->size)) +
                    " bytes but data_offsets span " + std::to_string(info.byte_size()));
      }
      index_[name] = tensors_.size();
      tensors_.push_back(std::move(info));
    }

    // No two tensors may share bytes.
    std::vector<const TensorInfo*> by_offset;
    for (const TensorInfo& t : tensors_) {
      if (t.byte_size() > 0) by_offset.push_back(&t);
    }
    std::sort(by_offset.begin(), by_offset.end(),
              [](const TensorInfo* a, const TensorInfo* b) { return a->begin < b->begin; });
    for (std::size_t i = 1; i < by_offset.size(); ++i) {
      if (by_offset[i]->begin < by_offset[i - 1]->end) {
        throw Error(file + ": tensors '" + by_offset[i - 1]->name + "' [" +
                    std::to_string(by_offset[i - 1]->begin) + ", " +
                    std::to_string(by_offset[i - 1]->end) + ") and '" + by_offset[i]->name + "' [" +
                    std::to_string(by_offset[i]->begin) + ", " + std::to_string(by_offset[i]->end) +
                    ") overlap");
      }
    }
  } catch (...) {
    ::munmap(const_cast<uint8_t*>(data_), file_size_);
    data_ = nullptr;
    throw;
  }
}

SafetensorsFile::~SafetensorsFile() {
  if (data_) ::munmap(const_cast<uint8_t*>(data_), file_size_);
}

const TensorInfo* SafetensorsFile::find(const std::string& name) const {
  auto it = index_.find(name);
  return it == index_.end() ? nullptr : &tensors_[it->second];
}

std::span<const uint8_t> SafetensorsFile::header_bytes() const { return {data_, data_start_}; }

std::span<const uint8_t> SafetensorsFile::tensor_bytes(const TensorInfo& tensor) const {
  return {data_ + data_start_ + tensor.begin, tensor.byte_size()};
}

void SafetensorsFile::read_f32(const TensorInfo& tensor, std::vector<float>& out) const {
  if (!dtype_is_loadable(tensor.dtype)) {
    throw Error(where(path_, tensor.name) + ": dtype " + dtype_name(tensor.dtype) +
                " cannot be loaded (supported: BF16, F16, F32)");
  }
  std::span<const uint8_t> bytes = tensor_bytes(tensor);
  const std::size_t n = tensor.element_count();
  out.resize(n);
  const uint8_t* src = bytes.data();
  float* dst = out.data();
  const TensorDtype dtype = tensor.dtype;
  auto convert = [src, dst, dtype](std::size_t from, std::size_t to) {
    if (dtype == TensorDtype::F32) {
      std::memcpy(dst + from, src + 4 * from, (to - from) * 4);  // memcpy: data need not be aligned
      return;
    }
    for (std::size_t i = from; i < to; ++i) {
      uint16_t v;
      std::memcpy(&v, src + 2 * i, 2);
      dst[i] = dtype == TensorDtype::BF16 ? bf16_to_f32(v) : f16_to_f32(v);
    }
  };
  // An 8B checkpoint has ~8e9 values; large tensors are split across threads.
  const unsigned threads = std::min(8u, std::max(1u, std::thread::hardware_concurrency()));
  if (n < (std::size_t(1) << 22) || threads == 1) {
    convert(0, n);
    return;
  }
  std::vector<std::thread> pool;
  for (unsigned t = 0; t < threads; ++t)
    pool.emplace_back(convert, n * t / threads, n * (t + 1) / threads);
  for (std::thread& th : pool) th.join();
}

SafetensorsCheckpoint SafetensorsCheckpoint::open_file(const std::filesystem::path& file) {
  SafetensorsCheckpoint ckpt;
  ckpt.files_.push_back(std::make_unique<SafetensorsFile>(file));
  const SafetensorsFile* f = ckpt.files_.back().get();
  for (const TensorInfo& t : f->tensors()) ckpt.tensors_[t.name] = Entry{f, &t};
  return ckpt;
}

SafetensorsCheckpoint SafetensorsCheckpoint::open_index(const std::filesystem::path& index_json) {
  const std::string src = index_json.string();
  SafetensorsCheckpoint ckpt;
  ckpt.index_text_ = read_text_file(index_json, "safetensors index");
  json j;
  try {
    j = json::parse(ckpt.index_text_);
  } catch (const json::exception& e) {
    throw Error(src + ": not valid JSON: " + e.what());
  }
  if (!j.is_object()) throw Error(src + ": top level must be a JSON object");
  auto map = j.find("weight_map");
  if (map == j.end() || !map->is_object()) throw Error(src + ": missing object 'weight_map'");

  const std::filesystem::path dir = index_json.parent_path();
  std::map<std::string, const SafetensorsFile*> opened;
  for (auto it = map->begin(); it != map->end(); ++it) {
    if (!it->is_string())
      throw Error(src + ": weight_map entry '" + it.key() + "' is not a string");
    const std::string shard = it->get<std::string>();
    // Shards live beside the index; a path leaving the directory is refused.
    std::filesystem::path rel(shard);
    if (shard.empty() || rel.is_absolute() ||
        std::any_of(rel.begin(), rel.end(), [](const auto& p) { return p == ".."; })) {
      throw Error(src + ": weight_map entry '" + it.key() + "' names an invalid shard '" + shard +
                  "'");
    }
    auto found = opened.find(shard);
    if (found == opened.end()) {
      std::filesystem::path shard_path = dir / rel;
      // The error_code form: a name the file system refuses (longer than a file name may be,
      // say) is this file's error, not a std::filesystem exception.
      std::error_code ec;
      const bool present = std::filesystem::exists(shard_path, ec);
      if (ec) {
        throw Error(src + ": tensor '" + it.key() + "' is mapped to shard '" + shard +
                    "', which cannot be read (" + ec.message() + ")");
      }
      if (!present) {
        throw Error(src + ": tensor '" + it.key() + "' is mapped to shard '" + shard +
                    "', which does not exist (" + shard_path.string() + ")");
      }
      ckpt.files_.push_back(std::make_unique<SafetensorsFile>(shard_path));
      found = opened.emplace(shard, ckpt.files_.back().get()).first;
    }
    const TensorInfo* t = found->second->find(it.key());
    if (!t) {
      throw Error(src + ": tensor '" + it.key() + "' is mapped to shard '" + shard +
                  "' but that file does not contain it");
    }
    ckpt.tensors_[it.key()] = Entry{found->second, t};
  }
  if (ckpt.files_.empty()) throw Error(src + ": weight_map is empty");
  return ckpt;
}

SafetensorsCheckpoint SafetensorsCheckpoint::open_directory(const std::filesystem::path& dir) {
  const std::filesystem::path index = dir / "model.safetensors.index.json";
  if (std::filesystem::exists(index)) return open_index(index);
  const std::filesystem::path single = dir / "model.safetensors";
  if (std::filesystem::exists(single)) return open_file(single);
  throw Error(dir.string() +
              ": no model.safetensors or model.safetensors.index.json in the checkpoint directory");
}

const SafetensorsCheckpoint::Entry* SafetensorsCheckpoint::find(const std::string& name) const {
  auto it = tensors_.find(name);
  return it == tensors_.end() ? nullptr : &it->second;
}

}  // namespace lazyscope

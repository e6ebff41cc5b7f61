#include "engine/model/safetensors_writer.h"

#include <cstdio>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <regex>

#include "base/error.h"

namespace lazyscope {
namespace {

using ordered_json = nlohmann::ordered_json;

std::string shard_name(std::size_t i, std::size_t n) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "model-%05zu-of-%05zu.safetensors", i + 1, n);
  return buf;
}

void check_writable(const TensorToWrite& t) {
  if (t.dtype != TensorDtype::F32 && t.dtype != TensorDtype::BF16) {
    throw Error("tensor '" + t.name + "': can only write F32 or BF16, not " + dtype_name(t.dtype));
  }
}

}  // namespace

uint64_t TensorToWrite::byte_size() const {
  uint64_t n = dtype_size(dtype);
  for (int64_t d : shape) n *= uint64_t(d);
  return n;
}

void write_safetensors_file(const std::filesystem::path& path,
                            const std::vector<TensorToWrite>& tensors,
                            const TensorProducer& produce,
                            const std::map<std::string, std::string>& metadata,
                            const ProgressFn& progress) {
  ordered_json header = ordered_json::object();
  if (!metadata.empty()) {
    ordered_json meta = ordered_json::object();
    for (const auto& [k, v] : metadata) meta[k] = v;
    header["__metadata__"] = meta;
  }
  uint64_t offset = 0;
  for (const TensorToWrite& t : tensors) {
    check_writable(t);
    if (header.contains(t.name))
      throw Error(path.string() + ": tensor '" + t.name + "' written twice");
    header[t.name] = {{"dtype", dtype_name(t.dtype)},
                      {"shape", t.shape},
                      {"data_offsets", {offset, offset + t.byte_size()}}};
    offset += t.byte_size();
  }
  std::string text = header.dump();
  text.resize((text.size() + 7) / 8 * 8, ' ');  // pad so the data starts 8-byte aligned

  const std::filesystem::path tmp = path.string() + ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!out) throw Error(tmp.string() + ": cannot open for writing");
    const uint64_t len = text.size();
    out.write(reinterpret_cast<const char*>(&len), 8);
    out.write(text.data(), std::streamsize(text.size()));
    std::vector<float> values;
    std::vector<uint16_t> half;
    uint64_t written = 0;
    for (std::size_t i = 0; i < tensors.size(); ++i) {
      const TensorToWrite& t = tensors[i];
      uint64_t count = 1;
      for (int64_t d : t.shape) count *= uint64_t(d);
      values.assign(count, 0.0f);
      produce(i, values);
      if (values.size() != count) {
        throw Error(path.string() + ": tensor '" + t.name + "': producer returned " +
                    std::to_string(values.size()) + " values, expected " + std::to_string(count));
      }
      if (t.dtype == TensorDtype::F32) {
        out.write(reinterpret_cast<const char*>(values.data()), std::streamsize(count * 4));
      } else {
        half.resize(count);
        for (uint64_t k = 0; k < count; ++k) half[k] = f32_to_bf16(values[k]);
        out.write(reinterpret_cast<const char*>(half.data()), std::streamsize(count * 2));
      }
      written += t.byte_size();
      if (progress) progress(offset ? double(written) / double(offset) : 1.0, t.name);
    }
    out.flush();
    if (!out) throw Error(tmp.string() + ": write failed (disk full?)");
  }
  std::error_code ec;
  std::filesystem::rename(tmp, path, ec);
  if (ec) throw Error(path.string() + ": cannot rename from " + tmp.string() + ": " + ec.message());
}

void write_safetensors_file(const std::filesystem::path& path,
                            const std::vector<TensorWithValues>& tensors,
                            const std::map<std::string, std::string>& metadata) {
  std::vector<TensorToWrite> infos;
  for (const TensorWithValues& t : tensors) infos.push_back(t.info);
  write_safetensors_file(
      path, infos, [&](std::size_t i, std::vector<float>& v) { v = tensors[i].values; }, metadata);
}

std::vector<std::filesystem::path> write_safetensors_checkpoint(
    const std::filesystem::path& dir, const std::vector<TensorToWrite>& tensors,
    const TensorProducer& produce, uint64_t max_shard_bytes,
    const std::map<std::string, std::string>& metadata, const ProgressFn& progress) {
  // Greedy split in tensor order; a tensor larger than the limit gets a shard of its own.
  std::vector<std::vector<std::size_t>> shards(1);
  uint64_t shard_bytes = 0, total = 0;
  for (std::size_t i = 0; i < tensors.size(); ++i) {
    const uint64_t size = tensors[i].byte_size();
    if (max_shard_bytes && !shards.back().empty() && shard_bytes + size > max_shard_bytes) {
      shards.emplace_back();
      shard_bytes = 0;
    }
    shards.back().push_back(i);
    shard_bytes += size;
    total += size;
  }

  // Stale files of the other layout would make a loader read the wrong weights.
  const std::regex shard_pattern(R"(model-\d+-of-\d+\.safetensors)");
  for (const auto& e : std::filesystem::directory_iterator(dir)) {
    const std::string name = e.path().filename().string();
    if (name == "model.safetensors" || name == "model.safetensors.index.json" ||
        std::regex_match(name, shard_pattern)) {
      std::filesystem::remove(e.path());
    }
  }

  std::vector<std::filesystem::path> written;
  if (shards.size() == 1) {
    written.push_back(dir / "model.safetensors");
    write_safetensors_file(written.back(), tensors, produce, metadata, progress);
    return written;
  }

  nlohmann::ordered_json weight_map = nlohmann::ordered_json::object();
  uint64_t done = 0;
  for (std::size_t s = 0; s < shards.size(); ++s) {
    std::vector<TensorToWrite> part;
    uint64_t part_bytes = 0;
    for (std::size_t i : shards[s]) {
      part.push_back(tensors[i]);
      part_bytes += tensors[i].byte_size();
    }
    const std::string name = shard_name(s, shards.size());
    for (const TensorToWrite& t : part) weight_map[t.name] = name;
    ProgressFn shard_progress;
    if (progress) {
      shard_progress = [&, done, part_bytes](double f, std::string_view what) {
        progress(total ? (double(done) + f * double(part_bytes)) / double(total) : 1.0, what);
      };
    }
    written.push_back(dir / name);
    write_safetensors_file(
        written.back(), part,
        [&](std::size_t i, std::vector<float>& v) { produce(shards[s][i], v); }, metadata,
        shard_progress);
    done += part_bytes;
  }
  nlohmann::ordered_json index = {{"metadata", {{"total_size", total}}},
                                  {"weight_map", weight_map}};
  const std::filesystem::path index_path = dir / "model.safetensors.index.json";
  std::ofstream out(index_path, std::ios::trunc);
  out << index.dump(2) << "\n";
  if (!out) throw Error(index_path.string() + ": write failed");
  written.push_back(index_path);
  return written;
}

}  // namespace lazyscope

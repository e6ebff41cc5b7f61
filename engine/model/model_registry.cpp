#include "engine/model/model_registry.h"

#include <algorithm>
#include <cstdlib>
#include <fstream>

namespace lazyscope {
namespace {

constexpr std::uintmax_t kMinDefaultBytes = 50ull * 1024 * 1024;

bool is_default_name(const std::string& file_name) {
  std::string lower = file_name;
  std::transform(lower.begin(), lower.end(), lower.begin(),
                 [](unsigned char c) { return char(std::tolower(c)); });
  return lower.find("smollm2") != std::string::npos && lower.size() > 5 &&
         lower.substr(lower.size() - 5) == ".gguf";
}

bool has_gguf_magic(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  char magic[4] = {};
  return in.read(magic, 4) && std::string(magic, 4) == "GGUF";
}

}  // namespace

std::filesystem::path model_cache_dir() {
  if (const char* dir = std::getenv("LAZYSCOPE_MODEL_DIR"); dir && *dir) return dir;
  std::filesystem::path cache;
  if (const char* xdg = std::getenv("XDG_CACHE_HOME"); xdg && *xdg) {
    cache = xdg;
  } else if (const char* home = std::getenv("HOME"); home && *home) {
    cache = std::filesystem::path(home) / ".cache";
  } else {
    cache = std::filesystem::temp_directory_path();
  }
  return cache / "lazyscope" / "models";
}

std::vector<InstalledModel> installed_models() {
  std::vector<InstalledModel> models;
  std::error_code ec;
  const std::filesystem::path dir = model_cache_dir();
  if (!std::filesystem::is_directory(dir, ec)) return models;
  for (const auto& entry : std::filesystem::directory_iterator(dir, ec)) {
    const std::filesystem::path& path = entry.path();
    InstalledModel model;
    model.name = path.filename().string();
    model.path = path;
    if (entry.is_regular_file(ec) && path.extension() == ".gguf") {
      model.format = "gguf";
      model.name = path.stem().string();
      model.size_bytes = entry.file_size(ec);
      model.is_default = is_default_name(path.filename().string()) &&
                         model.size_bytes > kMinDefaultBytes && has_gguf_magic(path);
    } else if (entry.is_directory(ec) && std::filesystem::exists(path / "config.json", ec)) {
      model.format = "hf";
      for (const auto& file : std::filesystem::directory_iterator(path, ec)) {
        if (file.is_regular_file(ec)) model.size_bytes += file.file_size(ec);
      }
    } else {
      continue;
    }
    models.push_back(std::move(model));
  }
  std::sort(models.begin(), models.end(),
            [](const InstalledModel& a, const InstalledModel& b) { return a.name < b.name; });
  return models;
}

std::optional<std::filesystem::path> default_model_path() {
  for (const InstalledModel& model : installed_models()) {
    if (model.is_default) return model.path;
  }
  return std::nullopt;
}

}  // namespace lazyscope

#pragma once
// Helpers shared by the fuzz targets: loaders that read files get the input through a scratch
// file of this process (on tmpfs when there is one), and expected errors are swallowed so that
// only crashes, hangs, leaks and sanitizer findings stop the fuzzer.
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <string>

namespace lazyscope::fuzz {

inline const std::filesystem::path& scratch_dir() {
  static const std::filesystem::path dir = [] {
    std::error_code ec;
    const std::filesystem::path base = std::filesystem::is_directory("/dev/shm", ec)
                                           ? std::filesystem::path("/dev/shm")
                                           : std::filesystem::temp_directory_path();
    std::filesystem::path d = base / ("lazyscope-fuzz-" + std::to_string(::getpid()));
    std::filesystem::create_directories(d);
    return d;
  }();
  return dir;
}

// Writes the input to scratch_dir()/name and returns the path.
inline std::filesystem::path write_scratch(const std::string& name, const uint8_t* data,
                                           std::size_t size) {
  const std::filesystem::path p = scratch_dir() / name;
  std::filesystem::create_directories(p.parent_path());
  std::FILE* f = std::fopen(p.c_str(), "wb");
  if (!f) std::abort();
  if (size && std::fwrite(data, 1, size, f) != size) std::abort();
  std::fclose(f);
  return p;
}

inline std::filesystem::path write_scratch(const std::string& name, const std::string& text) {
  return write_scratch(name, reinterpret_cast<const uint8_t*>(text.data()), text.size());
}

}  // namespace lazyscope::fuzz

#pragma once
// Helpers for the checkpoint tests: scratch directories and hand-made safetensors files.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>

namespace lazyscope::testing {

// A fresh directory under the system temp dir, removed with its contents on destruction.
class ScratchDir {
 public:
  ScratchDir() {
    std::random_device rd;
    path_ = std::filesystem::temp_directory_path() /
            ("lazyscope-model-test-" + std::to_string(rd()) + std::to_string(rd()));
    std::filesystem::create_directories(path_);
  }
  ~ScratchDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  const std::filesystem::path& path() const { return path_; }
  std::filesystem::path operator/(const std::string& name) const { return path_ / name; }

 private:
  std::filesystem::path path_;
};

inline void write_bytes(const std::filesystem::path& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), std::streamsize(bytes.size()));
}

// 8-byte little-endian header length (or `declared_length` when given) + header + data.
inline std::string safetensors_bytes(const std::string& header, const std::string& data,
                                     int64_t declared_length = -1) {
  uint64_t len = declared_length >= 0 ? uint64_t(declared_length) : header.size();
  std::string bytes(reinterpret_cast<const char*>(&len), 8);
  return bytes + header + data;
}

inline std::string read_bytes(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

// Runs `command` through the shell; returns its exit status.
inline int run_shell(const std::string& command) {
  int status = std::system(command.c_str());
  return status == -1 ? -1 : WEXITSTATUS(status);
}

}  // namespace lazyscope::testing

#pragma once
// Helpers shared by the GGUF tests: a scratch directory and the Python fixture writer.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>

namespace lazyscope::testing_gguf {

inline std::filesystem::path scratch_dir(const std::string& name) {
  std::random_device rd;
  const auto dir = std::filesystem::temp_directory_path() /
                   ("lazyscope-gguf-" + name + "-" + std::to_string(rd()));
  std::filesystem::create_directories(dir);
  return dir;
}

// Built with += since GCC 12 at -O3 warns falsely (-Wrestrict) on "literal" + std::string.
inline std::string shell_quoted(const std::filesystem::path& path) {
  std::string text(1, '"');
  text += path.string();
  text += '"';
  return text;
}

// Runs tests/engine/model/gguf_fixtures.py with `args`; true on success.
inline bool run_fixture(const std::string& args) {
  std::string command = shell_quoted(LAZYSCOPE_PYTHON);
  command += ' ';
  command +=
      shell_quoted(std::string(LAZYSCOPE_SOURCE_DIR) + "/tests/engine/model/gguf_fixtures.py");
  command += ' ';
  command += args;
  return std::system(command.c_str()) == 0;
}

inline std::string read_text(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

}  // namespace lazyscope::testing_gguf

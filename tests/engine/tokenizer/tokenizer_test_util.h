#pragma once
// Shared helpers for the tokenizer tests (header-only: the test glob compiles only *_test.cpp):
// the bundled training text, a trained tokenizer.json, scratch directories, running commands.
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "engine/tokenizer/bpe_trainer.h"

namespace lazyscope::tokenizer_testing {

inline std::string read_file(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("cannot open " + path.string());
  std::ostringstream buffer;
  buffer << in.rdbuf();
  return buffer.str();
}

inline void write_file(const std::filesystem::path& path, const std::string& content) {
  std::ofstream out(path, std::ios::binary);
  out << content;
  if (!out) throw std::runtime_error("cannot write " + path.string());
}

// Every resources/text/*.txt file, sorted by name.
inline std::vector<std::string> bundled_texts() {
  std::vector<std::filesystem::path> files;
  for (const auto& entry : std::filesystem::directory_iterator(
           std::filesystem::path(LAZYSCOPE_SOURCE_DIR) / "resources/text"))
    if (entry.path().extension() == ".txt") files.push_back(entry.path());
  std::sort(files.begin(), files.end());
  std::vector<std::string> texts;
  for (const auto& file : files) texts.push_back(read_file(file));
  return texts;
}

// A tokenizer.json trained on the bundled text (vocab 2048, Llama-3 special tokens), built once.
inline const std::string& trained_tokenizer_json() {
  static const std::string json = [] {
    BpeTrainingOptions options;
    options.vocab_size = 2048;
    options.special_tokens = {"<|begin_of_text|>", "<|end_of_text|>", "<|eot_id|>",
                              "<|start_header_id|>", "<|end_header_id|>"};
    return train_bpe_tokenizer_json(bundled_texts(), options);
  }();
  return json;
}

// A fresh empty directory under the system temp dir; the caller removes it.
inline std::filesystem::path scratch_dir(const std::string& tag) {
  static std::mt19937_64 rng{std::random_device{}()};
  const auto dir = std::filesystem::temp_directory_path() /
                   ("lazyscope-" + tag + "-" + std::to_string(::getpid()) + "-" +
                    std::to_string(rng() % 1000000));
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir;
}

// Single-quoted for /bin/sh.
inline std::string shell_quote(const std::string& text) {
  std::string quoted = "'";
  for (char c : text) {
    if (c == '\'')
      quoted += "'\\''";
    else
      quoted += c;
  }
  return quoted + "'";
}

// Runs a shell command; returns its exit status and its stdout (stderr too when merge_stderr).
inline int run_command(const std::string& command, std::string& output, bool merge_stderr = true) {
  const std::string full = merge_stderr ? command + " 2>&1" : command;
  FILE* pipe = ::popen(full.c_str(), "r");
  if (pipe == nullptr) return -1;
  output.clear();
  std::array<char, 4096> buffer{};
  size_t n = 0;
  while ((n = std::fread(buffer.data(), 1, buffer.size(), pipe)) > 0)
    output.append(buffer.data(), n);
  const int status = ::pclose(pipe);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

}  // namespace lazyscope::tokenizer_testing

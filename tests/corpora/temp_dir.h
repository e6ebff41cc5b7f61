#pragma once
// A scratch directory per test, removed afterwards.
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <string>

namespace lazyscope::corpora::testing {

class TempDir {
 public:
  TempDir() {
    static std::atomic<int> counter{0};
    path_ =
        std::filesystem::temp_directory_path() /
        ("lazyscope-corpora-test-" + std::to_string(::getpid()) + "-" + std::to_string(counter++));
    std::filesystem::remove_all(path_);
    std::filesystem::create_directories(path_);
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  const std::filesystem::path& path() const { return path_; }
  std::filesystem::path operator/(const std::string& name) const { return path_ / name; }

  std::filesystem::path write(const std::string& name, const std::string& content) const {
    std::filesystem::path file = path_ / name;
    std::filesystem::create_directories(file.parent_path());
    std::ofstream(file, std::ios::binary) << content;
    return file;
  }

 private:
  std::filesystem::path path_;
};

// Runs `body` and returns the lazyscope::Error message it throws ("" when nothing is thrown).
template <typename Body>
std::string error_of(Body&& body) {
  try {
    body();
  } catch (const std::exception& e) {
    return e.what();
  }
  return "";
}

}  // namespace lazyscope::corpora::testing

// Substring check without gmock (the test executables link gtest only).
#define EXPECT_CONTAINS(haystack, needle)                                      \
  do {                                                                         \
    const std::string haystack_value = (haystack);                             \
    EXPECT_NE(haystack_value.find(needle), std::string::npos)                  \
        << "expected \"" << (needle) << "\" in: \"" << haystack_value << "\""; \
  } while (0)

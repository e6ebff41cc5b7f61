#pragma once
// What one command reads and writes, checked before any work starts, so that no run destroys a
// file: no output is one of the inputs (or inside an input folder), no two outputs of the run
// are the same file, and a file already at an output path is of the kind that output writes
// (replacing our own kind of file stays allowed; it is then replaced atomically).
#include <cstdint>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

namespace lazyscope {

// True when both paths name the same file or folder (also through links or "..").
bool same_file(const std::filesystem::path& a, const std::filesystem::path& b);

class OutputGuard {
 public:
  // Says whether an existing file is of the output's own kind.
  using KindCheck = std::function<bool(const std::filesystem::path&)>;

  // `option` names where the path came from in errors ("--request").
  void input(const std::filesystem::path& path, std::string option);
  // `kind` names what the output writes ("session report"). An empty existing file counts as
  // any kind (a placeholder from mktemp).
  void output(const std::filesystem::path& path, std::string option, std::string kind,
              KindCheck is_kind);
  // Throws Error naming the option, the path and the conflict.
  void check() const;

 private:
  struct Entry {
    std::filesystem::path path;
    std::string option;
    std::string kind;
    KindCheck is_kind;
  };
  std::vector<Entry> inputs_;
  std::vector<Entry> outputs_;
};

// Kind checks for JSON outputs: a JSON object (of at most `max_bytes`) holding every key.
bool is_json_object_with_keys(const std::filesystem::path& path,
                              const std::vector<std::string>& keys,
                              std::uintmax_t max_bytes = std::uintmax_t(1) << 30);

}  // namespace lazyscope

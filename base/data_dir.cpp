#include "base/data_dir.h"

#include <cstdlib>
#include <string>
#include <system_error>
#include <vector>

#include "base/error.h"

#ifndef LAZYSCOPE_BIN_TO_DATA
#define LAZYSCOPE_BIN_TO_DATA "../share/lazyscope"
#endif

namespace lazyscope {
namespace fs = std::filesystem;
namespace {

// Every data folder holds this file, so an unrelated share/lazyscope is never taken for ours.
constexpr const char* kMarker = "lazyscope-data";

bool holds_data(const fs::path& dir) {
  std::error_code ec;
  return fs::is_regular_file(dir / kMarker, ec);
}

fs::path program_dir() {
  std::error_code ec;
  fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  return ec ? fs::path() : exe.parent_path();
}

}  // namespace

fs::path data_dir() {
  if (const char* env = std::getenv("LAZYSCOPE_DATA_DIR"); env && *env) {
    if (!holds_data(env))
      throw Error(std::string("LAZYSCOPE_DATA_DIR=") + env + ": not a LazyScope data folder (no " +
                  kMarker + " file in it)");
    return env;
  }
  std::vector<fs::path> tried;
  const fs::path bin = program_dir();
  if (!bin.empty()) {
    tried.push_back((bin / LAZYSCOPE_BIN_TO_DATA).lexically_normal());
    for (fs::path dir = bin; !dir.empty(); dir = dir.parent_path()) {
      tried.push_back(dir / "share" / "lazyscope");
      if (dir == dir.root_path()) break;
    }
  }
  for (const fs::path& dir : tried) {
    if (holds_data(dir)) return dir;
  }
  std::string list;
  for (const fs::path& dir : tried) list += (list.empty() ? "" : ", ") + dir.string();
  throw Error("LazyScope's data folder (share/lazyscope) was not found (tried " +
              (list.empty() ? std::string("nothing: the program's path is unknown") : list) +
              "); reinstall, or set LAZYSCOPE_DATA_DIR");
}

fs::path data_path(const std::string& relative, const char* override_env) {
  std::error_code ec;
  if (override_env) {
    if (const char* env = std::getenv(override_env); env && *env) {
      if (!fs::exists(env, ec))
        throw Error(std::string(override_env) + "=" + env + ": no such file or folder");
      return env;
    }
  }
  fs::path path = data_dir() / relative;
  if (!fs::exists(path, ec))
    throw Error(path.string() + ": missing from LazyScope's data folder" +
                (override_env ? std::string(" (set ") + override_env + " to use another)" : ""));
  return path;
}

}  // namespace lazyscope

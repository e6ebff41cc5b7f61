#pragma once
// Where the files LazyScope ships beside its programs live (tokenizer training text, the sample
// corpus), found at run time so an installed program never needs the source tree.
#include <filesystem>
#include <string>

namespace lazyscope {

// The data folder: $LAZYSCOPE_DATA_DIR when set; else <folder of the running program>/<bin to
// data path of the install layout> (e.g. /usr/bin -> /usr/share/lazyscope); else the nearest
// share/lazyscope in a folder above the program (the build tree keeps one in its root).
// Throws Error listing the places tried when none holds LazyScope's data.
std::filesystem::path data_dir();

// data_dir() / relative, or the folder named by the environment variable `override_env` when
// that is set. Throws Error naming the path (and the variable) when it does not exist.
std::filesystem::path data_path(const std::string& relative, const char* override_env = nullptr);

}  // namespace lazyscope

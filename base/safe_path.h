#pragma once
// Paths read from datasets and checkpoints are data: a relative name joined under the folder the
// user named, never an absolute path, a ".." step or a link that leads outside that folder.
#include <filesystem>
#include <string>

namespace lazyscope {

// `root` / `relative`, checked to stay inside `root`. Throws Error naming `what` (where the name
// came from: "evidence file of record 3"), the name and the folder.
std::filesystem::path join_inside(const std::filesystem::path& root, const std::string& relative,
                                  const std::string& what);

}  // namespace lazyscope

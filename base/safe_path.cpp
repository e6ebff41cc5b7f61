#include "base/safe_path.h"

#include "base/error.h"

namespace lazyscope {

namespace fs = std::filesystem;

namespace {

// Control bytes shown as \xNN so an error message stays one readable line.
std::string printable(const std::string& name) {
  static const char* hex = "0123456789abcdef";
  std::string out;
  for (unsigned char c : name) {
    if (c < 0x20 || c == 0x7f) {
      out += "\\x";
      out += hex[c >> 4];
      out += hex[c & 15];
    } else {
      out += char(c);
    }
  }
  return out;
}

}  // namespace

std::filesystem::path join_inside(const fs::path& root, const std::string& relative,
                                  const std::string& what) {
  const fs::path rel(relative);
  auto refuse = [&](const std::string& why) -> fs::path {
    throw Error(what + ": the name '" + printable(relative) + "' " + why + " (it must stay inside " +
                root.string() + ")");
  };
  if (relative.empty()) return refuse("is empty");
  if (relative.find('\0') != std::string::npos) return refuse("holds a NUL byte");
  if (rel.is_absolute() || rel.has_root_name() || rel.has_root_directory())
    return refuse("is an absolute path");
  for (const fs::path& part : rel) {
    if (part == "..") return refuse("steps out with '..'");
  }
  const fs::path joined = root / rel;
  // A link inside the folder may still point elsewhere: compare the resolved paths.
  std::error_code ec;
  const fs::path real_root = fs::weakly_canonical(fs::absolute(root), ec);
  const fs::path real = fs::weakly_canonical(fs::absolute(joined), ec);
  if (!ec) {
    auto r = real_root.begin();
    auto p = real.begin();
    for (; r != real_root.end(); ++r, ++p) {
      if (r->empty()) continue;
      if (p == real.end() || *p != *r) return refuse("leads outside through a link");
    }
  }
  return joined;
}

}  // namespace lazyscope

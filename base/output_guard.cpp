#include "base/output_guard.h"

#include <fstream>
#include <nlohmann/json.hpp>

#include "base/error.h"

namespace lazyscope {
namespace {

namespace fs = std::filesystem;

fs::path normal_form(const fs::path& p) {
  std::error_code ec;
  fs::path n = fs::weakly_canonical(fs::absolute(p, ec), ec);
  return ec ? fs::absolute(p).lexically_normal() : n;
}

// True when `inner` is `outer` or lies below it.
bool is_within(const fs::path& inner, const fs::path& outer) {
  const fs::path a = normal_form(inner), b = normal_form(outer);
  auto ia = a.begin();
  for (auto ib = b.begin(); ib != b.end(); ++ib, ++ia) {
    if (ib->empty()) continue;  // a trailing separator
    if (ia == a.end() || *ia != *ib) return false;
  }
  return true;
}

}  // namespace

bool same_file(const fs::path& a, const fs::path& b) {
  std::error_code ec;
  if (fs::exists(a, ec) && fs::exists(b, ec)) {
    const bool same = fs::equivalent(a, b, ec);
    if (!ec) return same;
  }
  return normal_form(a) == normal_form(b);
}

void OutputGuard::input(const fs::path& path, std::string option) {
  if (path.empty()) return;
  inputs_.push_back({path, std::move(option), {}, {}});
}

void OutputGuard::output(const fs::path& path, std::string option, std::string kind,
                         KindCheck is_kind) {
  if (path.empty()) return;
  outputs_.push_back({path, std::move(option), std::move(kind), std::move(is_kind)});
}

void OutputGuard::check() const {
  for (std::size_t o = 0; o < outputs_.size(); ++o) {
    const Entry& out = outputs_[o];
    const std::string where = out.option + " " + out.path.string() + ": ";
    for (const Entry& in : inputs_) {
      std::error_code ec;
      if (same_file(out.path, in.path)) {
        throw Error(where + "is the " + in.option + " input of this run; refusing to write the " +
                    out.kind + " over it (choose another file)");
      }
      if (fs::is_directory(in.path, ec) && is_within(out.path, in.path)) {
        throw Error(where + "lies inside the " + in.option + " input folder " + in.path.string() +
                    "; refusing to write the " + out.kind + " there (choose another folder)");
      }
    }
    for (std::size_t p = 0; p < o; ++p) {
      if (same_file(out.path, outputs_[p].path)) {
        throw Error(where + "is also the " + outputs_[p].option + " output of this run (" +
                    outputs_[p].kind + "); give each output its own file");
      }
    }
    std::error_code ec;
    const fs::file_status status = fs::status(out.path, ec);
    if (ec || !fs::exists(status)) continue;
    if (fs::is_directory(status)) {
      throw Error(where + "is a folder; the " + out.kind + " needs a file name");
    }
    if (!fs::is_regular_file(status))
      throw Error(where + "is not a regular file; refusing to write the " + out.kind);
    if (fs::file_size(out.path, ec) == 0 && !ec) continue;
    if (out.is_kind && !out.is_kind(out.path)) {
      throw Error(where + "exists and is not a " + out.kind +
                  "; refusing to replace it (choose another name, or "
                  "remove the file first)");
    }
  }
}

bool is_json_object_with_keys(const fs::path& path, const std::vector<std::string>& keys,
                              std::uintmax_t max_bytes) {
  std::error_code ec;
  const std::uintmax_t size = fs::file_size(path, ec);
  if (ec || size > max_bytes) return false;
  std::ifstream in(path, std::ios::binary);
  if (!in) return false;
  const nlohmann::json j = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object()) return false;
  for (const std::string& k : keys) {
    if (!j.contains(k)) return false;
  }
  return true;
}

}  // namespace lazyscope

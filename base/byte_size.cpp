#include "base/byte_size.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <map>

#include "base/error.h"

namespace lazyscope {

std::size_t parse_byte_size(const std::string& text) {
  std::size_t pos = 0;
  double value = 0;
  try {
    value = std::stod(text, &pos);
  } catch (const std::exception&) {
    throw Error("cannot read a byte size from '" + text + "' (try 64MiB or 1GiB)");
  }
  std::string unit = text.substr(pos);
  unit.erase(std::remove(unit.begin(), unit.end(), ' '), unit.end());
  std::transform(unit.begin(), unit.end(), unit.begin(), [](unsigned char c) { return char(std::tolower(c)); });
  static const std::map<std::string, double> units = {
      {"", 1},          {"b", 1},          {"k", 1024.0},      {"kb", 1e3},           {"kib", 1024.0},
      {"m", 1048576.0}, {"mb", 1e6},       {"mib", 1048576.0}, {"g", 1073741824.0},   {"gb", 1e9},
      {"gib", 1073741824.0}, {"tb", 1e12}, {"tib", 1099511627776.0}};
  auto it = units.find(unit);
  if (it == units.end() || !(value >= 0) || !std::isfinite(value)) {
    throw Error("cannot read a byte size from '" + text + "' (try 64MiB or 1GiB)");
  }
  const double bytes = value * it->second;
  if (!(bytes < 18446744073709551616.0)) {  // 2^64: beyond any size_t
    throw Error("byte size '" + text + "' is too large (at most 16 EiB)");
  }
  return std::size_t(bytes);
}

}  // namespace lazyscope

#pragma once
// The valid ranges of numbers that come from users and files, checked before any work starts so
// that no option or field can crash a command, hang it or make it grow without bound. Each
// limit has a name; errors name the option or field, the value and the range.
#include <cmath>
#include <cstdint>
#include <sstream>
#include <string>
#include <string_view>
#include <type_traits>

#include "base/error.h"

namespace lazyscope::limits {

inline constexpr int kMaxBlockSize = 1024;  // tokens per KV block
inline constexpr int64_t kMaxNewTokens =
    1'000'000;  // generated tokens per request (capped by the context too)
inline constexpr int64_t kMaxPlacedDocuments = 4096;         // entries of a request's "order"
inline constexpr int64_t kMaxPoolBlocks = int64_t(1) << 24;  // blocks of one KV pool
inline constexpr int kMaxThreads = 4096;

}  // namespace lazyscope::limits

namespace lazyscope {

template <class T>
std::string range_text(T lo, T hi) {
  std::ostringstream s;
  s << lo << ".." << hi;
  return s.str();
}

// Returns `value` when lo <= value <= hi (and finite, for floating point); otherwise throws Error
// "WHAT: VALUE is outside the valid range LO..HI".
template <class T>
T check_range(std::string_view what, T value, T lo, T hi) {
  bool ok = value >= lo && value <= hi;
  if constexpr (std::is_floating_point_v<T>) ok = ok && std::isfinite(value);
  if (!ok) {
    std::ostringstream s;
    s << what << ": " << value << " is outside the valid range " << range_text(lo, hi);
    throw Error(s.str());
  }
  return value;
}

}  // namespace lazyscope

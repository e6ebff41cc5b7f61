#pragma once
// CLI11 validators that state every numeric option's valid range in --help and refuse values
// outside it while parsing, before any command starts work. Unlike CLI::Range they refuse NaN
// and infinities too.
#include <CLI/CLI.hpp>
#include <cmath>
#include <sstream>
#include <string>
#include <type_traits>

#include "kernels/backend.h"

namespace lazyscope::cli {

template <class T>
CLI::Validator in_range(T lo, T hi) {
  std::ostringstream range;
  range << lo << ".." << hi;
  const std::string text = range.str();
  return CLI::Validator(
      [lo, hi, text](std::string& value) -> std::string {
        T v{};
        if (!CLI::detail::lexical_cast(value, v)) return "'" + value + "' is not a number";
        bool ok = v >= lo && v <= hi;
        if constexpr (std::is_floating_point_v<T>) ok = ok && std::isfinite(v);
        if (!ok) return value + " is outside the valid range " + text;
        return {};
      },
      "in " + text);
}

// --tp: 1..the CUDA GPUs of this machine, refused while parsing with why (no GPU, the CPU-only
// build, NCCL compiled out).
inline CLI::Validator tensor_parallel_range() {
  return CLI::Validator(
      [](std::string& value) -> std::string {
        int ranks = 0;
        if (!CLI::detail::lexical_cast(value, ranks)) return "'" + value + "' is not a number";
        return tensor_parallel_error(ranks);
      },
      "in 1..GPUs");
}

}  // namespace lazyscope::cli

#pragma once
// Byte sizes as people type them: "64MiB", "1GiB", "500MB", "4096" (bytes).
#include <cstddef>
#include <string>

namespace lazyscope {

// Throws Error naming the text when it is not a finite, non-negative size with a known unit.
std::size_t parse_byte_size(const std::string& text);

}  // namespace lazyscope

#pragma once
// GPT-2's reversible byte <-> printable-unicode mapping that byte-level BPE vocabularies are
// written in.
#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace lazyscope::byte_level {

// The UTF-8 text of the printable character that stands for byte b.
const std::string& byte_to_symbol(uint8_t b);

// Appends the byte-level form of raw bytes (each byte becomes one printable character).
void append_encoded(std::string_view raw, std::string& out);
std::string encode(std::string_view raw);

// Reverses encode(); nullopt when a character is outside the 256-symbol alphabet.
std::optional<std::string> decode(std::string_view symbols);

// Decodes one UTF-8 code point at text[pos]; returns its length (1 for an invalid byte) and sets cp
// (or -1 when invalid).
size_t next_code_point(std::string_view text, size_t pos, int32_t& cp);

// Appends the UTF-8 encoding of a code point.
void append_utf8(uint32_t cp, std::string& out);

}  // namespace lazyscope::byte_level

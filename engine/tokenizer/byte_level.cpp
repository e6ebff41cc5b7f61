// The byte-level alphabet: printable bytes stand for themselves, the other 68 are shifted past 255.
#include "engine/tokenizer/byte_level.h"

#include <unordered_map>

namespace lazyscope::byte_level {
namespace {

struct Alphabet {
  std::array<std::string, 256> symbol_of_byte;
  std::unordered_map<uint32_t, uint8_t> byte_of_code_point;

  Alphabet() {
    uint32_t next_shifted = 256;
    for (uint32_t b = 0; b < 256; ++b) {
      const bool printable = (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174);
      const uint32_t cp = printable ? b : next_shifted++;
      append_utf8(cp, symbol_of_byte[b]);
      byte_of_code_point[cp] = static_cast<uint8_t>(b);
    }
  }
};

const Alphabet& alphabet() {
  static const Alphabet instance;
  return instance;
}

}  // namespace

void append_utf8(uint32_t cp, std::string& out) {
  if (cp < 0x80) {
    out.push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out.push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out.push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out.push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

size_t next_code_point(std::string_view text, size_t pos, int32_t& cp) {
  const auto byte = [&](size_t i) { return static_cast<uint8_t>(text[i]); };
  const uint8_t lead = byte(pos);
  cp = -1;
  size_t length = 0;
  uint32_t value = 0;
  uint32_t minimum = 0;
  if (lead < 0x80) {
    cp = lead;
    return 1;
  } else if ((lead & 0xE0) == 0xC0) {
    length = 2, value = lead & 0x1F, minimum = 0x80;
  } else if ((lead & 0xF0) == 0xE0) {
    length = 3, value = lead & 0x0F, minimum = 0x800;
  } else if ((lead & 0xF8) == 0xF0) {
    length = 4, value = lead & 0x07, minimum = 0x10000;
  } else {
    return 1;
  }
  if (pos + length > text.size()) return 1;
  for (size_t i = 1; i < length; ++i) {
    if ((byte(pos + i) & 0xC0) != 0x80) return 1;
    value = (value << 6) | (byte(pos + i) & 0x3F);
  }
  if (value < minimum || value > 0x10FFFF || (value >= 0xD800 && value <= 0xDFFF)) return 1;
  cp = static_cast<int32_t>(value);
  return length;
}

const std::string& byte_to_symbol(uint8_t b) { return alphabet().symbol_of_byte[b]; }

void append_encoded(std::string_view raw, std::string& out) {
  const auto& symbols = alphabet().symbol_of_byte;
  for (char c : raw) out += symbols[static_cast<uint8_t>(c)];
}

std::string encode(std::string_view raw) {
  std::string out;
  out.reserve(raw.size() * 2);
  append_encoded(raw, out);
  return out;
}

std::optional<std::string> decode(std::string_view symbols) {
  const auto& table = alphabet().byte_of_code_point;
  std::string out;
  out.reserve(symbols.size());
  size_t pos = 0;
  while (pos < symbols.size()) {
    int32_t cp = 0;
    pos += next_code_point(symbols, pos, cp);
    if (cp < 0) return std::nullopt;
    const auto it = table.find(static_cast<uint32_t>(cp));
    if (it == table.end()) return std::nullopt;
    out.push_back(static_cast<char>(it->second));
  }
  return out;
}

}  // namespace lazyscope::byte_level

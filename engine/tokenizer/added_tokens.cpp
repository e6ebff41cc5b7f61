// A byte-indexed scan is enough: added tokens are few and their first bytes are rare in prose.
#include "engine/tokenizer/added_tokens.h"

#include <algorithm>

#include "engine/tokenizer/byte_level.h"

namespace lazyscope {
namespace {

// Unicode White_Space, as Rust's char::is_whitespace (what HF strips around lstrip/rstrip tokens).
bool is_white_space(int32_t cp) {
  return (cp >= 0x09 && cp <= 0x0D) || cp == 0x20 || cp == 0x85 || cp == 0xA0 || cp == 0x1680 ||
         (cp >= 0x2000 && cp <= 0x200A) || cp == 0x2028 || cp == 0x2029 || cp == 0x202F ||
         cp == 0x205F || cp == 0x3000;
}

// Length of the white-space character that ends at text[end - 1], or 0.
size_t white_space_before(std::string_view text, size_t begin_limit, size_t end) {
  size_t start = end;
  while (start > begin_limit && end - start < 4) {
    --start;
    if ((static_cast<uint8_t>(text[start]) & 0xC0) != 0x80) break;
  }
  if (start == end) return 0;
  int32_t cp = 0;
  const size_t length = byte_level::next_code_point(text, start, cp);
  return start + length == end && is_white_space(cp) ? length : 0;
}

// Length of the white-space character that starts at text[pos], or 0.
size_t white_space_at(std::string_view text, size_t pos) {
  if (pos >= text.size()) return 0;
  int32_t cp = 0;
  const size_t length = byte_level::next_code_point(text, pos, cp);
  return is_white_space(cp) ? length : 0;
}

}  // namespace

void AddedTokenMatcher::add(AddedTokenRule rule) {
  if (rule.content.empty()) return;
  // Identical contents keep the first id, like HF (later duplicates never match).
  for (const auto& existing : rules_)
    if (existing.content == rule.content) return;
  auto& bucket = rules_by_first_byte_[static_cast<uint8_t>(rule.content[0])];
  rules_.push_back(std::move(rule));
  bucket.push_back(rules_.size() - 1);
  // Longest first, so the first hit at a position is the longest one.
  std::stable_sort(bucket.begin(), bucket.end(), [&](size_t a, size_t b) {
    return rules_[a].content.size() > rules_[b].content.size();
  });
}

void AddedTokenMatcher::split(std::string_view text, std::vector<TextSegment>& out) const {
  if (rules_.empty()) {
    if (!text.empty()) out.push_back(TextSegment{text, -1});
    return;
  }
  size_t plain_begin = 0;
  size_t pos = 0;
  while (pos < text.size()) {
    const AddedTokenRule* hit = nullptr;
    for (size_t index : rules_by_first_byte_[static_cast<uint8_t>(text[pos])]) {
      const auto& rule = rules_[index];
      if (text.substr(pos, rule.content.size()) == rule.content) {
        hit = &rule;
        break;
      }
    }
    if (hit == nullptr) {
      ++pos;
      continue;
    }
    size_t begin = pos;
    size_t end = pos + hit->content.size();
    if (hit->lstrip)
      while (const size_t n = white_space_before(text, plain_begin, begin)) begin -= n;
    if (hit->rstrip)
      while (const size_t n = white_space_at(text, end)) end += n;
    if (begin > plain_begin)
      out.push_back(TextSegment{text.substr(plain_begin, begin - plain_begin), -1});
    out.push_back(TextSegment{text.substr(begin, end - begin), hit->id});
    plain_begin = pos = end;
  }
  if (plain_begin < text.size()) out.push_back(TextSegment{text.substr(plain_begin), -1});
}

}  // namespace lazyscope

// A byte-indexed scan is enough: added tokens are few and their first bytes are rare in prose.
#include "engine/tokenizer/added_tokens.h"

#include <algorithm>

namespace lazyscope {
namespace {

bool is_ascii_space(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v';
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
      while (begin > plain_begin && is_ascii_space(text[begin - 1])) --begin;
    if (hit->rstrip)
      while (end < text.size() && is_ascii_space(text[end])) ++end;
    if (begin > plain_begin) out.push_back(TextSegment{text.substr(plain_begin, begin - plain_begin), -1});
    out.push_back(TextSegment{text.substr(begin, end - begin), hit->id});
    plain_begin = pos = end;
  }
  if (plain_begin < text.size()) out.push_back(TextSegment{text.substr(plain_begin), -1});
}

}  // namespace lazyscope

// PCRE2 wrapper: the tokenizer's pre-tokenizer regexes run here, never in a hand-written splitter.
#define PCRE2_CODE_UNIT_WIDTH 8
#include "engine/tokenizer/regex_splitter.h"

#include <pcre2.h>

#include <algorithm>

#include "base/error.h"

namespace lazyscope {

namespace {

// Unicode White_Space, which is what \s means in Oniguruma (HF tokenizers' regex engine). PCRE2's
// own \s also matches U+180E, which would split differently.
constexpr const char* kWhiteSpaceSet =
    R"(\t\n\x0B\f\r\x20\x{85}\x{A0}\x{1680}\x{2000}-\x{200A}\x{2028}\x{2029}\x{202F}\x{205F}\x{3000})";

// Rewrites \s and \S (outside and inside character classes) to the explicit White_Space set.
std::string with_oniguruma_whitespace(const std::string& pattern) {
  std::string out;
  out.reserve(pattern.size() + 64);
  bool in_class = false;
  size_t class_start = 0;  // index just after '[' or '[^', where a ']' is still a literal
  for (size_t i = 0; i < pattern.size(); ++i) {
    const char c = pattern[i];
    if (c == '\\' && i + 1 < pattern.size()) {
      const char next = pattern[i + 1];
      if (next == 'Q') {  // \Q...\E is literal text: copy it untouched
        const size_t end = pattern.find("\\E", i + 2);
        const size_t stop = end == std::string::npos ? pattern.size() : end + 2;
        out.append(pattern, i, stop - i);
        i = stop - 1;
      } else if (next == 's') {
        out += in_class ? std::string(kWhiteSpaceSet) : "[" + std::string(kWhiteSpaceSet) + "]";
        ++i;
      } else if (next == 'S' && !in_class) {
        out += "[^" + std::string(kWhiteSpaceSet) + "]";
        ++i;
      } else {
        out += c;
        out += next;
        ++i;
      }
      continue;
    }
    if (!in_class && c == '[') {
      in_class = true;
      out += c;
      if (i + 1 < pattern.size() && pattern[i + 1] == '^') out += pattern[++i];
      class_start = i + 1;
      continue;
    }
    if (in_class && c == '[' && i + 1 < pattern.size() && pattern[i + 1] == ':') {
      const size_t end = pattern.find(":]", i + 2);  // POSIX class such as [:alpha:]
      const size_t stop = end == std::string::npos ? pattern.size() : end + 2;
      out.append(pattern, i, stop - i);
      i = stop - 1;
      continue;
    }
    if (in_class && c == ']' && i != class_start) in_class = false;
    out += c;
  }
  return out;
}

}  // namespace

struct RegexSplitter::Compiled {
  pcre2_code* code = nullptr;
  ~Compiled() { pcre2_code_free(code); }
};

RegexSplitter::RegexSplitter(const std::string& pattern, const std::string& context)
    : compiled_(std::make_unique<Compiled>()), pattern_(pattern) {
  int error_code = 0;
  PCRE2_SIZE error_offset = 0;
  // MATCH_INVALID_UTF lets arbitrary bytes through: invalid sequences simply never match.
  const uint32_t options = PCRE2_UTF | PCRE2_UCP | PCRE2_MATCH_INVALID_UTF;
  const std::string translated = with_oniguruma_whitespace(pattern);
  compiled_->code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(translated.data()),
                                  translated.size(), options, &error_code, &error_offset, nullptr);
  if (compiled_->code == nullptr) {
    PCRE2_UCHAR message[256];
    pcre2_get_error_message(error_code, message, sizeof(message));
    throw Error(context + ": cannot compile pre-tokenizer regex at offset " +
                std::to_string(error_offset) + ": " + reinterpret_cast<const char*>(message));
  }
  // JIT is an optimisation only; the interpreter gives identical matches when it is unavailable.
  pcre2_jit_compile(compiled_->code, PCRE2_JIT_COMPLETE);
}

RegexSplitter::~RegexSplitter() = default;
RegexSplitter::RegexSplitter(RegexSplitter&&) noexcept = default;
RegexSplitter& RegexSplitter::operator=(RegexSplitter&&) noexcept = default;

std::vector<std::pair<size_t, size_t>> RegexSplitter::find_all(std::string_view text) const {
  std::vector<std::pair<size_t, size_t>> matches;
  pcre2_match_data* match_data = pcre2_match_data_create_from_pattern(compiled_->code, nullptr);
  if (match_data == nullptr) throw Error("pre-tokenizer regex: out of memory for match data");
  const auto* subject = reinterpret_cast<PCRE2_SPTR>(text.data());
  size_t offset = 0;
  while (offset <= text.size()) {
    const int rc =
        pcre2_match(compiled_->code, subject, text.size(), offset, 0, match_data, nullptr);
    if (rc == PCRE2_ERROR_NOMATCH) break;
    if (rc < 0) {
      PCRE2_UCHAR message[256];
      pcre2_get_error_message(rc, message, sizeof(message));
      pcre2_match_data_free(match_data);
      throw Error("pre-tokenizer regex /" + pattern_ + "/: matching failed at byte " +
                  std::to_string(offset) + ": " + reinterpret_cast<const char*>(message));
    }
    const PCRE2_SIZE* ovector = pcre2_get_ovector_pointer(match_data);
    const size_t begin = ovector[0];
    const size_t end = ovector[1];
    if (end > begin) {
      matches.emplace_back(begin, end);
      offset = end;
    } else {
      // An empty match yields no piece; step over one whole character to make progress.
      if (begin >= text.size()) break;
      size_t step = 1;
      while (begin + step < text.size() &&
             (static_cast<uint8_t>(text[begin + step]) & 0xC0) == 0x80)
        ++step;
      offset = begin + step;
    }
  }
  pcre2_match_data_free(match_data);
  return matches;
}

std::vector<std::string_view> RegexSplitter::split_isolated(std::string_view text) const {
  std::vector<std::string_view> pieces;
  size_t cursor = 0;
  for (const auto& [begin, end] : find_all(text)) {
    if (begin > cursor) pieces.push_back(text.substr(cursor, begin - cursor));
    pieces.push_back(text.substr(begin, end - begin));
    cursor = end;
  }
  if (cursor < text.size()) pieces.push_back(text.substr(cursor));
  return pieces;
}

std::vector<std::string_view> RegexSplitter::split(std::string_view text, SplitBehavior behavior,
                                                   bool invert) const {
  if (behavior == SplitBehavior::kIsolated && !invert) return split_isolated(text);
  // Every match and every gap in order, flagged; then merged as HF's SplitDelimiterBehavior does.
  struct Span {
    size_t begin, end;
    bool is_match;
  };
  std::vector<Span> spans;
  size_t cursor = 0;
  for (const auto& [begin, end] : find_all(text)) {
    if (begin > cursor) spans.push_back({cursor, begin, invert});
    spans.push_back({begin, end, !invert});
    cursor = end;
  }
  if (cursor < text.size()) spans.push_back({cursor, text.size(), invert});

  std::vector<Span> merged;
  bool previous_match = false;
  switch (behavior) {
    case SplitBehavior::kIsolated:
      merged = spans;
      break;
    case SplitBehavior::kRemoved:
      for (const auto& span : spans)
        if (!span.is_match) merged.push_back(span);
      break;
    case SplitBehavior::kMergedWithPrevious:
      for (const auto& span : spans) {
        if (span.is_match && !previous_match && !merged.empty()) {
          merged.back().end = span.end;
        } else {
          merged.push_back(span);
        }
        previous_match = span.is_match;
      }
      break;
    case SplitBehavior::kMergedWithNext:
      for (auto it = spans.rbegin(); it != spans.rend(); ++it) {
        if (it->is_match && !previous_match && !merged.empty()) {
          merged.back().begin = it->begin;
        } else {
          merged.push_back(*it);
        }
        previous_match = it->is_match;
      }
      std::reverse(merged.begin(), merged.end());
      break;
    case SplitBehavior::kContiguous:
      for (const auto& span : spans) {
        if (span.is_match == previous_match && !merged.empty()) {
          merged.back().end = span.end;
        } else {
          merged.push_back(span);
        }
        previous_match = span.is_match;
      }
      break;
  }
  std::vector<std::string_view> pieces;
  pieces.reserve(merged.size());
  for (const auto& span : merged) pieces.push_back(text.substr(span.begin, span.end - span.begin));
  return pieces;
}

}  // namespace lazyscope

#pragma once
// A compiled PCRE2 pattern (UTF + UCP, JIT when available) that cuts text into pre-tokenizer
// pieces.
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace lazyscope {

// Llama 3's Split pattern (cl100k-style: case-insensitive contractions, digits in groups of 1-3).
inline constexpr const char* kLlama3SplitPattern =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

// The pattern GPT-2's ByteLevel pre-tokenizer uses when use_regex is true.
inline constexpr const char* kGpt2SplitPattern =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

// What HF's Split pre-tokenizer does with each match (SplitDelimiterBehavior).
enum class SplitBehavior { kIsolated, kRemoved, kMergedWithPrevious, kMergedWithNext, kContiguous };

class RegexSplitter {
 public:
  // Throws Error naming `context` and the PCRE2 message when the pattern does not compile.
  RegexSplitter(const std::string& pattern, const std::string& context);
  ~RegexSplitter();
  RegexSplitter(RegexSplitter&&) noexcept;
  RegexSplitter& operator=(RegexSplitter&&) noexcept;

  // Byte ranges [begin, end) of every non-overlapping match, left to right. Invalid UTF-8 bytes
  // never match, so they fall into the gaps.
  std::vector<std::pair<size_t, size_t>> find_all(std::string_view text) const;

  // HF Split with behavior Isolated: matches and the gaps between them, in order, none empty.
  std::vector<std::string_view> split_isolated(std::string_view text) const;

  // HF Split with any behavior; invert swaps the roles of matches and gaps first.
  std::vector<std::string_view> split(std::string_view text, SplitBehavior behavior,
                                      bool invert) const;

  const std::string& pattern() const { return pattern_; }

 private:
  struct Compiled;
  std::unique_ptr<Compiled> compiled_;
  std::string pattern_;
};

}  // namespace lazyscope

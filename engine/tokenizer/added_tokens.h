#pragma once
// Finds added (special and user) tokens in raw text, leftmost-longest, as HF's AddedVocabulary
// does.
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace lazyscope {

struct AddedTokenRule {
  int32_t id = 0;
  std::string content;
  bool lstrip = false;  // the match swallows whitespace on its left
  bool rstrip = false;  // the match swallows whitespace on its right
};

// A piece of text after added-token extraction: either plain text or one added token.
struct TextSegment {
  std::string_view text;
  int32_t token_id = -1;  // >= 0 when this segment is an added token
};

class AddedTokenMatcher {
 public:
  void add(AddedTokenRule rule);
  bool empty() const { return rules_.empty(); }

  // Cuts text into plain segments and token segments, in order.
  void split(std::string_view text, std::vector<TextSegment>& out) const;

 private:
  std::vector<AddedTokenRule> rules_;
  std::vector<std::vector<size_t>> rules_by_first_byte_ = std::vector<std::vector<size_t>>(256);
};

}  // namespace lazyscope

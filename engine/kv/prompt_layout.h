#pragma once
// A prompt as the KV cache sees it: token segments in placement order (docs/design.md).
#include <cstdint>
#include <string>
#include <vector>

namespace lazyscope {

// The token segments of one prompt (docs/design.md), documents in placement order.
struct PromptLayout {
  std::vector<int32_t> prefix;  // BOS included when the tokenizer adds one
  std::vector<std::vector<int32_t>> documents;
  std::vector<std::string> document_labels;
  std::vector<int32_t> query;
  int total_tokens() const;
};

}  // namespace lazyscope

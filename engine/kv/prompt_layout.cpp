#include "engine/kv/prompt_layout.h"

namespace lazyscope {

int PromptLayout::total_tokens() const {
  int n = int(prefix.size() + query.size());
  for (const auto& d : documents) n += int(d.size());
  return n;
}

}  // namespace lazyscope

#pragma once
// Turns a Request into token segments (docs/design.md): prefix with BOS, documents in placement
// order (each tokenized on its own), query.
#include "engine/kv/cache_manager.h"
#include "engine/runtime/request.h"
#include "engine/tokenizer/tokenizer.h"

namespace lazyscope {

// `tokenizer` may be null (synthetic models): the request must then carry token ids.
PromptLayout build_prompt_layout(const Request& request, const Tokenizer* tokenizer, int vocab_size);

}  // namespace lazyscope

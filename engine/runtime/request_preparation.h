#pragma once
// The one way a Request becomes the prompt that runs: chat template (auto/on/off), system
// text, document order, each document tokenized as its own segment. The CLI, the workbench
// and the scheduler all call this, so the same request is the same token ids everywhere.
// A plain function of the request and the model's tokenizer: no Session needed.
#include <cstdint>
#include <string>
#include <string_view>

#include "engine/kv/prompt_layout.h"
#include "engine/runtime/request.h"
#include "engine/tokenizer/chat_template.h"

namespace lazyscope {

class Tokenizer;
struct LoadedModel;

// auto: the model's chat template when it has one, else the request as written; on: the
// template (a plain "Document: … Question: … Answer:" wording when the model has none);
// off: the request as written.
enum class ChatMode { Auto, On, Off };
// "auto", "on" or "off"; throws Error naming the valid values otherwise.
ChatMode parse_chat_mode(const std::string& text);
const char* to_string(ChatMode mode);

struct PreparationOptions {
  ChatMode chat = ChatMode::Auto;
};

// What a prompt is made with. `tokenizer` is null for synthetic weights (requests must then
// carry token ids).
struct PromptModel {
  const Tokenizer* tokenizer = nullptr;
  std::string_view chat_template;  // jinja text, may be empty
  int vocab_size = 0;
};
// `model` must outlive the returned view.
PromptModel prompt_model_of(const LoadedModel& model, bool has_tokenizer = true);

struct PreparedRequest {
  PromptLayout layout;
  int max_new_tokens = 32;
  bool chat_template_applied = false;
  ChatTemplateKind template_kind = ChatTemplateKind::Plain;  // when applied
};

// Throws Error naming the problem (ids outside the vocabulary, a text request without a
// tokenizer, an order naming a missing document).
PreparedRequest prepare_request(const Request& request, const PreparationOptions& options,
                                const PromptModel& model);

}  // namespace lazyscope

#include "engine/runtime/request_preparation.h"

#include "base/error.h"
#include "engine/model/model_loader.h"
#include "engine/tokenizer/tokenizer.h"

namespace lazyscope {
namespace {

void check_ids(const std::vector<int32_t>& ids, int vocab_size, const std::string& what) {
  for (int32_t id : ids) {
    if (id < 0 || id >= vocab_size) {
      throw Error("request: " + what + " has token id " + std::to_string(id) + " outside the vocabulary of " +
                  std::to_string(vocab_size));
    }
  }
}

// Rewrites a text request's prefix, documents and query in the template's wording; every
// document stays its own segment (its wrapping does not depend on where it is placed).
Request wrap_in_template(const Request& request, std::string_view template_text, ChatTemplateKind* kind) {
  std::vector<RagDocument> docs;
  for (std::size_t i = 0; i < request.documents.size(); ++i) {
    docs.push_back({i < request.document_labels.size() ? request.document_labels[i] : "", request.documents[i]});
  }
  RagPromptParts parts = build_rag_prompt(template_text, request.prefix.value_or(""), docs, request.query);
  *kind = parts.kind;
  Request out = request;
  out.prefix = parts.prefix_text;
  out.documents = parts.document_texts;
  out.query = parts.query_text;
  return out;
}

PromptLayout tokenize(const Request& request, const Tokenizer* tokenizer, int vocab_size) {
  PromptLayout layout;
  if (!tokenizer && !request.uses_ids()) throw Error("request: this model has no tokenizer; give token ids");
  if (request.prefix_ids) {
    layout.prefix = *request.prefix_ids;
  } else {
    if (tokenizer && tokenizer->add_bos() && tokenizer->bos_id() >= 0) layout.prefix.push_back(tokenizer->bos_id());
    if (tokenizer && request.prefix && !request.prefix->empty()) {
      std::vector<int32_t> ids = tokenizer->encode(*request.prefix);
      layout.prefix.insert(layout.prefix.end(), ids.begin(), ids.end());
    }
  }
  check_ids(layout.prefix, vocab_size, "the prefix");
  const bool ids = request.uses_ids();
  for (int index : request.effective_order()) {
    if (index < 0 || index >= request.document_count()) {
      throw Error("request: order names document " + std::to_string(index) + " of " +
                  std::to_string(request.document_count()));
    }
    layout.documents.push_back(ids ? request.document_ids[index] : tokenizer->encode(request.documents[index]));
    check_ids(layout.documents.back(), vocab_size, "document " + std::to_string(index));
    layout.document_labels.push_back(index < int(request.document_labels.size()) ? request.document_labels[index]
                                                                                 : "doc " + std::to_string(index));
  }
  if (request.query_ids) {
    layout.query = *request.query_ids;
  } else if (tokenizer) {
    layout.query = tokenizer->encode(request.query);
  }
  check_ids(layout.query, vocab_size, "the query");
  return layout;
}

}  // namespace

ChatMode parse_chat_mode(const std::string& text) {
  if (text == "auto") return ChatMode::Auto;
  if (text == "on") return ChatMode::On;
  if (text == "off") return ChatMode::Off;
  throw Error("chat template setting \"" + text + "\" is not one of auto, on, off");
}

const char* to_string(ChatMode mode) {
  switch (mode) {
    case ChatMode::Auto:
      return "auto";
    case ChatMode::On:
      return "on";
    case ChatMode::Off:
      return "off";
  }
  return "?";
}

PromptModel prompt_model_of(const LoadedModel& model, bool has_tokenizer) {
  return PromptModel{has_tokenizer ? &model.tokenizer : nullptr, model.chat_template, model.config.shape.vocab_size};
}

PreparedRequest prepare_request(const Request& request, const PreparationOptions& options, const PromptModel& model) {
  PreparedRequest prepared;
  prepared.max_new_tokens = request.max_new_tokens;
  const bool wrap = !request.uses_ids() && model.tokenizer &&
                    (options.chat == ChatMode::On || (options.chat == ChatMode::Auto && !model.chat_template.empty()));
  if (wrap) {
    const Request wrapped = wrap_in_template(request, model.chat_template, &prepared.template_kind);
    prepared.chat_template_applied = true;
    prepared.layout = tokenize(wrapped, model.tokenizer, model.vocab_size);
  } else {
    prepared.layout = tokenize(request, model.tokenizer, model.vocab_size);
  }
  return prepared;
}

}  // namespace lazyscope

#include "engine/runtime/rag_request.h"

#include "engine/tokenizer/chat_template.h"

namespace lazyscope {

Request apply_chat_template(const Request& request, const std::string& template_text) {
  if (request.uses_ids() || template_text.empty()) return request;
  std::vector<RagDocument> docs;
  for (std::size_t i = 0; i < request.documents.size(); ++i) {
    docs.push_back({i < request.document_labels.size() ? request.document_labels[i] : "", request.documents[i]});
  }
  RagPromptParts parts = build_rag_prompt(template_text, request.prefix.value_or(""), docs, request.query);
  Request out = request;
  out.prefix = parts.prefix_text;
  out.documents = parts.document_texts;
  out.query = parts.query_text;
  return out;
}

}  // namespace lazyscope

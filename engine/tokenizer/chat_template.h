#pragma once
// A RAG prompt in the model's own chat format, cut into LazyScope's segments: prefix (system
// turn + the opening of the user turn), one text per document, and the query (question + the
// close of the user turn + the opening of the assistant turn).
#include <string>
#include <string_view>
#include <vector>

namespace lazyscope {

enum class ChatTemplateKind { Plain, ChatML, Llama3 };

const char* to_string(ChatTemplateKind kind);
// From a jinja chat template: "<|im_start|>" -> ChatML, "<|start_header_id|>" -> Llama 3,
// anything else (or empty) -> Plain.
ChatTemplateKind detect_chat_template(std::string_view template_text);

struct RagDocument {
  std::string title;  // may be empty
  std::string text;
};

struct RagPromptParts {
  ChatTemplateKind kind = ChatTemplateKind::Plain;
  std::string prefix_text;                  // tokenized after BOS (when the model adds BOS)
  std::vector<std::string> document_texts;  // one segment each, in the given order
  std::string query_text;                   // ends where the assistant's answer starts
  std::string full_text() const;            // concatenation, for display and full-mode checks
};

// A document's wrapping does not depend on its position, so the same passage is the same
// segment (and the same cache entry) wherever it is placed.
std::string format_rag_document(const RagDocument& document);

// An empty `system` uses the template's own default system message when it has one
// (SmolLM2's), else no system turn.
RagPromptParts build_rag_prompt(ChatTemplateKind kind, std::string_view system,
                                const std::vector<RagDocument>& documents,
                                std::string_view question);
// Same, detecting the kind from the jinja text (and reading its default system message).
RagPromptParts build_rag_prompt(std::string_view template_text, std::string_view system,
                                const std::vector<RagDocument>& documents,
                                std::string_view question);

// The system message a ChatML template inserts when none is given ("" when none).
std::string chatml_default_system(std::string_view template_text);

}  // namespace lazyscope

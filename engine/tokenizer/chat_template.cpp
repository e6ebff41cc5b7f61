#include "engine/tokenizer/chat_template.h"

namespace lazyscope {

const char* to_string(ChatTemplateKind kind) {
  switch (kind) {
    case ChatTemplateKind::Plain:
      return "plain";
    case ChatTemplateKind::ChatML:
      return "chatml";
    case ChatTemplateKind::Llama3:
      return "llama3";
  }
  return "plain";
}

ChatTemplateKind detect_chat_template(std::string_view template_text) {
  if (template_text.find("<|im_start|>") != std::string_view::npos) return ChatTemplateKind::ChatML;
  if (template_text.find("<|start_header_id|>") != std::string_view::npos) {
    return ChatTemplateKind::Llama3;
  }
  return ChatTemplateKind::Plain;
}

std::string chatml_default_system(std::string_view template_text) {
  // SmolLM2's template writes a literal '<|im_start|>system\n...<|im_end|>' when the first
  // message is not a system one; that literal is the default.
  const std::string_view open = "<|im_start|>system\n";
  const std::size_t start = template_text.find(open);
  if (start == std::string_view::npos) return "";
  const std::size_t text_start = start + open.size();
  const std::size_t end = template_text.find("<|im_end|>", text_start);
  if (end == std::string_view::npos) return "";
  const std::string_view text = template_text.substr(text_start, end - text_start);
  // A jinja expression or quote inside means it is not a plain literal.
  if (text.find_first_of("{}'\"") != std::string_view::npos) return "";
  return std::string(text);
}

std::string RagPromptParts::full_text() const {
  std::string text = prefix_text;
  for (const std::string& document : document_texts) text += document;
  return text + query_text;
}

std::string format_rag_document(const RagDocument& document) {
  std::string text = "Document";
  if (!document.title.empty()) text += " (" + document.title + ")";
  return text + ": " + document.text + "\n\n";
}

namespace {

RagPromptParts build(ChatTemplateKind kind, std::string_view system,
                     std::string_view default_system, const std::vector<RagDocument>& documents,
                     std::string_view question) {
  RagPromptParts parts;
  parts.kind = kind;
  const std::string system_text(system.empty() ? default_system : system);
  const std::string question_text = "Question: " + std::string(question);
  switch (kind) {
    case ChatTemplateKind::ChatML:
      if (!system_text.empty())
        parts.prefix_text = "<|im_start|>system\n" + system_text + "<|im_end|>\n";
      parts.prefix_text += "<|im_start|>user\n";
      parts.query_text = question_text + "<|im_end|>\n<|im_start|>assistant\n";
      break;
    case ChatTemplateKind::Llama3:
      if (!system_text.empty()) {
        parts.prefix_text =
            "<|start_header_id|>system<|end_header_id|>\n\n" + system_text + "<|eot_id|>";
      }
      parts.prefix_text += "<|start_header_id|>user<|end_header_id|>\n\n";
      parts.query_text =
          question_text + "<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n";
      break;
    case ChatTemplateKind::Plain:
      if (!system_text.empty()) parts.prefix_text = system_text + "\n\n";
      parts.query_text = question_text + "\nAnswer:";
      break;
  }
  parts.document_texts.reserve(documents.size());
  for (const RagDocument& document : documents) {
    parts.document_texts.push_back(format_rag_document(document));
  }
  return parts;
}

}  // namespace

RagPromptParts build_rag_prompt(ChatTemplateKind kind, std::string_view system,
                                const std::vector<RagDocument>& documents,
                                std::string_view question) {
  return build(kind, system, "", documents, question);
}

RagPromptParts build_rag_prompt(std::string_view template_text, std::string_view system,
                                const std::vector<RagDocument>& documents,
                                std::string_view question) {
  const ChatTemplateKind kind = detect_chat_template(template_text);
  const std::string default_system =
      kind == ChatTemplateKind::ChatML ? chatml_default_system(template_text) : "";
  return build(kind, system, default_system, documents, question);
}

}  // namespace lazyscope

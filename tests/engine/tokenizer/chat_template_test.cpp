// RAG prompts in the model's own chat format, cut into prefix / document / query segments.
#include "engine/tokenizer/chat_template.h"

#include <gtest/gtest.h>

namespace lazyscope {
namespace {

const char* kSmolLM2Template =
    "{% for message in messages %}{% if loop.first and messages[0]['role'] != 'system' %}{{ "
    "'<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging "
    "Face<|im_end|>\n' }}{% endif %}{{'<|im_start|>' + message['role'] + '\n' + "
    "message['content'] + '<|im_end|>' + '\n'}}{% endfor %}{% if add_generation_prompt %}{{ "
    "'<|im_start|>assistant\n' }}{% endif %}";

const char* kLlama3Template =
    "{{- bos_token }}{% for message in messages %}{{ '<|start_header_id|>' + message['role'] + "
    "'<|end_header_id|>\n\n' + message['content'] | trim + '<|eot_id|>' }}{% endfor %}";

TEST(ChatTemplate, DetectsTheKindFromTheJinjaText) {
  EXPECT_EQ(detect_chat_template(kSmolLM2Template), ChatTemplateKind::ChatML);
  EXPECT_EQ(detect_chat_template(kLlama3Template), ChatTemplateKind::Llama3);
  EXPECT_EQ(detect_chat_template(""), ChatTemplateKind::Plain);
  EXPECT_EQ(detect_chat_template("{{ messages }}"), ChatTemplateKind::Plain);
  EXPECT_STREQ(to_string(ChatTemplateKind::ChatML), "chatml");
}

TEST(ChatTemplate, ChatMLRagPromptHasSeparateSegments) {
  const std::vector<RagDocument> docs = {{"Paris", "Paris is the capital of France."},
                                         {"", "The Seine flows through Paris."}};
  const RagPromptParts parts = build_rag_prompt(kSmolLM2Template, "Answer from the documents.",
                                                docs, "What is the capital?");
  EXPECT_EQ(parts.kind, ChatTemplateKind::ChatML);
  EXPECT_EQ(parts.prefix_text,
            "<|im_start|>system\nAnswer from the documents.<|im_end|>\n<|im_start|>user\n");
  ASSERT_EQ(parts.document_texts.size(), 2u);
  EXPECT_EQ(parts.document_texts[0], "Document (Paris): Paris is the capital of France.\n\n");
  EXPECT_EQ(parts.document_texts[1], "Document: The Seine flows through Paris.\n\n");
  EXPECT_EQ(parts.query_text, "Question: What is the capital?<|im_end|>\n<|im_start|>assistant\n");
  EXPECT_EQ(parts.full_text(), parts.prefix_text + parts.document_texts[0] +
                                   parts.document_texts[1] + parts.query_text);
}

TEST(ChatTemplate, EmptySystemUsesTheTemplatesDefault) {
  EXPECT_EQ(chatml_default_system(kSmolLM2Template),
            "You are a helpful AI assistant named SmolLM, trained by Hugging Face");
  const RagPromptParts parts = build_rag_prompt(kSmolLM2Template, "", {}, "Hi?");
  EXPECT_EQ(parts.prefix_text,
            "<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging "
            "Face<|im_end|>\n<|im_start|>user\n");
  // A ChatML template without a literal default gets no system turn.
  const RagPromptParts bare = build_rag_prompt(ChatTemplateKind::ChatML, "", {}, "Hi?");
  EXPECT_EQ(bare.prefix_text, "<|im_start|>user\n");
}

TEST(ChatTemplate, DocumentWrappingDoesNotDependOnPosition) {
  const RagDocument doc{"T", "same text"};
  const RagPromptParts a = build_rag_prompt(ChatTemplateKind::ChatML, "s", {doc, {"U", "x"}}, "q");
  const RagPromptParts b = build_rag_prompt(ChatTemplateKind::ChatML, "s", {{"U", "x"}, doc}, "q");
  EXPECT_EQ(a.document_texts[0], b.document_texts[1]);
  EXPECT_EQ(a.prefix_text, b.prefix_text);
}

TEST(ChatTemplate, Llama3AndPlainFormats) {
  const RagPromptParts llama =
      build_rag_prompt(kLlama3Template, "Be brief.", {{"", "Doc."}}, "Why?");
  EXPECT_EQ(llama.kind, ChatTemplateKind::Llama3);
  EXPECT_EQ(llama.prefix_text,
            "<|start_header_id|>system<|end_header_id|>\n\nBe brief.<|eot_id|>"
            "<|start_header_id|>user<|end_header_id|>\n\n");
  EXPECT_EQ(llama.document_texts[0], "Document: Doc.\n\n");
  EXPECT_EQ(llama.query_text,
            "Question: Why?<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n");

  const RagPromptParts plain = build_rag_prompt("", "Be brief.", {{"", "Doc."}}, "Why?");
  EXPECT_EQ(plain.kind, ChatTemplateKind::Plain);
  EXPECT_EQ(plain.prefix_text, "Be brief.\n\n");
  EXPECT_EQ(plain.query_text, "Question: Why?\nAnswer:");
  EXPECT_EQ(build_rag_prompt("", "", {}, "Why?").prefix_text, "");
}

}  // namespace
}  // namespace lazyscope

#include "engine/runtime/prompt_builder.h"

#include <string>

#include "base/error.h"

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

}  // namespace

PromptLayout build_prompt_layout(const Request& request, const Tokenizer* tokenizer, int vocab_size) {
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
    layout.document_labels.push_back(index < int(request.document_labels.size())
                                         ? request.document_labels[index]
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

}  // namespace lazyscope

#pragma once
// BOS/EOS/add-BOS and the chat template of an HF checkpoint directory, gathered from
// config.json, generation_config.json, tokenizer_config.json and tokenizer.json.
#include <cstdint>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "engine/model/config.h"

namespace lazyscope {

struct HfSpecialTokens {
  int32_t bos_id = -1;
  std::vector<int32_t> eos_ids;
  bool add_bos = false;
  std::string chat_template;
};

// token text -> id, used for bos_token / eos_token strings of tokenizer_config.json.
using TokenLookup = std::function<std::optional<int32_t>(std::string_view)>;

// Precedence: ids in config.json, then generation_config.json, then tokenizer_config.json's
// token strings; EOS ids from config.json and generation_config.json are merged (generation
// stops on any). add_bos: tokenizer_config.json's add_bos_token if present, else whether
// tokenizer.json's post_processor (TemplateProcessing, possibly inside a Sequence) starts
// with the BOS token. The chat template comes from tokenizer_config.json or chat_template.jinja.
HfSpecialTokens read_hf_special_tokens(const std::filesystem::path& dir, const ModelConfig& config,
                                       const std::string& tokenizer_json_text,
                                       const TokenLookup& lookup);

}  // namespace lazyscope

#include "engine/model/gguf_tokenizer.h"

#include <algorithm>

#include "base/error.h"

namespace lazyscope {

const char* const kGpt2SplitRegex =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";
const char* const kLlama3SplitRegex =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
const char* const kSmolLMSplitRegex =
    R"(\p{N}|'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?[^\s\p{L}\p{N}]+|\s+(?=\p{N})|\s+(?!\S)|\s+)";

namespace {

// GGUF token types (llama.cpp's llama_token_type).
enum TokenType : int64_t {
  kNormal = 1,
  kUnknown = 2,
  kControl = 3,
  kUserDefined = 4,
  kUnused = 5,
  kByte = 6,
};

}  // namespace

std::string gguf_pre_tokenizer_regex(const std::string& pre, const std::string& source_name) {
  if (pre == "llama-bpe" || pre == "llama3" || pre == "llama-v3") return kLlama3SplitRegex;
  if (pre == "smollm") return kSmolLMSplitRegex;
  if (pre == "default" || pre == "gpt-2" || pre == "gpt2") return kGpt2SplitRegex;
  throw Error(source_name + ": tokenizer.ggml.pre '" + pre +
              "' is not a supported pre-tokenizer (supported: llama-bpe, llama3, smollm, gpt-2, "
              "default)");
}

TokenizerSpec gguf_tokenizer_spec(const GgufFile& file) {
  const std::string name = file.path().string();
  const auto model = file.get_string("tokenizer.ggml.model");
  if (!model)
    throw Error(name + ": no tokenizer in the metadata (tokenizer.ggml.model is missing)");
  if (*model != "gpt2") {
    throw Error(name + ": tokenizer.ggml.model '" + *model +
                "' is not supported (only the byte-level BPE 'gpt2' tokenizer is)");
  }
  TokenizerSpec spec;
  auto tokens = file.get_string_array("tokenizer.ggml.tokens");
  if (!tokens || tokens->empty()) throw Error(name + ": tokenizer.ggml.tokens is missing or empty");
  spec.vocab = std::move(*tokens);
  const int64_t vocab = int64_t(spec.vocab.size());

  auto merges = file.get_string_array("tokenizer.ggml.merges");
  if (!merges) throw Error(name + ": tokenizer.ggml.merges is missing");
  spec.merges.reserve(merges->size());
  for (std::size_t i = 0; i < merges->size(); ++i) {
    const std::string& merge = (*merges)[i];
    const std::size_t space = merge.find(' ');
    if (space == std::string::npos || space == 0 || space + 1 == merge.size() ||
        merge.find(' ', space + 1) != std::string::npos) {
      throw Error(name + ": tokenizer.ggml.merges[" + std::to_string(i) + "] '" + merge +
                  "' is not two tokens separated by one space");
    }
    spec.merges.emplace_back(merge.substr(0, space), merge.substr(space + 1));
  }

  std::vector<int64_t> types;
  if (auto stored = file.get_int_array("tokenizer.ggml.token_type")) {
    if (int64_t(stored->size()) != vocab) {
      throw Error(name + ": tokenizer.ggml.token_type has " + std::to_string(stored->size()) +
                  " entries but tokenizer.ggml.tokens has " + std::to_string(vocab));
    }
    types = std::move(*stored);
  }
  for (int64_t id = 0; id < int64_t(types.size()); ++id) {
    if (types[id] == kControl || types[id] == kUserDefined) {
      spec.added_tokens.push_back({int32_t(id), spec.vocab[id], types[id] == kControl});
    }
  }

  const std::string pre = file.get_string("tokenizer.ggml.pre").value_or("default");
  spec.split_regex = gguf_pre_tokenizer_regex(pre, name);
  // HF's Llama 3 tokenizer looks up a whole pre-token in the vocabulary before merging.
  spec.ignore_merges = pre == "llama-bpe" || pre == "llama3" || pre == "llama-v3";

  auto special_id = [&](const std::string& key) -> int32_t {
    const auto id = file.get_int(key);
    if (!id) return -1;
    if (*id < 0 || *id >= vocab) {
      throw Error(name + ": " + key + " = " + std::to_string(*id) +
                  " is outside the vocabulary of " + std::to_string(vocab) + " tokens");
    }
    return int32_t(*id);
  };
  spec.bos_id = special_id("tokenizer.ggml.bos_token_id");
  for (const char* key : {"tokenizer.ggml.eos_token_id", "tokenizer.ggml.eot_token_id",
                          "tokenizer.ggml.eom_token_id"}) {
    const int32_t id = special_id(key);
    if (id >= 0 && std::find(spec.eos_ids.begin(), spec.eos_ids.end(), id) == spec.eos_ids.end()) {
      spec.eos_ids.push_back(id);
    }
  }
  // llama.cpp's default for BPE vocabularies when the key is absent is to add BOS.
  spec.add_bos = file.get_bool("tokenizer.ggml.add_bos_token").value_or(spec.bos_id >= 0);
  if (spec.bos_id < 0) spec.add_bos = false;
  return spec;
}

Tokenizer load_gguf_tokenizer(const GgufFile& file) {
  return Tokenizer::from_spec(gguf_tokenizer_spec(file), file.path().string());
}

}  // namespace lazyscope

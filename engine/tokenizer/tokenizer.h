#pragma once
// Byte-level BPE tokenizer (HF tokenizer.json as Llama 3 uses it; also built from GGUF metadata).
#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace lazyscope {

struct AddedToken {
  int32_t id = 0;
  std::string content;
  bool special = true;
};

// Everything needed to build a tokenizer without a tokenizer.json (GGUF metadata).
struct TokenizerSpec {
  std::vector<std::string> vocab;  // id -> token string in ByteLevel alphabet
  std::vector<std::pair<std::string, std::string>> merges;  // by rank
  std::vector<AddedToken> added_tokens;
  std::string split_regex;  // PCRE2 pattern of the Split pre-tokenizer
  bool ignore_merges = false;
  int32_t bos_id = -1;
  std::vector<int32_t> eos_ids;
  bool add_bos = false;
};

class Tokenizer {
 public:
  Tokenizer();
  ~Tokenizer();
  Tokenizer(Tokenizer&&) noexcept;
  Tokenizer& operator=(Tokenizer&&) noexcept;
  Tokenizer(const Tokenizer&) = delete;
  Tokenizer& operator=(const Tokenizer&) = delete;

  // Throws Error naming the file and the problem.
  static Tokenizer from_json_file(const std::filesystem::path& tokenizer_json);
  static Tokenizer from_json(std::string_view json_text, const std::string& source_name);
  static Tokenizer from_spec(TokenizerSpec spec, const std::string& source_name);

  // Text to ids. Added/special tokens in the text are recognised; no BOS is added.
  std::vector<int32_t> encode(std::string_view text) const;
  // Ids to text; special tokens are rendered as their content.
  std::string decode(std::span<const int32_t> ids) const;
  std::string token_text(int32_t id) const;  // decoded text of one token
  // The vocabulary entry of one token (byte-level form; an added token's content).
  std::string token_string(int32_t id) const;
  std::optional<int32_t> token_id(std::string_view token) const;
  int32_t vocab_size() const;

  int32_t bos_id() const;  // -1 when none
  const std::vector<int32_t>& eos_ids() const;
  bool add_bos() const;  // whether a prompt starts with BOS
  void set_special_tokens(int32_t bos_id, std::vector<int32_t> eos_ids, bool add_bos);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace lazyscope

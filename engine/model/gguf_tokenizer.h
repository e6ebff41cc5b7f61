#pragma once
// The byte-level BPE tokenizer stored in GGUF metadata (tokenizer.ggml.model == "gpt2").
#include <string>

#include "engine/model/gguf_file.h"
#include "engine/tokenizer/tokenizer.h"

namespace lazyscope {

// Split regexes of the pre-tokenizers GGUF files name in tokenizer.ggml.pre.
extern const char* const kGpt2SplitRegex;
extern const char* const kLlama3SplitRegex;
// SmolLM's HF pre-tokenizer is Digits(individual) then ByteLevel's GPT-2 split; this one regex
// splits identically (each digit alone; a whitespace run before a digit stays whole).
extern const char* const kSmolLMSplitRegex;

// Split regex for a tokenizer.ggml.pre value; throws Error naming the file for unknown ones.
std::string gguf_pre_tokenizer_regex(const std::string& pre, const std::string& source_name);

// Everything Tokenizer::from_spec needs, read from the metadata. Throws Error naming the file.
TokenizerSpec gguf_tokenizer_spec(const GgufFile& file);
Tokenizer load_gguf_tokenizer(const GgufFile& file);

}  // namespace lazyscope

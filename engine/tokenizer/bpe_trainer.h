#pragma once
// Trains a byte-level BPE vocabulary (Llama-3 style Split regex + ByteLevel) on text and
// writes it as an HF tokenizer.json that both this project and HF `tokenizers` load.
#include <string>
#include <vector>

namespace lazyscope {

struct BpeTrainingOptions {
  int vocab_size = 512;  // including the 256 byte tokens and the special tokens
  std::vector<std::string> special_tokens = {"<|begin_of_text|>", "<|end_of_text|>"};
};

// Deterministic: the same texts and options give the same file, byte for byte.
std::string train_bpe_tokenizer_json(const std::vector<std::string>& texts,
                                     const BpeTrainingOptions& options);

}  // namespace lazyscope

#pragma once
// Cutting long documents into passages of at most N tokens. The token counter is supplied by
// the caller (e.g. a model tokenizer); without one, whitespace-separated words are counted.
#include <cstddef>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "corpora/corpus.h"

namespace lazyscope::corpora {

using TokenCountFn = std::function<std::size_t(std::string_view text)>;

// Default counter: the number of whitespace-separated words.
std::size_t count_words(std::string_view text);

struct ChunkOptions {
  std::size_t max_tokens = 0;      // 0 disables chunking
  std::size_t overlap_tokens = 0;  // tokens of the previous chunk repeated at the next one's start
  TokenCountFn count_tokens;       // empty: count_words
};

// Splits `text` at sentence boundaries where possible (words otherwise) into pieces of at most
// max_tokens. Counts are taken per sentence (or word) and summed, so with a subword tokenizer a
// chunk may differ from max_tokens by about one token per boundary. Returns {text} when the
// text fits or chunking is disabled; never returns empty pieces.
std::vector<std::string> chunk_text(std::string_view text, const ChunkOptions& options);

// Replaces every document longer than max_tokens with its chunks (id "<id>#<n>", n from 1,
// same title, parent_id = the original id). Questions whose gold doc_ids name a chunked
// document are pointed at the chunks that contain one of their answers (all chunks when none do).
void chunk_corpus(CorpusData& data, const ChunkOptions& options);

}  // namespace lazyscope::corpora

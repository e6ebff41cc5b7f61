#pragma once
// The BPE model of a byte-level tokenizer: applies merges by rank to one pre-tokenized piece.
#include <array>
#include <cstdint>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

namespace lazyscope {

struct BpeModelOptions {
  bool ignore_merges = false;  // a piece that is itself a vocabulary entry becomes that one token
  int32_t unk_id = -1;    // emitted for a byte whose symbol is not in the vocabulary (-1: drop)
  bool fuse_unk = false;  // consecutive unknown bytes give one unk token
};

class BpeModel {
 public:
  BpeModel() { byte_token_.fill(-1); }
  // vocab maps byte-level token strings to ids; merges are (left, right) in rank order. Throws
  // Error (prefixed by context) when a merge names a token missing from the vocabulary.
  BpeModel(const std::unordered_map<std::string, int32_t>& vocab,
           const std::vector<std::pair<std::string, std::string>>& merges,
           const BpeModelOptions& options, const std::string& context);
  BpeModel(BpeModel&& other) noexcept;
  BpeModel& operator=(BpeModel&& other) noexcept;

  // Appends the ids of one pre-tokenized piece given as raw bytes.
  void encode_piece(std::string_view raw_piece, std::vector<int32_t>& out) const;

 private:
  struct MergeTarget {
    int32_t rank;
    int32_t new_id;
  };
  static uint64_t pair_key(int32_t left, int32_t right) {
    return (static_cast<uint64_t>(static_cast<uint32_t>(left)) << 32) |
           static_cast<uint32_t>(right);
  }
  // Symbols form a doubly linked list over their original positions; merged-away ones get id -1.
  struct Symbol {
    int32_t id;
    int32_t prev;
    int32_t next;
  };
  void merge_symbols(std::string_view raw_piece, std::vector<int32_t>& out) const;
  void merge_by_scanning(std::vector<Symbol>& symbols, std::vector<int32_t>& out) const;

  std::array<int32_t, 256> byte_token_{};  // id of each byte's single-symbol token, -1 if absent
  std::unordered_map<uint64_t, MergeTarget> merges_;
  const std::unordered_map<std::string, int32_t>* vocab_ = nullptr;  // owned by the tokenizer
  BpeModelOptions options_;

  // Lets the cache be probed with a string_view, without building a std::string per piece.
  struct PieceHash {
    using is_transparent = void;
    size_t operator()(std::string_view text) const { return std::hash<std::string_view>{}(text); }
  };
  // Pieces repeat a lot in real text; caching their ids makes encoding mostly hash lookups.
  mutable std::mutex cache_mutex_;
  mutable std::unordered_map<std::string, std::vector<int32_t>, PieceHash, std::equal_to<>> cache_;
};

}  // namespace lazyscope

// Merging follows HF tokenizers exactly: always the lowest-rank adjacent pair, leftmost first.
#include "engine/tokenizer/bpe_model.h"

#include <queue>

#include "engine/tokenizer/byte_level.h"
#include "base/error.h"

namespace lazyscope {
namespace {

constexpr size_t kMaxCachedPieceBytes = 256;
constexpr size_t kMaxCacheEntries = 1 << 18;
// Short pieces (nearly all of them) merge faster by rescanning than through a priority queue.
constexpr size_t kMaxSymbolsForLinearScan = 24;

}  // namespace

BpeModel::BpeModel(const std::unordered_map<std::string, int32_t>& vocab,
                   const std::vector<std::pair<std::string, std::string>>& merges,
                   const BpeModelOptions& options, const std::string& context)
    : vocab_(&vocab), options_(options) {
  for (int b = 0; b < 256; ++b) {
    const auto it = vocab.find(byte_level::byte_to_symbol(static_cast<uint8_t>(b)));
    byte_token_[b] = it == vocab.end() ? -1 : it->second;
  }
  merges_.reserve(merges.size());
  for (size_t rank = 0; rank < merges.size(); ++rank) {
    const auto& [left, right] = merges[rank];
    const auto left_it = vocab.find(left);
    const auto right_it = vocab.find(right);
    const auto merged_it = vocab.find(left + right);
    const char* missing = left_it == vocab.end()     ? "left token"
                          : right_it == vocab.end()  ? "right token"
                          : merged_it == vocab.end() ? "merged token"
                                                     : nullptr;
    if (missing != nullptr) {
      throw Error(context + ": merge " + std::to_string(rank) + " (\"" + left + "\" \"" + right +
                  "\"): " + missing + " is not in the vocabulary");
    }
    // A later duplicate of the same pair never applies (HF keeps the first rank as well).
    merges_.try_emplace(pair_key(left_it->second, right_it->second),
                        MergeTarget{static_cast<int32_t>(rank), merged_it->second});
  }
}

BpeModel::BpeModel(BpeModel&& other) noexcept
    : byte_token_(other.byte_token_),
      merges_(std::move(other.merges_)),
      vocab_(other.vocab_),
      options_(other.options_),
      cache_(std::move(other.cache_)) {}

BpeModel& BpeModel::operator=(BpeModel&& other) noexcept {
  byte_token_ = other.byte_token_;
  merges_ = std::move(other.merges_);
  vocab_ = other.vocab_;
  options_ = other.options_;
  cache_ = std::move(other.cache_);
  return *this;
}

void BpeModel::encode_piece(std::string_view raw_piece, std::vector<int32_t>& out) const {
  if (raw_piece.empty()) return;
  const bool cacheable = raw_piece.size() <= kMaxCachedPieceBytes;
  if (cacheable) {
    std::lock_guard lock(cache_mutex_);
    const auto it = cache_.find(raw_piece);
    if (it != cache_.end()) {
      out.insert(out.end(), it->second.begin(), it->second.end());
      return;
    }
  }
  std::vector<int32_t> ids;
  const auto whole =
      options_.ignore_merges ? vocab_->find(byte_level::encode(raw_piece)) : vocab_->end();
  if (whole != vocab_->end()) {
    ids.push_back(whole->second);
  } else {
    merge_symbols(raw_piece, ids);
  }
  out.insert(out.end(), ids.begin(), ids.end());
  if (cacheable) {
    std::lock_guard lock(cache_mutex_);
    if (cache_.size() >= kMaxCacheEntries) cache_.clear();
    cache_.emplace(std::string(raw_piece), std::move(ids));
  }
}

void BpeModel::merge_by_scanning(std::vector<Symbol>& symbols, std::vector<int32_t>& out) const {
  std::vector<int32_t> ids;
  ids.reserve(symbols.size());
  for (const auto& symbol : symbols) ids.push_back(symbol.id);
  // Rank and new id of each adjacent pair, recomputed only next to the latest merge.
  std::vector<MergeTarget> pair_merge(ids.size(), MergeTarget{-1, -1});
  const auto lookup = [&](size_t i) {
    const auto it = merges_.find(pair_key(ids[i], ids[i + 1]));
    pair_merge[i] = it == merges_.end() ? MergeTarget{-1, -1} : it->second;
  };
  for (size_t i = 0; i + 1 < ids.size(); ++i) lookup(i);
  while (ids.size() > 1) {
    size_t best = ids.size();
    for (size_t i = 0; i + 1 < ids.size(); ++i)
      if (pair_merge[i].rank >= 0 &&
          (best == ids.size() || pair_merge[i].rank < pair_merge[best].rank))
        best = i;
    if (best == ids.size()) break;
    ids[best] = pair_merge[best].new_id;
    ids.erase(ids.begin() + static_cast<std::ptrdiff_t>(best) + 1);
    pair_merge.erase(pair_merge.begin() + static_cast<std::ptrdiff_t>(best) + 1);
    if (best + 1 < ids.size()) {
      lookup(best);
    } else {
      pair_merge[best] = MergeTarget{-1, -1};
    }
    if (best > 0) lookup(best - 1);
  }
  out.insert(out.end(), ids.begin(), ids.end());
}

void BpeModel::merge_symbols(std::string_view raw_piece, std::vector<int32_t>& out) const {
  std::vector<Symbol> symbols;
  symbols.reserve(raw_piece.size());
  bool previous_was_unk = false;
  for (char c : raw_piece) {
    int32_t id = byte_token_[static_cast<uint8_t>(c)];
    if (id < 0) {
      if (options_.unk_id < 0 || (options_.fuse_unk && previous_was_unk)) continue;
      id = options_.unk_id;
      previous_was_unk = true;
    } else {
      previous_was_unk = false;
    }
    const auto index = static_cast<int32_t>(symbols.size());
    symbols.push_back(Symbol{id, index - 1, index + 1});
  }
  if (symbols.empty()) return;
  symbols.back().next = -1;

  if (symbols.size() <= kMaxSymbolsForLinearScan) {
    merge_by_scanning(symbols, out);
    return;
  }

  struct Candidate {
    int32_t rank;
    int32_t position;
    int32_t new_id;
    bool operator>(const Candidate& other) const {
      return rank != other.rank ? rank > other.rank : position > other.position;
    }
  };
  std::priority_queue<Candidate, std::vector<Candidate>, std::greater<>> queue;
  const auto push_pair = [&](int32_t position) {
    const int32_t next = symbols[position].next;
    if (next < 0) return;
    const auto it = merges_.find(pair_key(symbols[position].id, symbols[next].id));
    if (it != merges_.end()) queue.push(Candidate{it->second.rank, position, it->second.new_id});
  };
  for (int32_t i = 0; i + 1 < static_cast<int32_t>(symbols.size()); ++i) push_pair(i);

  while (!queue.empty()) {
    const Candidate top = queue.top();
    queue.pop();
    Symbol& left = symbols[top.position];
    if (left.id < 0 || left.next < 0) continue;
    Symbol& right = symbols[left.next];
    // Stale entry: one side has merged since this pair was queued.
    const auto it = merges_.find(pair_key(left.id, right.id));
    if (it == merges_.end() || it->second.new_id != top.new_id || it->second.rank != top.rank)
      continue;
    left.id = top.new_id;
    right.id = -1;
    left.next = right.next;
    if (right.next >= 0) symbols[right.next].prev = top.position;
    if (left.prev >= 0) push_pair(left.prev);
    push_pair(top.position);
  }
  for (int32_t i = 0; i >= 0; i = symbols[i].next) out.push_back(symbols[i].id);
}

}  // namespace lazyscope

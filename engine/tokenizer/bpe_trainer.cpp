// Byte-level BPE training: count pre-tokenized words, then repeatedly merge the most frequent pair.
#include "engine/tokenizer/bpe_trainer.h"

#include <algorithm>
#include <map>
#include <nlohmann/json.hpp>
#include <queue>
#include <unordered_map>

#include "engine/tokenizer/byte_level.h"
#include "engine/tokenizer/regex_splitter.h"
#include "base/error.h"

namespace lazyscope {
namespace {

using Pair = std::pair<int32_t, int32_t>;

uint64_t pair_key(Pair pair) {
  return (static_cast<uint64_t>(static_cast<uint32_t>(pair.first)) << 32) |
         static_cast<uint32_t>(pair.second);
}

Pair pair_of_key(uint64_t key) {
  return {static_cast<int32_t>(key >> 32), static_cast<int32_t>(key & 0xFFFFFFFFu)};
}

struct Word {
  std::vector<int32_t> symbols;
  int64_t count = 0;
};

class Trainer {
 public:
  Trainer(const std::map<std::string, int64_t>& word_counts) {
    for (int b = 0; b < 256; ++b) token_bytes_.push_back(std::string(1, static_cast<char>(b)));
    for (int b = 0; b < 256; ++b) id_of_bytes_[token_bytes_[b]] = b;
    // std::map iteration order makes word indices, and so everything after, deterministic.
    for (const auto& [text, count] : word_counts) {
      Word word;
      for (char c : text) word.symbols.push_back(static_cast<uint8_t>(c));
      word.count = count;
      words_.push_back(std::move(word));
    }
    for (size_t w = 0; w < words_.size(); ++w) add_pairs(w, +1);
    for (const auto& [key, count] : pair_counts_)
      if (count > 0) queue_.push(Candidate{count, pair_of_key(key)});
  }

  // Learns merges until the vocabulary holds `target_tokens` entries or no pair is left.
  void train(size_t target_tokens) {
    std::vector<uint32_t> visited(words_.size(), 0);
    uint32_t stamp = 0;
    while (token_bytes_.size() < target_tokens && !queue_.empty()) {
      const Candidate best = queue_.top();
      queue_.pop();
      const uint64_t key = pair_key(best.pair);
      const int64_t current = pair_counts_[key];
      if (current != best.count) {
        if (current > 0) queue_.push(Candidate{current, best.pair});  // count went down meanwhile
        continue;
      }
      if (current <= 0) continue;
      const std::string merged = token_bytes_[best.pair.first] + token_bytes_[best.pair.second];
      int32_t new_id;
      if (const auto it = id_of_bytes_.find(merged); it != id_of_bytes_.end()) {
        new_id = it->second;  // the same bytes were already reached through another split
      } else {
        new_id = static_cast<int32_t>(token_bytes_.size());
        token_bytes_.push_back(merged);
        id_of_bytes_.emplace(merged, new_id);
      }
      merges_.push_back(best.pair);

      ++stamp;
      const std::vector<size_t> affected = std::move(words_with_pair_[key]);
      words_with_pair_.erase(key);
      std::vector<uint64_t> grown;
      for (size_t w : affected) {
        if (visited[w] == stamp) continue;
        visited[w] = stamp;
        add_pairs(w, -1);
        merge_in_word(words_[w].symbols, best.pair, new_id);
        add_pairs(w, +1, &grown);
      }
      std::sort(grown.begin(), grown.end());
      grown.erase(std::unique(grown.begin(), grown.end()), grown.end());
      for (uint64_t grown_key : grown)
        if (pair_counts_[grown_key] > 0)
          queue_.push(Candidate{pair_counts_[grown_key], pair_of_key(grown_key)});
    }
  }

  const std::vector<std::string>& token_bytes() const { return token_bytes_; }
  const std::vector<Pair>& merges() const { return merges_; }

 private:
  struct Candidate {
    int64_t count;
    Pair pair;
  };
  // Most frequent first; ties go to the byte-wise smaller pair so the result never depends on
  // hash order.
  struct CandidateOrder {
    const std::vector<std::string>* token_bytes;
    bool operator()(const Candidate& a, const Candidate& b) const {
      if (a.count != b.count) return a.count < b.count;
      const auto& tokens = *token_bytes;
      if (tokens[a.pair.first] != tokens[b.pair.first])
        return tokens[a.pair.first] > tokens[b.pair.first];
      return tokens[a.pair.second] > tokens[b.pair.second];
    }
  };

  void add_pairs(size_t w, int sign, std::vector<uint64_t>* grown = nullptr) {
    const auto& symbols = words_[w].symbols;
    for (size_t i = 0; i + 1 < symbols.size(); ++i) {
      const uint64_t key = pair_key({symbols[i], symbols[i + 1]});
      pair_counts_[key] += sign * words_[w].count;
      if (sign > 0) {
        words_with_pair_[key].push_back(w);
        if (grown) grown->push_back(key);
      }
    }
  }

  static void merge_in_word(std::vector<int32_t>& symbols, Pair pair, int32_t new_id) {
    size_t write = 0;
    for (size_t read = 0; read < symbols.size(); ++read) {
      if (read + 1 < symbols.size() && symbols[read] == pair.first &&
          symbols[read + 1] == pair.second) {
        symbols[write++] = new_id;
        ++read;
      } else {
        symbols[write++] = symbols[read];
      }
    }
    symbols.resize(write);
  }

  std::vector<Word> words_;
  std::vector<std::string> token_bytes_;
  std::unordered_map<std::string, int32_t> id_of_bytes_;
  std::unordered_map<uint64_t, int64_t> pair_counts_;
  std::unordered_map<uint64_t, std::vector<size_t>> words_with_pair_;
  std::vector<Pair> merges_;
  std::priority_queue<Candidate, std::vector<Candidate>, CandidateOrder> queue_{
      CandidateOrder{&token_bytes_}};
};

}  // namespace

std::string train_bpe_tokenizer_json(const std::vector<std::string>& texts,
                                     const BpeTrainingOptions& options) {
  using ordered_json = nlohmann::ordered_json;
  const size_t special_count = options.special_tokens.size();
  if (options.vocab_size < 0 || static_cast<size_t>(options.vocab_size) < 256 + special_count)
    throw Error("BPE training: vocab_size " + std::to_string(options.vocab_size) +
                " is smaller than the 256 byte tokens plus " + std::to_string(special_count) +
                " special tokens");
  for (size_t i = 0; i < special_count; ++i) {
    if (options.special_tokens[i].empty()) throw Error("BPE training: empty special token");
    for (size_t j = 0; j < i; ++j)
      if (options.special_tokens[i] == options.special_tokens[j])
        throw Error("BPE training: special token \"" + options.special_tokens[i] + "\" repeated");
  }

  const RegexSplitter splitter(kLlama3SplitPattern, "BPE training");
  std::map<std::string, int64_t> word_counts;
  for (const auto& text : texts)
    for (auto piece : splitter.split_isolated(text)) ++word_counts[std::string(piece)];

  Trainer trainer(word_counts);
  trainer.train(static_cast<size_t>(options.vocab_size) - special_count);

  const auto& token_bytes = trainer.token_bytes();
  std::vector<std::string> symbols;
  symbols.reserve(token_bytes.size());
  for (const auto& bytes : token_bytes) symbols.push_back(byte_level::encode(bytes));

  ordered_json added_tokens = ordered_json::array();
  const auto first_special_id = static_cast<int32_t>(token_bytes.size());
  for (size_t i = 0; i < special_count; ++i) {
    added_tokens.push_back(ordered_json{{"id", first_special_id + static_cast<int32_t>(i)},
                                        {"content", options.special_tokens[i]},
                                        {"single_word", false},
                                        {"lstrip", false},
                                        {"rstrip", false},
                                        {"normalized", false},
                                        {"special", true}});
  }

  ordered_json post_processor = nullptr;
  if (special_count > 0) {
    const auto it = std::find(options.special_tokens.begin(), options.special_tokens.end(),
                              std::string("<|begin_of_text|>"));
    const size_t bos_index = it != options.special_tokens.end()
                                 ? static_cast<size_t>(it - options.special_tokens.begin())
                                 : 0;
    const std::string& bos = options.special_tokens[bos_index];
    const auto bos_id = first_special_id + static_cast<int32_t>(bos_index);
    const auto special = [&](int type_id) {
      return ordered_json{{"SpecialToken", {{"id", bos}, {"type_id", type_id}}}};
    };
    const auto sequence = [](const char* id, int type_id) {
      return ordered_json{{"Sequence", {{"id", id}, {"type_id", type_id}}}};
    };
    post_processor = ordered_json{
        {"type", "TemplateProcessing"},
        {"single", {special(0), sequence("A", 0)}},
        {"pair", {special(0), sequence("A", 0), special(1), sequence("B", 1)}},
        {"special_tokens", {{bos, {{"id", bos}, {"ids", {bos_id}}, {"tokens", {bos}}}}}}};
  }

  ordered_json vocab = ordered_json::object();
  for (size_t id = 0; id < symbols.size(); ++id) vocab[symbols[id]] = static_cast<int32_t>(id);
  ordered_json merges = ordered_json::array();
  for (const auto& [left, right] : trainer.merges())
    merges.push_back(symbols[static_cast<size_t>(left)] + " " +
                     symbols[static_cast<size_t>(right)]);

  ordered_json root;
  root["version"] = "1.0";
  root["truncation"] = nullptr;
  root["padding"] = nullptr;
  root["added_tokens"] = std::move(added_tokens);
  root["normalizer"] = nullptr;
  root["pre_tokenizer"] = ordered_json{{"type", "Sequence"},
                                       {"pretokenizers",
                                        {ordered_json{{"type", "Split"},
                                                      {"pattern", {{"Regex", kLlama3SplitPattern}}},
                                                      {"behavior", "Isolated"},
                                                      {"invert", false}},
                                         ordered_json{{"type", "ByteLevel"},
                                                      {"add_prefix_space", false},
                                                      {"trim_offsets", true},
                                                      {"use_regex", false}}}}};
  root["post_processor"] = std::move(post_processor);
  root["decoder"] = ordered_json{{"type", "ByteLevel"},
                                 {"add_prefix_space", true},
                                 {"trim_offsets", true},
                                 {"use_regex", true}};
  root["model"] = ordered_json{{"type", "BPE"},
                               {"dropout", nullptr},
                               {"unk_token", nullptr},
                               {"continuing_subword_prefix", nullptr},
                               {"end_of_word_suffix", nullptr},
                               {"fuse_unk", false},
                               {"byte_fallback", false},
                               {"ignore_merges", false},
                               {"vocab", std::move(vocab)},
                               {"merges", std::move(merges)}};
  return root.dump(2, ' ', false) + "\n";
}

}  // namespace lazyscope

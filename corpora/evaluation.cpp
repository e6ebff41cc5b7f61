#include "corpora/evaluation.h"

#include <algorithm>
#include <cctype>
#include <map>

namespace lazyscope::corpora {
namespace {

bool is_ascii_punctuation(unsigned char c) { return c < 128 && std::ispunct(c) != 0; }

bool is_article(std::string_view word) { return word == "a" || word == "an" || word == "the"; }

std::vector<std::string> split_whitespace(std::string_view text) {
  std::vector<std::string> words;
  std::string current;
  for (char c : text) {
    if (std::isspace(static_cast<unsigned char>(c))) {
      if (!current.empty()) words.push_back(std::move(current));
      current.clear();
    } else {
      current.push_back(c);
    }
  }
  if (!current.empty()) words.push_back(std::move(current));
  return words;
}

}  // namespace

std::string normalize_answer(std::string_view text) {
  // Same order as the SQuAD script: lower, drop punctuation, drop articles, fix whitespace.
  std::string cleaned;
  cleaned.reserve(text.size());
  for (char c : text) {
    auto u = static_cast<unsigned char>(c);
    if (is_ascii_punctuation(u)) continue;
    cleaned.push_back(u < 128 ? static_cast<char>(std::tolower(u)) : c);
  }
  std::string out;
  for (const std::string& word : split_whitespace(cleaned)) {
    if (is_article(word)) continue;
    if (!out.empty()) out.push_back(' ');
    out += word;
  }
  return out;
}

double exact_match(std::string_view prediction, std::string_view gold) {
  return normalize_answer(prediction) == normalize_answer(gold) ? 1.0 : 0.0;
}

double f1_score(std::string_view prediction, std::string_view gold) {
  std::vector<std::string> predicted = split_whitespace(normalize_answer(prediction));
  std::vector<std::string> expected = split_whitespace(normalize_answer(gold));
  if (predicted.empty() || expected.empty())
    return predicted.empty() && expected.empty() ? 1.0 : 0.0;
  std::map<std::string, int> gold_counts;
  for (const auto& w : expected) ++gold_counts[w];
  int common = 0;
  for (const auto& w : predicted) {
    auto it = gold_counts.find(w);
    if (it != gold_counts.end() && it->second > 0) {
      --it->second;
      ++common;
    }
  }
  if (common == 0) return 0.0;
  double precision = double(common) / double(predicted.size());
  double recall = double(common) / double(expected.size());
  return 2.0 * precision * recall / (precision + recall);
}

double exact_match_max(std::string_view prediction, const std::vector<std::string>& golds) {
  double best = 0.0;
  for (const auto& g : golds) best = std::max(best, exact_match(prediction, g));
  return best;
}

double f1_max(std::string_view prediction, const std::vector<std::string>& golds) {
  double best = 0.0;
  for (const auto& g : golds) best = std::max(best, f1_score(prediction, g));
  return best;
}

AnswerScore score_answer(std::string_view prediction, const std::vector<std::string>& golds) {
  return {exact_match_max(prediction, golds), f1_max(prediction, golds)};
}

double recall_at_k(const std::vector<std::string>& retrieved_ids,
                   const std::vector<std::string>& gold_ids, int k) {
  if (gold_ids.empty()) return 0.0;
  std::size_t limit = retrieved_ids.size();
  if (k > 0) limit = std::min(limit, std::size_t(k));
  int found = 0;
  for (const auto& gold : gold_ids) {
    if (std::find(retrieved_ids.begin(), retrieved_ids.begin() + std::ptrdiff_t(limit), gold) !=
        retrieved_ids.begin() + std::ptrdiff_t(limit))
      ++found;
  }
  return double(found) / double(gold_ids.size());
}

}  // namespace lazyscope::corpora

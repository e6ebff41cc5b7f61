#include "corpora/evaluation.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include <algorithm>
#include <cctype>
#include <map>
#include <memory>

#include "base/error.h"

namespace lazyscope::corpora {
namespace {

// One compiled UTF-8 pattern and a global substitution with it (PCRE2's extended replacement
// syntax, so "\L$0" lower-cases with Unicode case rules).
class Substitution {
 public:
  Substitution(const char* pattern, const char* replacement) : replacement_(replacement) {
    int code = 0;
    PCRE2_SIZE offset = 0;
    code_ = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern), PCRE2_ZERO_TERMINATED,
                          PCRE2_UTF | PCRE2_UCP | PCRE2_MATCH_INVALID_UTF, &code, &offset, nullptr);
    if (!code_) throw Error(std::string("answer normalisation: bad pattern ") + pattern);
  }
  ~Substitution() { pcre2_code_free(code_); }
  Substitution(const Substitution&) = delete;
  Substitution& operator=(const Substitution&) = delete;

  std::string apply(std::string_view text) const {
    std::unique_ptr<pcre2_match_data, decltype(&pcre2_match_data_free)> match(
        pcre2_match_data_create_from_pattern(code_, nullptr), &pcre2_match_data_free);
    // Lower-casing may grow a string (a few characters take more bytes in lower case).
    std::string out(text.size() * 2 + 16, '\0');
    for (int attempt = 0; attempt < 2; ++attempt) {
      PCRE2_SIZE length = out.size();
      const int rc = pcre2_substitute(
          code_, reinterpret_cast<PCRE2_SPTR>(text.data()), text.size(), 0,
          PCRE2_SUBSTITUTE_GLOBAL | PCRE2_SUBSTITUTE_EXTENDED | PCRE2_SUBSTITUTE_OVERFLOW_LENGTH,
          match.get(), nullptr, reinterpret_cast<PCRE2_SPTR>(replacement_), PCRE2_ZERO_TERMINATED,
          reinterpret_cast<PCRE2_UCHAR*>(out.data()), &length);
      if (rc >= 0) {
        out.resize(length);
        return out;
      }
      if (rc != PCRE2_ERROR_NOMEMORY) break;
      out.assign(length + 1, '\0');
    }
    return std::string(text);  // unreachable in practice: the pattern matches anything
  }

 private:
  pcre2_code* code_ = nullptr;
  const char* replacement_;
};

const Substitution& lower_case() {
  static const Substitution s("[\\p{Lu}\\p{Lt}]+", "\\L$0");
  return s;
}

// Python's string.punctuation (ASCII, symbols included) and Unicode punctuation (category P).
const Substitution& punctuation() {
  static const Substitution s("[!-/:-@\\[-`{-~\\p{P}]+", "");
  return s;
}

// Unicode white space (no-break spaces included) becomes a plain space.
const Substitution& white_space() {
  static const Substitution s("[\\s\\p{Zs}]+", " ");
  return s;
}

bool is_article(std::string_view word) { return word == "a" || word == "an" || word == "the"; }

std::vector<std::string> split_spaces(std::string_view text) {
  std::vector<std::string> words;
  std::string current;
  for (char c : text) {
    if (c == ' ') {
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
  const std::string cleaned = white_space().apply(punctuation().apply(lower_case().apply(text)));
  std::string out;
  for (const std::string& word : split_spaces(cleaned)) {
    if (is_article(word)) continue;
    if (!out.empty()) out.push_back(' ');
    out += word;
  }
  return out;
}

double exact_match(std::string_view prediction, std::string_view gold) {
  return normalize_answer(prediction) == normalize_answer(gold) ? 1.0 : 0.0;
}

double contains_answer(std::string_view prediction, std::string_view gold) {
  const std::string expected = normalize_answer(gold);
  const std::string predicted = normalize_answer(prediction);
  if (expected.empty()) return predicted.empty() ? 1.0 : 0.0;
  // Both sides are single-space separated words: pad them so the match is on word boundaries.
  const std::string haystack = " " + predicted + " ";
  return haystack.find(" " + expected + " ") != std::string::npos ? 1.0 : 0.0;
}

double f1_score(std::string_view prediction, std::string_view gold) {
  std::vector<std::string> predicted = split_spaces(normalize_answer(prediction));
  std::vector<std::string> expected = split_spaces(normalize_answer(gold));
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

double contains_answer_max(std::string_view prediction, const std::vector<std::string>& golds) {
  double best = 0.0;
  for (const auto& g : golds) best = std::max(best, contains_answer(prediction, g));
  return best;
}

double f1_max(std::string_view prediction, const std::vector<std::string>& golds) {
  double best = 0.0;
  for (const auto& g : golds) best = std::max(best, f1_score(prediction, g));
  return best;
}

AnswerScore score_answer(std::string_view prediction, const std::vector<std::string>& golds) {
  return {exact_match_max(prediction, golds), contains_answer_max(prediction, golds),
          f1_max(prediction, golds)};
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

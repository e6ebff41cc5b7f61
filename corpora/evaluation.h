#pragma once
// Answer scoring: SQuAD-style normalisation, exact match, answer containment and token F1 (max
// over gold answers), plus retrieval recall for gold documents.
#include <string>
#include <string_view>
#include <vector>

namespace lazyscope::corpora {

// The official SQuAD script's normalize_answer, in Unicode: lower-cases (Unicode case rules, as
// Python's str.lower), removes punctuation (ASCII punctuation as string.punctuation, plus every
// Unicode punctuation character such as curly quotes and dashes), removes the articles "a",
// "an", "the" and collapses whitespace. Invalid UTF-8 bytes are kept as they are.
std::string normalize_answer(std::string_view text);

// 1.0 when the normalised strings are equal, else 0.0.
double exact_match(std::string_view prediction, std::string_view gold);

// 1.0 when the normalised gold answer occurs in the normalised prediction as a run of whole
// words ("it is brannock" contains "brannock"; "brannockside" does not). A gold answer that
// normalises to nothing is contained only in a prediction that does too.
double contains_answer(std::string_view prediction, std::string_view gold);

// Token-level F1 over normalised whitespace tokens (multiset overlap). When either side
// normalises to no tokens, 1.0 if both do, else 0.0 (SQuAD v2 convention).
double f1_score(std::string_view prediction, std::string_view gold);

// Max over gold answers; 0.0 when `golds` is empty.
double exact_match_max(std::string_view prediction, const std::vector<std::string>& golds);
double contains_answer_max(std::string_view prediction, const std::vector<std::string>& golds);
double f1_max(std::string_view prediction, const std::vector<std::string>& golds);

struct AnswerScore {
  double exact_match = 0.0;  // normalised prediction == a normalised gold answer
  double contains = 0.0;     // a normalised gold answer is inside the normalised prediction
  double f1 = 0.0;
};
AnswerScore score_answer(std::string_view prediction, const std::vector<std::string>& golds);

// Fraction of `gold_ids` found among the first k `retrieved_ids` (all of them when k <= 0);
// 0.0 when gold_ids is empty.
double recall_at_k(const std::vector<std::string>& retrieved_ids,
                   const std::vector<std::string>& gold_ids, int k = 0);

}  // namespace lazyscope::corpora

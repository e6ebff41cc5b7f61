#include "corpora/evaluation.h"

#include <gtest/gtest.h>

namespace lazyscope::corpora {
namespace {

TEST(NormalizeAnswer, FollowsSquadRules) {
  EXPECT_EQ(normalize_answer("The  Velmora Valley!"), "velmora valley");
  EXPECT_EQ(normalize_answer("an apple, a pear"), "apple pear");
  EXPECT_EQ(normalize_answer("Theatre"), "theatre");  // "the" only as a whole word
  EXPECT_EQ(normalize_answer("  \"Mount   Caddor.\"  "), "mount caddor");
  EXPECT_EQ(normalize_answer("2,941 metres"), "2941 metres");
  EXPECT_EQ(normalize_answer(""), "");
}

TEST(NormalizeAnswer, HandlesUnicodeCaseAndPunctuation) {
  // Lower case by Unicode rules, as Python's str.lower in the SQuAD script.
  EXPECT_EQ(normalize_answer("ÉCOLE Ørrenland"), "école ørrenland");
  EXPECT_EQ(normalize_answer("ΣΟΦΙΑ"), "σοφια");
  EXPECT_EQ(normalize_answer("ДОМ"), "дом");
  // Unicode punctuation goes like ASCII punctuation: curly quotes, dashes, ellipsis, guillemets.
  EXPECT_EQ(normalize_answer("\u201cThe Greywell Hut\u201d\u2026"), "greywell hut");
  EXPECT_EQ(normalize_answer("\u00abBrannock\u00bb \u2014 a city"), "brannock city");
  // A no-break space separates words like a space.
  EXPECT_EQ(normalize_answer("Port\u00a0Quillan"), "port quillan");
  // ASCII symbols are in Python's string.punctuation too.
  EXPECT_EQ(normalize_answer("$5 + 3 = <8>"), "5 3 8");
  // Broken UTF-8 (an answer cut mid-character) is kept, not an error.
  EXPECT_EQ(normalize_answer("Brannock \xC3"), "brannock \xC3");
}

TEST(ExactMatch, MatchesAcrossUnicodeCase) {
  EXPECT_EQ(exact_match("\u00c9cole", "école"), 1.0);
  EXPECT_EQ(exact_match("\u201cGreywell Hut\u201d", "the Greywell Hut"), 1.0);
}

TEST(ContainsAnswer, FindsTheGoldAnswerAsWholeWords) {
  EXPECT_EQ(contains_answer("The capital is Brannock.", "Brannock"), 1.0);
  EXPECT_EQ(exact_match("The capital is Brannock.", "Brannock"), 0.0);  // the two differ here
  EXPECT_EQ(contains_answer("Brannockside", "Brannock"), 0.0);
  EXPECT_EQ(contains_answer("it is 2,941 metres high", "2,941 metres"), 1.0);
  EXPECT_EQ(contains_answer("metres 2941", "2,941 metres"), 0.0);  // order matters
  EXPECT_EQ(contains_answer_max("it is the silver mark", {"Long Table", "silver mark"}), 1.0);
  EXPECT_EQ(contains_answer("", "the"), 1.0);  // gold normalises to nothing, so does the answer
  EXPECT_EQ(contains_answer("Brannock", "the"), 0.0);
  AnswerScore s = score_answer("It is Brannock", {"Brannock"});
  EXPECT_EQ(s.exact_match, 0.0);
  EXPECT_EQ(s.contains, 1.0);
  EXPECT_NEAR(s.f1, 2.0 * (1.0 / 3.0) / (1.0 / 3.0 + 1.0), 1e-12);  // "it is brannock": P 1/3, R 1
}

TEST(ExactMatch, IgnoresCaseArticlesAndPunctuation) {
  EXPECT_EQ(exact_match("the Grey Heron.", "Grey Heron"), 1.0);
  EXPECT_EQ(exact_match("Grey Herons", "Grey Heron"), 0.0);
  EXPECT_EQ(exact_match_max("Brannock", {"Port Quillan", "brannock"}), 1.0);
  EXPECT_EQ(exact_match_max("Brannock", {}), 0.0);
}

TEST(F1, CountsTokenOverlap) {
  // prediction "grey heron frigate" vs gold "grey heron": precision 2/3, recall 1 -> 0.8
  EXPECT_NEAR(f1_score("the Grey Heron frigate", "Grey Heron"), 0.8, 1e-12);
  EXPECT_NEAR(f1_score("Port Quillan", "Quillan harbour"), 0.5, 1e-12);
  EXPECT_EQ(f1_score("Stennis", "Wickmere"), 0.0);
  EXPECT_EQ(f1_score("Stennis", "stennis"), 1.0);
  // Repeated tokens count once per occurrence on each side.
  EXPECT_NEAR(f1_score("red red red", "red"), 0.5, 1e-12);
  // Nothing left after normalisation: equal only when both are empty.
  EXPECT_EQ(f1_score("the", "a"), 1.0);
  EXPECT_EQ(f1_score("the", "Brannock"), 0.0);
  // Unicode: case folds and punctuation goes before tokens are counted.
  EXPECT_NEAR(f1_score("\u00c9cole Brannock", "\u201c\u00e9cole\u201d"), 2.0 / 3.0, 1e-12);
  EXPECT_EQ(f1_score("\u00ab\u00d8rrenland\u00bb", "\u00f8rrenland"), 1.0);
}

TEST(F1, TakesTheBestGoldAnswer) {
  EXPECT_NEAR(f1_max("Velmora", {"Brannock", "the Velmora Valley"}), 2.0 / 3.0, 1e-12);
  AnswerScore s = score_answer("Velmora Valley", {"Brannock", "the Velmora Valley"});
  EXPECT_EQ(s.exact_match, 1.0);
  EXPECT_EQ(s.f1, 1.0);
}

TEST(RecallAtK, CountsGoldDocumentsInTheTopK) {
  std::vector<std::string> retrieved = {"p3", "p1", "p9", "p2"};
  EXPECT_EQ(recall_at_k(retrieved, {"p1", "p2"}), 1.0);
  EXPECT_EQ(recall_at_k(retrieved, {"p1", "p2"}, 2), 0.5);
  EXPECT_EQ(recall_at_k(retrieved, {"p7"}, 4), 0.0);
  EXPECT_EQ(recall_at_k(retrieved, {}, 4), 0.0);
}

}  // namespace
}  // namespace lazyscope::corpora

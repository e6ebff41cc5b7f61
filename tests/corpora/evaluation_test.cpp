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

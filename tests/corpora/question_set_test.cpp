#include "corpora/question_set.h"

#include <gtest/gtest.h>

#include "corpora/document_store.h"
#include "corpora/sample_corpus.h"
#include "corpora/temp_dir.h"

namespace lazyscope::corpora {
namespace {

using testing::error_of;
using testing::TempDir;

TEST(QuestionSet, TheSampleHasItsQuestionsWithAnswersAndGoldPassages) {
  const QuestionSet set = sample_question_set();
  ASSERT_EQ(set.questions.size(), 177u);
  EXPECT_EQ(set.questions.front().id, "q001");
  EXPECT_EQ(set.questions.front().answers, std::vector<std::string>{"Brannock"});
  EXPECT_EQ(set.questions.front().doc_ids, std::vector<std::string>{"p001"});
  EXPECT_EQ(set.lines.front(), 1);
  DocumentStore store =
      DocumentStore::open(default_sample_corpus_db(), DocumentStore::Mode::read_only);
  EXPECT_NO_THROW(check_gold_documents(set, store));
  const QuestionSet from_store = store_question_set(store);
  ASSERT_EQ(from_store.questions.size(), set.questions.size());
  EXPECT_EQ(from_store.questions[1].answers, set.questions[1].answers);
}

TEST(QuestionSet, ReadsAFileAndSkipsBlankLines) {
  TempDir dir;
  const auto path = dir.write(
      "q.jsonl",
      "{\"question\": \"Capital?\", \"answers\": [\"Brannock\"], \"doc_ids\": [\"p001\"]}\n"
      "\n"
      "{\"id\": 7, \"question\": \"River?\", \"answer\": \"Velm\", \"kind\": \"single\"}\r\n");
  const QuestionSet set = load_question_file(path);
  ASSERT_EQ(set.questions.size(), 2u);
  EXPECT_EQ(set.questions[0].id, "q1");
  EXPECT_EQ(set.questions[1].id, "7");
  EXPECT_EQ(set.questions[1].answers, std::vector<std::string>{"Velm"});
  EXPECT_EQ(set.lines, (std::vector<int>{1, 3}));
  QuestionSet limited = set;
  limit_questions(limited, 1);
  EXPECT_EQ(limited.questions.size(), 1u);
}

TEST(QuestionSet, BadFilesNameTheFileAndTheLine) {
  TempDir dir;
  const std::string good = "{\"question\": \"Capital?\", \"answers\": [\"Brannock\"]}\n";
  struct Case {
    std::string text;
    std::string line;
    std::string problem;
  };
  const std::vector<Case> cases = {
      {good + "{\"question\": \"x\", \"answers\": [\"a\"\n", "line 2", "invalid JSON"},
      {good + "[1, 2]\n", "line 2", "expected a JSON object"},
      {good + good + "{\"answers\": [\"a\"]}\n", "line 3", "missing \"question\""},
      {good + "{\"question\": \"  \", \"answers\": [\"a\"]}\n", "line 2", "empty \"question\""},
      {good + "{\"question\": \"x\"}\n", "line 2", "no gold answer"},
      {good + "{\"question\": \"x\", \"answers\": []}\n", "line 2", "no gold answer"},
      {good + "{\"question\": \"x\", \"answers\": [3]}\n", "line 2",
       "\"answers\" must be a list of strings"},
      {good + "{\"question\": \"x\", \"answers\": \"a\"}\n", "line 2",
       "\"answers\" must be a list of strings"},
      {good + "{\"question\": \"x\", \"answers\": [\"a\"], \"doc_ids\": \"p1\"}\n", "line 2",
       "\"doc_ids\""},
      {good + "{\"question\": \"x\", \"answers\": [\"a\"], \"id\": [1]}\n", "line 2",
       "\"id\" must be"},
      {"{\"id\": \"a\", \"question\": \"x\", \"answers\": [\"a\"]}\n{\"id\": \"a\", \"question\": "
       "\"y\", \"answers\": [\"b\"]}\n",
       "line 2", "duplicate question id \"a\" (first on line 1)"},
  };
  for (std::size_t i = 0; i < cases.size(); ++i) {
    const auto path = dir.write("bad" + std::to_string(i) + ".jsonl", cases[i].text);
    const std::string message = error_of([&] { load_question_file(path); });
    EXPECT_CONTAINS(message, path.string() + ": " + cases[i].line + ": ");
    EXPECT_CONTAINS(message, cases[i].problem);
  }
  const auto empty = dir.write("empty.jsonl", "\n\n");
  EXPECT_CONTAINS(error_of([&] { load_question_file(empty); }), "holds no question");
  EXPECT_CONTAINS(error_of([&] { load_question_file(dir / "missing.jsonl"); }),
                  "missing.jsonl: cannot open");
}

TEST(QuestionSet, UnknownGoldPassagesAreNamedWithTheirLine) {
  TempDir dir;
  const auto path = dir.write(
      "q.jsonl",
      "{\"question\": \"Capital?\", \"answers\": [\"Brannock\"], \"doc_ids\": [\"p001\"]}\n"
      "{\"id\": \"x9\", \"question\": \"?\", \"answers\": [\"a\"], \"doc_ids\": [\"nope\"]}\n");
  DocumentStore store =
      DocumentStore::open(default_sample_corpus_db(), DocumentStore::Mode::read_only);
  const std::string message =
      error_of([&] { check_gold_documents(load_question_file(path), store); });
  EXPECT_CONTAINS(
      message,
      path.string() + ": line 2: question \"x9\": gold passage \"nope\" is not in the corpus");
}

}  // namespace
}  // namespace lazyscope::corpora

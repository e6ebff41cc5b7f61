#pragma once
// Evaluation question sets: the bundled sample's questions, the questions an imported store kept
// (with their answers and gold passages), or a questions-only JSON Lines file.
#include <filesystem>
#include <string>
#include <vector>

#include "corpora/corpus.h"

namespace lazyscope::corpora {

class DocumentStore;

struct QuestionSet {
  std::string source;               // where the questions came from, for messages and reports
  std::vector<Question> questions;  // every one has a question text and at least one answer
  std::vector<int> lines;           // 1-based line of each question in `source`; 0 when not a file
};

// The bundled sample's questions (corpora/sample/questions.jsonl).
QuestionSet sample_question_set();

// The questions kept in a document store by `corpus import`.
QuestionSet store_question_set(const DocumentStore& store);

// A JSON Lines file, one question a line:
//   {"question": str, "answers": [str] (or "answer": str), "doc_ids": [str]?, "id": str?, "kind":
//   str?}
// Blank lines are skipped. Throws lazyscope::Error naming the file, the line and the problem
// (bad JSON, a missing or empty question, no answers, non-string answers, duplicate ids), or
// when the file holds no question at all.
QuestionSet load_question_file(const std::filesystem::path& path);

// Throws naming the question (and its line) when a gold doc_id is not a document of `store`.
void check_gold_documents(const QuestionSet& set, const DocumentStore& store);

// Keeps the first `limit` questions (all of them when limit <= 0).
void limit_questions(QuestionSet& set, int limit);

}  // namespace lazyscope::corpora

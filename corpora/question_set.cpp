#include "corpora/question_set.h"

#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>

#include "base/error.h"
#include "corpora/document_store.h"
#include "corpora/sample_corpus.h"

namespace lazyscope::corpora {
namespace {

using nlohmann::json;

[[noreturn]] void fail(const std::filesystem::path& path, std::size_t line,
                       const std::string& what) {
  throw Error(path.string() + ": line " + std::to_string(line) + ": " + what);
}

std::string where(const QuestionSet& set, std::size_t index) {
  const Question& q = set.questions[index];
  std::string text = set.source;
  if (index < set.lines.size() && set.lines[index] > 0)
    text += ": line " + std::to_string(set.lines[index]);
  return text + ": question \"" + q.id + "\"";
}

std::vector<std::string> strings_of(const json& value, const char* key,
                                    const std::filesystem::path& path, std::size_t line) {
  if (!value.is_array()) fail(path, line, std::string("\"") + key + "\" must be a list of strings");
  std::vector<std::string> out;
  for (const json& item : value) {
    if (!item.is_string())
      fail(path, line,
           std::string("\"") + key + "\" must be a list of strings, found " + item.dump());
    out.push_back(item.get<std::string>());
  }
  return out;
}

}  // namespace

QuestionSet sample_question_set() {
  return load_question_file(sample_corpus_dir() / "questions.jsonl");
}

QuestionSet store_question_set(const DocumentStore& store) {
  QuestionSet set;
  set.source = store.path().string();
  set.questions = store.questions();
  set.lines.assign(set.questions.size(), 0);
  if (set.questions.empty()) {
    throw Error(store.path().string() +
                ": the corpus holds no questions (import a dataset with questions, or pass "
                "--questions FILE)");
  }
  return set;
}

QuestionSet load_question_file(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error(path.string() + ": cannot open the questions file");
  QuestionSet set;
  set.source = path.string();
  std::map<std::string, std::size_t> first_line;
  std::string text;
  std::size_t line = 0;
  while (std::getline(in, text)) {
    ++line;
    if (!text.empty() && text.back() == '\r') text.pop_back();
    if (text.find_first_not_of(" \t") == std::string::npos) continue;
    json record;
    try {
      record = json::parse(text);
    } catch (const json::parse_error& e) {
      fail(path, line, std::string("invalid JSON (") + e.what() + ")");
    }
    if (!record.is_object())
      fail(path, line, "expected a JSON object {\"question\", \"answers\", ...}");
    Question q;
    auto question = record.find("question");
    if (question == record.end() || !question->is_string())
      fail(path, line, "missing \"question\" (a string)");
    q.question = question->get<std::string>();
    if (q.question.find_first_not_of(" \t") == std::string::npos)
      fail(path, line, "empty \"question\"");
    if (auto answers = record.find("answers"); answers != record.end()) {
      q.answers = strings_of(*answers, "answers", path, line);
    } else if (auto answer = record.find("answer"); answer != record.end()) {
      if (!answer->is_string()) fail(path, line, "\"answer\" must be a string");
      q.answers.push_back(answer->get<std::string>());
    }
    if (q.answers.empty())
      fail(path, line, "the question has no gold answer (\"answers\": [str, ...])");
    if (auto ids = record.find("doc_ids"); ids != record.end())
      q.doc_ids = strings_of(*ids, "doc_ids", path, line);
    if (auto id = record.find("id"); id != record.end()) {
      if (id->is_string())
        q.id = id->get<std::string>();
      else if (id->is_number_integer())
        q.id = std::to_string(id->get<int64_t>());
      else
        fail(path, line, "\"id\" must be a string or an integer");
    } else {
      q.id = "q" + std::to_string(set.questions.size() + 1);
    }
    if (auto kind = record.find("kind"); kind != record.end() && kind->is_string())
      q.kind = kind->get<std::string>();
    if (auto [it, fresh] = first_line.emplace(q.id, line); !fresh) {
      fail(path, line,
           "duplicate question id \"" + q.id + "\" (first on line " + std::to_string(it->second) +
               ")");
    }
    set.questions.push_back(std::move(q));
    set.lines.push_back(int(line));
  }
  if (in.bad()) throw Error(path.string() + ": read error");
  if (set.questions.empty()) throw Error(path.string() + ": the questions file holds no question");
  return set;
}

void check_gold_documents(const QuestionSet& set, const DocumentStore& store) {
  for (std::size_t i = 0; i < set.questions.size(); ++i) {
    for (const std::string& id : set.questions[i].doc_ids) {
      if (!store.find(id)) {
        throw Error(where(set, i) + ": gold passage \"" + id + "\" is not in the corpus " +
                    store.path().string());
      }
    }
  }
}

void limit_questions(QuestionSet& set, int limit) {
  if (limit <= 0 || std::size_t(limit) >= set.questions.size()) return;
  set.questions.resize(std::size_t(limit));
  set.lines.resize(std::size_t(limit));
}

}  // namespace lazyscope::corpora

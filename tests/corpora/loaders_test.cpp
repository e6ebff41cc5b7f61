#include "corpora/loaders.h"

#include <gtest/gtest.h>

#include "tests/corpora/temp_dir.h"

namespace lazyscope::corpora {
namespace {

using testing::error_of;
using testing::TempDir;

const Document* find_doc(const CorpusData& data, const std::string& id) {
  for (const auto& d : data.documents)
    if (d.id == id) return &d;
  return nullptr;
}

constexpr const char* kHotpot = R"([
 {"_id": "h1", "question": "Which river flows past the town where Ada was born?", "answer": "the Lune",
  "type": "bridge", "level": "hard",
  "supporting_facts": [["Ada Quill", 0], ["Carrow", 1]],
  "context": [["Ada Quill", ["Ada Quill was born in Carrow.", " She built looms."]],
              ["Carrow", ["Carrow is a town.", " It lies on the Lune."]],
              ["Distractor", ["Nothing to see."]]]},
 {"_id": "h2", "question": "Is Carrow a town?", "answer": "yes", "type": "comparison",
  "supporting_facts": [["Carrow", 0]],
  "context": [["Carrow", ["Carrow is a town.", " It lies on the Lune."]]]}
])";

TEST(HotpotQA, ReadsParagraphsAsDocumentsAndSupportingFactsAsGold) {
  TempDir dir;
  CorpusData data = load_hotpotqa(dir.write("hotpot_dev.json", kHotpot));
  ASSERT_EQ(data.documents.size(), 3u);  // Carrow appears twice, stored once
  const Document* ada = find_doc(data, "Ada Quill");
  ASSERT_NE(ada, nullptr);
  EXPECT_EQ(ada->title, "Ada Quill");
  EXPECT_EQ(ada->text, "Ada Quill was born in Carrow. She built looms.");
  ASSERT_EQ(data.questions.size(), 2u);
  EXPECT_EQ(data.questions[0].id, "h1");
  EXPECT_EQ(data.questions[0].answers, std::vector<std::string>{"the Lune"});
  EXPECT_EQ(data.questions[0].doc_ids, (std::vector<std::string>{"Ada Quill", "Carrow"}));
  EXPECT_EQ(data.questions[0].kind, "bridge");
  EXPECT_EQ(data.questions[1].doc_ids, std::vector<std::string>{"Carrow"});
}

TEST(HotpotQA, AcceptsJsonLinesToo) {
  TempDir dir;
  std::string lines =
      R"({"_id":"a","question":"Q?","answer":"x","supporting_facts":[["T",0]],"context":[["T",["x y."]]]})"
      "\n\n"
      R"({"_id":"b","question":"R?","answer":"y","supporting_facts":[["U",0]],"context":[["U",["y z."]]]})"
      "\n";
  CorpusData data = load_hotpotqa(dir.write("hotpot.jsonl", lines));
  EXPECT_EQ(data.documents.size(), 2u);
  EXPECT_EQ(data.questions.size(), 2u);
}

TEST(HotpotQA, MalformedRecordNamesFileAndRecord) {
  TempDir dir;
  auto file =
      dir.write("bad.json", R"([{"_id":"ok","question":"Q","answer":"a","context":[["T",["s"]]]},
    {"_id":"broken","question":"Q","answer":"a","context":[["T", "not a list"]]}])");
  std::string message = error_of([&] { load_hotpotqa(file); });
  EXPECT_CONTAINS(message, "bad.json");
  EXPECT_CONTAINS(message, "record 2");
  EXPECT_CONTAINS(message, "broken");
}

TEST(HotpotQA, SyntaxErrorNamesTheLine) {
  TempDir dir;
  auto file =
      dir.write("truncated.json",
                "[\n {\"_id\": \"a\",\n  \"question\": \"Q\",\n  \"context\": [[\"T\", [\"s\"");
  std::string message = error_of([&] { load_hotpotqa(file); });
  EXPECT_CONTAINS(message, "truncated.json");
  EXPECT_CONTAINS(message, "line 4");
}

TEST(TwoWiki, ReadsTheSameLayoutWithItsOwnTypes) {
  TempDir dir;
  auto file = dir.write("2wiki_dev.json", R"([{"_id":"w1","type":"compositional",
    "question":"Who is the mother of the director of Film X?","answer":"Mara Lind",
    "supporting_facts":[["Film X",0],["Oren Lind",1]],
    "evidences":[["Film X","director","Oren Lind"]],
    "context":[["Film X",["Film X is directed by Oren Lind."]],["Oren Lind",["Oren Lind is a director.","His mother is Mara Lind."]]]}])");
  CorpusData data = load_2wiki(file);
  ASSERT_EQ(data.questions.size(), 1u);
  EXPECT_EQ(data.questions[0].kind, "compositional");
  EXPECT_EQ(data.questions[0].doc_ids.size(), 2u);
  EXPECT_EQ(find_doc(data, "Oren Lind")->text, "Oren Lind is a director. His mother is Mara Lind.");
}

TEST(TriviaQA, ReadsEvidenceFilesFromTheEvidenceTree) {
  TempDir dir;
  dir.write("evidence/wikipedia/Lune_River.txt", "The Lune is a river in Carrow.\n");
  dir.write("evidence/web/7/7_1.txt", "A web page about Carrow and the Lune.");
  auto file = dir.write("qa/wikipedia-dev.json", R"({"Version":1.0,"Data":[
    {"QuestionId":"tq_1","Question":"Which river runs through Carrow?",
     "Answer":{"Value":"Lune","Aliases":["River Lune","Lune"],"NormalizedAliases":["lune"]},
     "EntityPages":[{"DocSource":"TagMe","Filename":"Lune_River.txt","Title":"Lune River"}],
     "SearchResults":[{"Filename":"7/7_1.txt","Title":"Carrow page","Rank":0}]}]})");
  CorpusData data = load_triviaqa(file);
  ASSERT_EQ(data.documents.size(), 2u);
  const Document* wiki = find_doc(data, "wikipedia/Lune_River.txt");
  ASSERT_NE(wiki, nullptr);
  EXPECT_EQ(wiki->title, "Lune River");
  EXPECT_EQ(wiki->text, "The Lune is a river in Carrow.");
  ASSERT_NE(find_doc(data, "web/7/7_1.txt"), nullptr);
  ASSERT_EQ(data.questions.size(), 1u);
  EXPECT_EQ(data.questions[0].answers, (std::vector<std::string>{"Lune", "River Lune"}));
  EXPECT_EQ(data.questions[0].doc_ids,
            (std::vector<std::string>{"wikipedia/Lune_River.txt", "web/7/7_1.txt"}));
}

TEST(TriviaQA, MissingEvidenceNamesTheQuestionAndFile) {
  TempDir dir;
  auto file = dir.write("qa/dev.json",
                        R"({"Data":[{"QuestionId":"tq_9","Question":"Q?","Answer":{"Value":"a"},
    "EntityPages":[{"Filename":"Missing.txt","Title":"M"}]}]})");
  std::string message = error_of([&] { load_triviaqa(file); });
  EXPECT_CONTAINS(message, "dev.json");
  EXPECT_CONTAINS(message, "record 1");
  EXPECT_CONTAINS(message, "tq_9");
  EXPECT_CONTAINS(message, "Missing.txt");
}

TEST(TriviaQA, EvidenceNamesNeverLeaveTheEvidenceTree) {
  TempDir dir;
  dir.write("secret.txt", "outside the evidence tree");
  dir.write("evidence/wikipedia/Ok.txt", "inside");
  for (const std::string name : {"../../secret.txt", "/etc/passwd", "a/../../../secret.txt"}) {
    auto file = dir.write("qa/dev.json", R"({"Data":[{"QuestionId":"tq_5","Question":"Q?","Answer":{"Value":"a"},
      "EntityPages":[{"Filename":")" + name + R"(","Title":"M"}]}]})");
    std::string message = error_of([&] { load_triviaqa(file); });
    EXPECT_CONTAINS(message, "dev.json");
    EXPECT_CONTAINS(message, "tq_5");
    EXPECT_CONTAINS(message, "must stay inside");
  }
}

TEST(TriviaQA, RejectsAFileWithoutData) {
  TempDir dir;
  auto file = dir.write("dev.json", R"({"Version": 1})");
  EXPECT_CONTAINS(error_of([&] { load_triviaqa(file); }), "\"Data\"");
}

TEST(NarrativeQA, JoinsQuestionsWithSummariesAndTitles) {
  TempDir dir;
  dir.write("documents.csv",
            "document_id,set,kind,story_url,story_file_size,wiki_url,wiki_title,story_word_count,"
            "story_start,story_end\n"
            "d1,train,gutenberg,u,1,w,The Loom of Carrow,100,a,b\n");
  dir.write(
      "third_party/wikipedia/summaries.csv",
      "document_id,set,summary,summary_tokenized\n"
      "d1,train,\"Ada, a weaver, builds a loom.\nShe sells it in \"\"Carrow\"\".\",ada a weaver\n");
  auto file = dir.write("qaps.csv",
                        "document_id,set,question,answer1,answer2,question_tokenized,answer1_"
                        "tokenized,answer2_tokenized\n"
                        "d1,train,Who builds the loom?,Ada,A weaver,who builds,ada,a weaver\r\n"
                        "d1,train,Where is it sold?,Carrow,In Carrow,where,carrow,in carrow\r\n");
  CorpusData data = load_narrativeqa(file);
  ASSERT_EQ(data.documents.size(), 1u);
  EXPECT_EQ(data.documents[0].id, "d1");
  EXPECT_EQ(data.documents[0].title, "The Loom of Carrow");
  EXPECT_EQ(data.documents[0].text, "Ada, a weaver, builds a loom.\nShe sells it in \"Carrow\".");
  ASSERT_EQ(data.questions.size(), 2u);
  EXPECT_EQ(data.questions[1].question, "Where is it sold?");
  EXPECT_EQ(data.questions[1].answers, (std::vector<std::string>{"Carrow", "In Carrow"}));
  EXPECT_EQ(data.questions[1].doc_ids, std::vector<std::string>{"d1"});
}

TEST(NarrativeQA, WrongFieldCountNamesTheLine) {
  TempDir dir;
  auto file = dir.write("qaps.csv",
                        "document_id,set,question,answer1,answer2,summary\n"
                        "d1,train,Q1?,a,b,\"A summary\nover two lines.\"\n"
                        "d1,train,Q2?,a\n");
  std::string message = error_of([&] { load_narrativeqa(file); });
  EXPECT_CONTAINS(message, "qaps.csv");
  EXPECT_CONTAINS(message, "line 4");
}

TEST(NarrativeQA, UnterminatedQuoteAndMissingSummaryAreErrors) {
  TempDir dir;
  auto file =
      dir.write("a/qaps.csv", "document_id,question,answer1,summary\nd1,Q?,a,\"never closed\n");
  EXPECT_CONTAINS(error_of([&] { load_narrativeqa(file); }), "line 2: unterminated");
  auto lonely = dir.write("b/qaps.csv", "document_id,question,answer1\nd1,Q?,a\n");
  EXPECT_CONTAINS(error_of([&] { load_narrativeqa(lonely); }), "summaries.csv");
  dir.write("c/summaries.csv", "document_id,summary\nd2,Other.\n");
  auto unknown = dir.write("c/qaps.csv", "document_id,question,answer1\nd1,Q?,a\n");
  EXPECT_CONTAINS(error_of([&] { load_narrativeqa(unknown); }),
                  "line 2: no summary for document_id d1");
}

TEST(Jsonl, ReadsDocumentsAndQuestionsFromOneFile) {
  TempDir dir;
  auto file = dir.write("corpus.jsonl",
                        R"({"id": "a", "title": "A", "text": "Alpha text."})"
                        "\n"
                        R"({"id": 7, "text": "Seven text."})"
                        "\n"
                        R"({"question": "What?", "answers": ["Alpha"], "doc_ids": ["a", "7"]})"
                        "\n");
  CorpusData data = load_jsonl(file);
  ASSERT_EQ(data.documents.size(), 2u);
  EXPECT_EQ(data.documents[1].id, "7");
  EXPECT_EQ(data.documents[1].title, "");
  ASSERT_EQ(data.questions.size(), 1u);
  EXPECT_EQ(data.questions[0].id, "q1");
  EXPECT_EQ(data.questions[0].doc_ids, (std::vector<std::string>{"a", "7"}));
}

TEST(Jsonl, ReadsADirectoryWithPassagesAndQuestions) {
  TempDir dir;
  dir.write("set/passages.jsonl", R"({"id":"p1","title":"T","text":"x"})"
                                  "\n");
  dir.write("set/questions.jsonl",
            R"({"id":"q9","question":"Q?","answers":["x"],"doc_ids":["p1"],"kind":"single"})"
            "\n");
  CorpusData data = load_corpus(dir / "set", CorpusFormat::jsonl);
  EXPECT_EQ(data.documents.size(), 1u);
  ASSERT_EQ(data.questions.size(), 1u);
  EXPECT_EQ(data.questions[0].id, "q9");
  EXPECT_EQ(data.questions[0].kind, "single");
}

TEST(Jsonl, MalformedLinesNameFileAndLine) {
  TempDir dir;
  auto bad_json = dir.write("bad.jsonl", R"({"id":"a","text":"x"})"
                                         "\n"
                                         R"({"id":"b","text":)"
                                         "\n");
  EXPECT_CONTAINS(error_of([&] { load_jsonl(bad_json); }), "bad.jsonl: line 2: invalid JSON");
  auto duplicate = dir.write("dup.jsonl", R"({"id":"a","text":"x"})"
                                          "\n\n"
                                          R"({"id":"a","text":"y"})"
                                          "\n");
  EXPECT_CONTAINS(error_of([&] { load_jsonl(duplicate); }),
                  "dup.jsonl: line 3: duplicate document id \"a\" (first on line 1)");
  auto neither = dir.write("neither.jsonl", R"({"name":"a"})"
                                            "\n");
  EXPECT_CONTAINS(error_of([&] { load_jsonl(neither); }),
                  "neither.jsonl: line 1: expected a document");
  auto unknown = dir.write("unknown.jsonl", R"({"id":"a","text":"x"})"
                                            "\n"
                                            R"({"question":"Q","answers":["x"],"doc_ids":["zz"]})"
                                            "\n");
  EXPECT_CONTAINS(error_of([&] { load_jsonl(unknown); }),
                  "unknown.jsonl: line 2: question names unknown document id \"zz\"");
  auto no_answers = dir.write("noans.jsonl", R"({"question":"Q","answers":[]})"
                                             "\n");
  EXPECT_CONTAINS(error_of([&] { load_jsonl(no_answers); }), "line 1");
  EXPECT_CONTAINS(error_of([&] { load_jsonl(dir / "absent.jsonl"); }), "absent.jsonl");
}

TEST(Formats, ParseNamesAndRejectUnknownOnes) {
  EXPECT_EQ(parse_corpus_format("2wiki"), CorpusFormat::two_wiki);
  EXPECT_EQ(corpus_format_name(CorpusFormat::narrativeqa), "narrativeqa");
  EXPECT_CONTAINS(error_of([] { parse_corpus_format("csv"); }), "hotpotqa, 2wiki");
}

TEST(Loaders, ReportProgressUpToOne) {
  TempDir dir;
  auto file = dir.write("c.jsonl", R"({"id":"a","text":"x"})"
                                   "\n");
  double last = -1;
  LoadOptions options;
  options.progress = [&](double f, std::string_view) {
    EXPECT_GE(f, last);
    last = f;
  };
  load_jsonl(file, options);
  EXPECT_EQ(last, 1.0);
}

}  // namespace
}  // namespace lazyscope::corpora

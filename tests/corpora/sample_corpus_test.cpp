#include "corpora/sample_corpus.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <map>
#include <set>

#include "corpora/chunking.h"
#include "corpora/document_store.h"
#include "corpora/evaluation.h"
#include "tests/corpora/temp_dir.h"

namespace lazyscope::corpora {
namespace {

using testing::TempDir;

TEST(SampleCorpus, HasEnoughPassagesOfTheRightLength) {
  CorpusData data = load_sample_corpus();
  EXPECT_GE(data.documents.size(), 60u);
  std::set<std::string> titles;
  for (const Document& d : data.documents) {
    std::size_t words = count_words(d.text);
    EXPECT_GE(words, 80u) << d.id;
    EXPECT_LE(words, 400u) << d.id;
    EXPECT_FALSE(d.title.empty()) << d.id;
    EXPECT_TRUE(titles.insert(d.title).second) << "duplicate title " << d.title;
  }
}

TEST(SampleCorpus, EveryAnswerOccursInOneOfItsGoldPassages) {
  CorpusData data = load_sample_corpus();
  EXPECT_GE(data.questions.size(), 120u);
  std::map<std::string, const Document*> by_id;
  for (const Document& d : data.documents) by_id[d.id] = &d;
  std::set<std::string> question_ids;
  int multi_hop = 0;
  for (const Question& q : data.questions) {
    EXPECT_TRUE(question_ids.insert(q.id).second) << "duplicate question id " << q.id;
    ASSERT_FALSE(q.answers.empty()) << q.id;
    ASSERT_FALSE(q.doc_ids.empty()) << q.id;
    if (q.doc_ids.size() >= 2) {
      ++multi_hop;
      EXPECT_EQ(q.kind, "multi-hop") << q.id;
    }
    for (const std::string& answer : q.answers) {
      bool found = false;
      for (const std::string& id : q.doc_ids) {
        ASSERT_TRUE(by_id.count(id)) << q.id << " names " << id;
        found = found || by_id[id]->text.find(answer) != std::string::npos;
      }
      EXPECT_TRUE(found) << q.id << ": \"" << answer << "\" is in none of its gold passages";
    }
  }
  EXPECT_GE(multi_hop, 30);
}

TEST(SampleCorpus, CachedStoreIsBuiltOnceAndRebuiltWhenTheSampleChanges) {
  TempDir dir;
  // A private copy of the sample and cache, so the test neither reads nor writes the user's.
  std::filesystem::create_directories(dir / "sample");
  std::filesystem::copy_file(sample_corpus_dir() / "passages.jsonl",
                             dir / "sample" / "passages.jsonl");
  std::filesystem::copy_file(sample_corpus_dir() / "questions.jsonl",
                             dir / "sample" / "questions.jsonl");
  std::string old_sample = sample_corpus_dir().string();
  const char* old_cache = std::getenv("XDG_CACHE_HOME");
  std::string saved_cache = old_cache ? old_cache : "";
  ::setenv("LAZYSCOPE_SAMPLE_CORPUS_DIR", (dir / "sample").c_str(), 1);
  ::setenv("XDG_CACHE_HOME", (dir / "cache").c_str(), 1);

  std::filesystem::path db = default_sample_corpus_db();
  EXPECT_EQ(db, dir / "cache" / "lazyscope" / "sample-corpus.db");
  auto first_write = std::filesystem::last_write_time(db);
  int64_t documents = DocumentStore::open(db).count();
  EXPECT_GE(documents, 60);
  EXPECT_EQ(default_sample_corpus_db(), db);
  EXPECT_EQ(std::filesystem::last_write_time(db), first_write);  // not rebuilt

  std::ofstream(dir / "sample" / "passages.jsonl", std::ios::app)
      << R"({"id": "extra", "title": "Extra", "text": "An added passage."})"
      << "\n";
  db = default_sample_corpus_db();
  EXPECT_EQ(DocumentStore::open(db).count(), documents + 1);

  // A damaged cache file is rebuilt too.
  std::ofstream(db, std::ios::binary | std::ios::trunc) << "garbage";
  EXPECT_EQ(DocumentStore::open(default_sample_corpus_db()).count(), documents + 1);

  // The BM25 store answers the sample's own questions: most gold passages rank in the top 5.
  DocumentStore store = DocumentStore::open(db, DocumentStore::Mode::read_only);
  double recall = 0;
  auto questions = store.questions();
  for (const Question& q : questions) {
    std::vector<std::string> ids;
    for (const auto& hit : store.search(q.question, 5)) ids.push_back(hit.document.id);
    recall += recall_at_k(ids, q.doc_ids, 5);
  }
  EXPECT_GT(recall / double(questions.size()), 0.8);

  ::setenv("LAZYSCOPE_SAMPLE_CORPUS_DIR", old_sample.c_str(), 1);
  if (old_cache)
    ::setenv("XDG_CACHE_HOME", saved_cache.c_str(), 1);
  else
    ::unsetenv("XDG_CACHE_HOME");
}

}  // namespace
}  // namespace lazyscope::corpora

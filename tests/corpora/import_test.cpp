#include "corpora/import.h"

#include <gtest/gtest.h>

#include "tests/corpora/temp_dir.h"

namespace lazyscope::corpora {
namespace {

using testing::error_of;
using testing::TempDir;

std::string long_text() {
  std::string text;
  for (int i = 0; i < 30; ++i) text += "Sentence number " + std::to_string(i) + " is filler here. ";
  return text + "The hidden answer is Quorndale. Closing words.";
}

TEST(ImportCorpus, LoadsChunksAndImportsWithProgress) {
  TempDir dir;
  auto source = dir.write(
      "c.jsonl", "{\"id\": \"big\", \"title\": \"Big\", \"text\": \"" + long_text() +
                     "\"}\n"
                     "{\"id\": \"small\", \"title\": \"Small\", \"text\": \"A small one.\"}\n"
                     "{\"question\": \"What is hidden?\", \"answers\": [\"Quorndale\"], "
                     "\"doc_ids\": [\"big\"]}\n");
  ImportCorpusOptions options;
  options.chunk.max_tokens = 40;
  double last = -1;
  options.progress = [&](double f, std::string_view) {
    EXPECT_GE(f, last);
    last = f;
  };
  CorpusStats stats = import_corpus(source, CorpusFormat::jsonl, dir / "c.db", options);
  EXPECT_EQ(last, 1.0);
  EXPECT_EQ(stats.source_format, "jsonl");
  EXPECT_EQ(stats.name, "c");
  EXPECT_GT(stats.documents, 3);
  EXPECT_LE(stats.max_words, 40);

  DocumentStore store = DocumentStore::open(dir / "c.db");
  Document first = store.get("big#1");
  EXPECT_EQ(first.parent_id, "big");
  auto questions = store.questions();
  ASSERT_EQ(questions.size(), 1u);
  ASSERT_EQ(questions[0].doc_ids.size(), 1u);
  EXPECT_NE(store.get(questions[0].doc_ids[0]).text.find("Quorndale"), std::string::npos);
  EXPECT_EQ(store.search("Quorndale", 1).at(0).document.id, questions[0].doc_ids[0]);
}

TEST(ImportCorpus, LoaderErrorsLeaveNoStore) {
  TempDir dir;
  auto source = dir.write("bad.jsonl", "{\"id\": \"a\", \"text\": \"x\"}\n{oops}\n");
  std::string message = error_of([&] { import_corpus(source, CorpusFormat::jsonl, dir / "c.db"); });
  EXPECT_CONTAINS(message, "bad.jsonl: line 2");
  EXPECT_FALSE(std::filesystem::exists(dir / "c.db"));
}

TEST(ImportCorpus, ACancelledImportLeavesThePreviousStoreAsItWas) {
  TempDir dir;
  auto small = dir.write("small.jsonl", "{\"id\": \"a\", \"title\": \"A\", \"text\": \"Only one.\"}\n");
  import_corpus(small, CorpusFormat::jsonl, dir / "c.db");
  std::string lines;
  for (int i = 0; i < 3000; ++i)
    lines += "{\"id\": \"d" + std::to_string(i) + "\", \"title\": \"T\", \"text\": \"Words " +
             std::to_string(i) + " here.\"}\n";
  auto big = dir.write("big.jsonl", lines);
  std::atomic<bool> cancel{false};
  ImportCorpusOptions options;
  double cancelled_at = -1;
  // Cancel once the writing has begun (past the loader's share), as a Cancel press would.
  options.progress = cancellable(
      [&](double f, std::string_view) {
        if (f > 0.5 && cancelled_at < 0) {
          cancelled_at = f;
          cancel.store(true);
        }
      },
      &cancel);
  EXPECT_THROW(import_corpus(big, CorpusFormat::jsonl, dir / "c.db", options), Cancelled);
  EXPECT_GT(cancelled_at, 0.5);
  EXPECT_LT(cancelled_at, 1.0);
  DocumentStore store = DocumentStore::open(dir / "c.db");
  EXPECT_EQ(store.count(), 1);
  EXPECT_EQ(store.get("a").text, "Only one.");
  for (const auto& entry : std::filesystem::directory_iterator(dir.path())) {
    const std::string name = entry.path().filename().string();
    EXPECT_TRUE(name == "c.db" || name == "small.jsonl" || name == "big.jsonl") << "left behind: " << name;
  }
}

}  // namespace
}  // namespace lazyscope::corpora

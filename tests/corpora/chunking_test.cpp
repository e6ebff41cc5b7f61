#include "corpora/chunking.h"

#include <gtest/gtest.h>

namespace lazyscope::corpora {
namespace {

std::string words(int n, const std::string& stem = "w") {
  std::string out;
  for (int i = 0; i < n; ++i) out += (i ? " " : "") + stem + std::to_string(i);
  return out;
}

TEST(Chunking, KeepsShortTextsWhole) {
  ChunkOptions options;
  options.max_tokens = 50;
  EXPECT_EQ(chunk_text("One short sentence.", options),
            std::vector<std::string>{"One short sentence."});
  options.max_tokens = 0;
  EXPECT_EQ(chunk_text(words(500), options).size(), 1u);
  EXPECT_EQ(count_words("  a b\tc\n d "), 4u);
}

TEST(Chunking, SplitsAtSentencesWithinTheLimit) {
  std::string text =
      "Alpha beta gamma delta. Epsilon zeta eta theta. Iota kappa lambda mu. Nu xi omicron pi.";
  ChunkOptions options;
  options.max_tokens = 8;
  auto chunks = chunk_text(text, options);
  ASSERT_EQ(chunks.size(), 2u);
  EXPECT_EQ(chunks[0], "Alpha beta gamma delta. Epsilon zeta eta theta.");
  EXPECT_EQ(chunks[1], "Iota kappa lambda mu. Nu xi omicron pi.");
}

TEST(Chunking, BreaksLongSentencesIntoWordsAndKeepsEveryWord) {
  ChunkOptions options;
  options.max_tokens = 10;
  auto chunks = chunk_text(words(35), options);
  ASSERT_EQ(chunks.size(), 4u);
  std::string joined;
  for (const auto& c : chunks) {
    EXPECT_LE(count_words(c), 10u);
    joined += (joined.empty() ? "" : " ") + c;
  }
  EXPECT_EQ(joined, words(35));
}

TEST(Chunking, UsesTheCallersTokenCounter) {
  // A counter where every character is a token: 5-character words cost 5 each.
  ChunkOptions options;
  options.max_tokens = 12;
  options.count_tokens = [](std::string_view text) {
    std::size_t n = 0;
    for (char c : text) n += c != ' ';
    return n;
  };
  auto chunks = chunk_text("aaaaa bbbbb ccccc ddddd eeeee", options);
  ASSERT_EQ(chunks.size(), 3u);
  EXPECT_EQ(chunks[0], "aaaaa bbbbb");
}

TEST(Chunking, OverlapRepeatsTheTailOfThePreviousChunk) {
  ChunkOptions options;
  options.max_tokens = 10;
  options.overlap_tokens = 2;
  auto chunks = chunk_text(words(20), options);
  ASSERT_GE(chunks.size(), 3u);
  EXPECT_EQ(chunks[1].substr(0, 5), "w8 w9");
}

TEST(Chunking, ChunkCorpusRenamesDocumentsAndRetargetsGoldIds) {
  CorpusData data;
  data.documents.push_back(
      {0, "long", "Long", words(30) + " The answer is Zephyr. " + words(30, "x"), "", 0});
  data.documents.push_back({0, "short", "Short", "Tiny text.", "", 0});
  data.questions.push_back({"q1", "What is it?", {"Zephyr"}, {"long"}, "single"});
  data.questions.push_back({"q2", "Other?", {"nowhere"}, {"long", "short"}, "multi-hop"});
  ChunkOptions options;
  options.max_tokens = 20;
  chunk_corpus(data, options);
  ASSERT_GT(data.documents.size(), 3u);
  EXPECT_EQ(data.documents[0].id, "long#1");
  EXPECT_EQ(data.documents[0].parent_id, "long");
  EXPECT_EQ(data.documents.back().id, "short");
  ASSERT_EQ(data.questions[0].doc_ids.size(), 1u);
  const std::string& gold = data.questions[0].doc_ids[0];
  bool found = false;
  for (const auto& d : data.documents)
    if (d.id == gold) found = d.text.find("Zephyr") != std::string::npos;
  EXPECT_TRUE(found) << gold;
  // No chunk holds the answer: every chunk of the parent becomes gold.
  EXPECT_EQ(data.questions[1].doc_ids.size(), data.documents.size());
}

}  // namespace
}  // namespace lazyscope::corpora

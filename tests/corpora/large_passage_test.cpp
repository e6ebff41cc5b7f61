// A 10 MB passage goes through chunking, import and search with snippets and comes out right
// (how the time scales is bench_input_scaling's table; here the test timeout guards hangs).
#include <gtest/gtest.h>

#include <string>

#include "corpora/chunking.h"
#include "corpora/document_store.h"
#include "temp_dir.h"

namespace lazyscope::corpora {
namespace {

using testing::TempDir;

std::string ten_megabytes_of_sentences() {
  const std::string sentence = "The lune flows past carrow and the old stone bridge. ";
  std::string text;
  text.reserve((10u << 20) + sentence.size());
  while (text.size() < (10u << 20)) text += sentence;
  return text + "The zyzzyva sleeps at the very end.";
}

TEST(LargePassage, ChunksCoverTheWholeText) {
  const std::string text = ten_megabytes_of_sentences();
  ChunkOptions options;
  options.max_tokens = 256;
  options.overlap_tokens = 16;
  const std::vector<std::string> chunks = chunk_text(text, options);
  const std::size_t words = count_words(text);
  EXPECT_GE(chunks.size(), words / 256);
  EXPECT_LE(chunks.size(), words / (256 - 2 * 16) + 2);
  for (const std::string& c : chunks) ASSERT_LE(count_words(c), 256u);
  EXPECT_NE(chunks.back().find("zyzzyva"), std::string::npos);
}

TEST(LargePassage, OneWordWithoutSpacesIsOneChunk) {
  const std::string word(10u << 20, 'x');
  ChunkOptions options;
  options.max_tokens = 64;
  const std::vector<std::string> chunks = chunk_text(word, options);
  ASSERT_EQ(chunks.size(), 1u);
  EXPECT_EQ(chunks[0].size(), word.size());
}

TEST(LargePassage, ImportAndSearchWithASnippet) {
  TempDir dir;
  CorpusData data;
  data.documents.push_back({0, "big", "Big", ten_megabytes_of_sentences(), "", 0});
  data.documents.push_back({0, "small", "Small", "A note about a lantern.", "", 0});
  DocumentStore store = DocumentStore::import(dir.path() / "big.db", data);
  const auto hits = store.search("zyzzyva", 3);
  ASSERT_EQ(hits.size(), 1u);
  EXPECT_EQ(hits[0].document.id, "big");
  EXPECT_NE(hits[0].snippet.find("[zyzzyva]"), std::string::npos) << hits[0].snippet;
  EXPECT_LT(hits[0].snippet.size(), 1000u);
}

}  // namespace
}  // namespace lazyscope::corpora

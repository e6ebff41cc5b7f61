#include "corpora/document_store.h"

#include <gtest/gtest.h>

#include <fstream>

#include "base/error.h"
#include "tests/corpora/temp_dir.h"

namespace lazyscope::corpora {
namespace {

using testing::error_of;
using testing::TempDir;

Document doc(std::string id, std::string title, std::string text) {
  Document d;
  d.id = std::move(id);
  d.title = std::move(title);
  d.text = std::move(text);
  return d;
}

CorpusData small_corpus() {
  CorpusData data;
  data.documents.push_back(
      doc("harbour", "Port Quillan",
          "A busy harbour city on the gulf, with ships, nets and a long stone mole."));
  data.documents.push_back(
      doc("lantern", "Tidal lantern",
          "The tidal lantern changes colour with the tide so pilots can read the depth."));
  data.documents.push_back(
      doc("forest", "Kessel Forest", "Oak and beech woods where woodcarvers live and work."));
  data.documents.push_back(
      doc("mixed", "Notes", "Ships pass the lighthouse; the lantern on it is old."));
  data.questions.push_back(
      {"q1", "What changes colour with the tide?", {"The tidal lantern"}, {"lantern"}, "single"});
  data.questions.push_back({"q2",
                            "Where do woodcarvers live near a harbour?",
                            {"Kessel"},
                            {"forest", "harbour"},
                            "multi-hop"});
  return data;
}

std::string file_bytes(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

TEST(DocumentStore, ImportKeepsIdsOrderAndQuestions) {
  TempDir dir;
  DocumentStore store =
      DocumentStore::import(dir / "c.db", small_corpus(), {"small", "jsonl", "src.jsonl", "", {}});
  EXPECT_EQ(store.count(), 4);
  EXPECT_EQ(store.question_count(), 2);
  Document lantern = store.get("lantern");
  EXPECT_EQ(lantern.rowid, 2);
  EXPECT_EQ(lantern.title, "Tidal lantern");
  EXPECT_EQ(store.get_by_rowid(3).id, "forest");
  EXPECT_FALSE(store.find("nope").has_value());
  EXPECT_FALSE(error_of([&] { store.get("nope"); }).empty());
  auto page = store.list(1, 2);
  ASSERT_EQ(page.size(), 2u);
  EXPECT_EQ(page[0].id, "lantern");
  EXPECT_EQ(page[1].id, "forest");
  auto questions = store.questions();
  ASSERT_EQ(questions.size(), 2u);
  EXPECT_EQ(questions[1].doc_ids, (std::vector<std::string>{"forest", "harbour"}));
  EXPECT_EQ(questions[1].kind, "multi-hop");
  CorpusStats stats = store.stats();
  EXPECT_EQ(stats.name, "small");
  EXPECT_EQ(stats.source_format, "jsonl");
  EXPECT_EQ(stats.documents, 4);
  EXPECT_EQ(stats.questions, 2);
  EXPECT_EQ(stats.multi_hop_questions, 1);
  EXPECT_EQ(stats.min_words, 9);
  EXPECT_GT(stats.file_bytes, 0);
}

TEST(DocumentStore, ReopenedStoreHasTheSameIds) {
  TempDir dir;
  { DocumentStore::import(dir / "c.db", small_corpus()); }
  DocumentStore store = DocumentStore::open(dir / "c.db", DocumentStore::Mode::read_only);
  EXPECT_EQ(store.get("forest").rowid, 3);
  EXPECT_EQ(store.metadata("name"), "c");
}

TEST(DocumentStore, Bm25RanksThePassageWithTheQueryTermsFirst) {
  TempDir dir;
  DocumentStore store = DocumentStore::import(dir / "c.db", small_corpus());
  auto hits = store.search("tidal lantern colour", 3);
  ASSERT_GE(hits.size(), 2u);
  EXPECT_EQ(hits[0].document.id, "lantern");
  EXPECT_EQ(hits[0].rank, 1);
  EXPECT_GT(hits[0].score, hits[1].score);
  EXPECT_NE(hits[0].snippet.find("[lantern]"), std::string::npos) << hits[0].snippet;
  // Stemming and case: "Woodcarver" finds "woodcarvers".
  auto forest = store.search("Woodcarver", 5);
  ASSERT_EQ(forest.size(), 1u);
  EXPECT_EQ(forest[0].document.id, "forest");
  // A title match counts: "Quillan" only appears in a title.
  EXPECT_EQ(store.search("quillan", 5).at(0).document.id, "harbour");
}

TEST(DocumentStore, SearchIgnoresOperatorsPunctuationAndLimitsK) {
  TempDir dir;
  DocumentStore store = DocumentStore::import(dir / "c.db", small_corpus());
  EXPECT_EQ(store.search("ships AND \"lantern* NEAR( -- )", 10).size(), 3u);  // words ORed
  EXPECT_EQ(store.search("ships lantern", 1).size(), 1u);
  EXPECT_TRUE(store.search("?!", 5).empty());
  EXPECT_TRUE(store.search("zeppelin", 5).empty());
  // Function words are dropped when content words remain, and used when nothing else is left.
  EXPECT_EQ(store.search("the forest", 5).size(), 1u);
  EXPECT_FALSE(store.search("the", 5).empty());
}

TEST(DocumentStore, PopularityCountersPersist) {
  TempDir dir;
  {
    DocumentStore store = DocumentStore::import(dir / "c.db", small_corpus());
    store.bump_popularity("forest", 3);
    store.bump_popularity("lantern");
    EXPECT_FALSE(error_of([&] { store.bump_popularity("missing"); }).empty());
  }
  DocumentStore store = DocumentStore::open(dir / "c.db");
  auto top = store.most_popular(5);
  ASSERT_EQ(top.size(), 2u);
  EXPECT_EQ(top[0].id, "forest");
  EXPECT_EQ(top[0].popularity, 3);
  EXPECT_EQ(top[1].id, "lantern");
  store.reset_popularity();
  EXPECT_TRUE(store.most_popular(5).empty());
  DocumentStore reader = DocumentStore::open(dir / "c.db", DocumentStore::Mode::read_only);
  EXPECT_FALSE(error_of([&] { reader.bump_popularity("forest"); }).empty());
}

TEST(DocumentStore, FailedImportLeavesThePreviousStoreIntact) {
  TempDir dir;
  auto path = dir / "c.db";
  { DocumentStore::import(path, small_corpus()); }
  std::string before = file_bytes(path);

  // A duplicate id half-way through the documents.
  CorpusData bad = small_corpus();
  for (int i = 0; i < 5000; ++i)
    bad.documents.push_back(doc("extra" + std::to_string(i), "x", "filler words"));
  bad.documents.push_back(doc("forest", "again", "duplicate"));
  std::string message = error_of([&] { DocumentStore::import(path, bad); });
  EXPECT_NE(message.find("duplicate document id \"forest\""), std::string::npos) << message;

  // A progress callback that aborts midway (as a cancelled GUI import would).
  CorpusData big = small_corpus();
  for (int i = 0; i < 10000; ++i)
    big.documents.push_back(doc("more" + std::to_string(i), "y", "more filler"));
  ImportOptions cancel;
  cancel.progress = [](double fraction, std::string_view) {
    if (fraction > 0.3) throw Error("cancelled");
  };
  EXPECT_EQ(error_of([&] { DocumentStore::import(path, big, cancel); }), "cancelled");

  // A question naming a document that is not there.
  CorpusData dangling = small_corpus();
  dangling.questions.push_back({"q3", "?", {"a"}, {"ghost"}, ""});
  EXPECT_NE(error_of([&] { DocumentStore::import(path, dangling); }).find("ghost"),
            std::string::npos);

  EXPECT_EQ(file_bytes(path), before);
  DocumentStore store = DocumentStore::open(path);
  EXPECT_EQ(store.count(), 4);
  EXPECT_EQ(store.search("lantern", 1).at(0).document.id, "lantern");
  // No temporary files are left behind.
  int files = 0;
  for (const auto& entry : std::filesystem::directory_iterator(dir.path())) {
    (void)entry;
    ++files;
  }
  EXPECT_EQ(files, 1);
}

TEST(DocumentStore, SuccessfulImportReplacesTheStore) {
  TempDir dir;
  auto path = dir / "c.db";
  { DocumentStore::import(path, small_corpus()); }
  CorpusData other;
  other.documents.push_back(doc("only", "Only", "A single replacement document."));
  DocumentStore store = DocumentStore::import(path, other);
  EXPECT_EQ(store.count(), 1);
  EXPECT_EQ(DocumentStore::open(path).count(), 1);
}

TEST(DocumentStore, ImportRefusesToReplaceAFileThatIsNotACorpus) {
  TempDir dir;
  auto notes = dir.write("notes.txt", "precious notes");
  std::string message = error_of([&] { DocumentStore::import(notes, small_corpus()); });
  EXPECT_NE(message.find("refusing to replace"), std::string::npos) << message;
  EXPECT_EQ(file_bytes(notes), "precious notes");
}

TEST(DocumentStore, OpenRejectsMissingAndForeignFiles) {
  TempDir dir;
  EXPECT_NE(error_of([&] { DocumentStore::open(dir / "absent.db"); }).find("absent.db"),
            std::string::npos);
  auto junk = dir.write("junk.db",
                        "this is not a database at all, just some text to fill the header........");
  std::string message = error_of([&] { DocumentStore::open(junk); });
  EXPECT_NE(message.find("junk.db"), std::string::npos) << message;
  EXPECT_NE(message.find("not a LazyScope corpus"), std::string::npos) << message;
}

TEST(DocumentStore, ProgressReachesOne) {
  TempDir dir;
  double last = -1;
  ImportOptions options;
  options.progress = [&](double f, std::string_view) {
    EXPECT_GE(f, last);
    last = f;
  };
  DocumentStore::import(dir / "c.db", small_corpus(), options);
  EXPECT_EQ(last, 1.0);
}

}  // namespace
}  // namespace lazyscope::corpora

// The corpus commands of lazyscope-cli, run as a user would from a fresh clone.
#include <gtest/gtest.h>

#include <array>
#include <cstdio>
#include <memory>

#include "tests/corpora/temp_dir.h"

namespace lazyscope::corpora {
namespace {

using testing::TempDir;

struct Result {
  int status = -1;
  std::string output;
};

Result run(const std::string& arguments) {
  Result result;
  std::string command = std::string(LAZYSCOPE_CLI) + " " + arguments + " 2>&1";
  FILE* pipe = ::popen(command.c_str(), "r");
  if (!pipe) return result;
  std::array<char, 4096> buffer;
  while (std::size_t n = std::fread(buffer.data(), 1, buffer.size(), pipe))
    result.output.append(buffer.data(), n);
  int status = ::pclose(pipe);
  result.status = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return result;
}

TEST(CliCorpus, ImportsTheSampleAndSearchesIt) {
  TempDir dir;
  std::string db = (dir / "sample.db").string();
  Result imported = run("corpus import " + std::string(LAZYSCOPE_SOURCE_DIR) +
                        "/corpora/sample --format jsonl --out " + db);
  ASSERT_EQ(imported.status, 0) << imported.output;
  EXPECT_CONTAINS(imported.output, "questions");
  Result searched = run("corpus search " + db + " \"inventor of the tidal lantern\" -k 3");
  ASSERT_EQ(searched.status, 0) << searched.output;
  EXPECT_CONTAINS(searched.output, "rank");
  EXPECT_CONTAINS(searched.output, "1     ");
  EXPECT_CONTAINS(searched.output, "p014");
  Result stats = run("corpus stats " + db);
  ASSERT_EQ(stats.status, 0) << stats.output;
  EXPECT_CONTAINS(stats.output, "documents");
}

TEST(CliCorpus, BadInputExitsNonZeroNamingTheFile) {
  TempDir dir;
  auto bad = dir.write("bad.jsonl", "{\"id\": \"a\", \"text\": \"x\"}\nnot json\n");
  std::string db = (dir / "out.db").string();
  Result result = run("corpus import " + bad.string() + " --format jsonl --out " + db);
  EXPECT_NE(result.status, 0);
  EXPECT_CONTAINS(result.output, "bad.jsonl: line 2");
  EXPECT_FALSE(std::filesystem::exists(db));
  Result unknown = run("corpus import " + bad.string() + " --format csv --out " + db);
  EXPECT_NE(unknown.status, 0);
}

}  // namespace
}  // namespace lazyscope::corpora

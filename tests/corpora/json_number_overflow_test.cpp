// Fuzzing found that a JSON number too large for a double escaped the dataset loaders as
// nlohmann's out_of_range; each loader now reports an Error naming the file.
#include <gtest/gtest.h>

#include "base/error.h"
#include "corpora/loaders.h"
#include "temp_dir.h"

namespace lazyscope::corpora {
namespace {

using testing::TempDir;

std::string error_of(auto&& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  } catch (const std::exception& e) {
    return std::string("not a lazyscope::Error: ") + e.what();
  }
  return "";
}

TEST(JsonNumberOverflow, EveryJsonLoaderNamesTheFile) {
  TempDir dir;
  const std::pair<CorpusFormat, std::string> cases[] = {
      {CorpusFormat::hotpotqa, R"([2e333, {"_id":"a"}])"},
      {CorpusFormat::two_wiki,
       R"([{"_id":"w","question":"q","answer":22e222222222222,"context":[]}])"},
      {CorpusFormat::triviaqa, R"({"Data":[{"QuestionId":1e999}]})"},
      {CorpusFormat::jsonl, "{\"id\":\"a\",\"text\":\"x\",\"n\":9e9999}\n"},
  };
  for (const auto& c : cases) {
    const CorpusFormat format = c.first;  // a named copy: clang 14 lambdas cannot capture bindings
    const auto file =
        dir.write("overflow-" + std::string(corpus_format_name(format)) + ".json", c.second);
    const std::string e = error_of([&] { load_corpus(file, format); });
    EXPECT_EQ(e.find("not a lazyscope::Error"), std::string::npos) << e;
    EXPECT_NE(e.find(file.filename().string()), std::string::npos) << e;
  }
}

}  // namespace
}  // namespace lazyscope::corpora

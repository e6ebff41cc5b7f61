// Outputs never land on an input, on another output of the run, or on a file of another kind.
#include "base/output_guard.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <fstream>

#include "base/error.h"

namespace lazyscope {
namespace {

namespace fs = std::filesystem;

class OutputGuardTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("lazyscope-guard-" + std::to_string(::getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_ / "model");
    std::ofstream(dir_ / "request.json") << R"({"query": "q"})";
    std::ofstream(dir_ / "model" / "config.json") << "{}";
    std::ofstream(dir_ / "old_report.json") << R"({"traceEvents": []})";
  }
  void TearDown() override { fs::remove_all(dir_); }

  static OutputGuard::KindCheck trace_kind() {
    return [](const fs::path& p) { return is_json_object_with_keys(p, {"traceEvents"}); };
  }
  std::string error_of(const OutputGuard& g) {
    try {
      g.check();
    } catch (const Error& e) {
      return e.what();
    }
    return "";
  }
  fs::path dir_;
};

TEST_F(OutputGuardTest, RefusesToWriteOverAnInput) {
  OutputGuard g;
  g.input(dir_ / "request.json", "--request");
  g.output(dir_ / "." / "request.json", "--record", "session report", trace_kind());
  const std::string e = error_of(g);
  EXPECT_NE(e.find("--record"), std::string::npos) << e;
  EXPECT_NE(e.find("--request"), std::string::npos) << e;
  EXPECT_NE(e.find("request.json"), std::string::npos) << e;
}

TEST_F(OutputGuardTest, RefusesAnInputThroughALink) {
  fs::create_symlink(dir_ / "request.json", dir_ / "link.json");
  OutputGuard g;
  g.input(dir_ / "request.json", "--request");
  g.output(dir_ / "link.json", "--out", "trace", trace_kind());
  EXPECT_NE(error_of(g).find("--request"), std::string::npos);
}

TEST_F(OutputGuardTest, RefusesAnOutputInsideAnInputFolder) {
  OutputGuard g;
  g.input(dir_ / "model", "--model");
  g.output(dir_ / "model" / "new.json", "--out", "trace", trace_kind());
  EXPECT_NE(error_of(g).find("inside the --model input folder"), std::string::npos) << error_of(g);
}

TEST_F(OutputGuardTest, RefusesTwoOutputsOnOneFile) {
  OutputGuard g;
  g.output(dir_ / "a.json", "--dump-logits", "logits dump", trace_kind());
  g.output(dir_ / "sub" / ".." / "a.json", "--record", "session report", trace_kind());
  EXPECT_NE(error_of(g).find("also the --dump-logits output"), std::string::npos) << error_of(g);
}

TEST_F(OutputGuardTest, RefusesAFileOfAnotherKind) {
  OutputGuard g;
  g.output(dir_ / "model" / "config.json", "--out", "trace", trace_kind());
  EXPECT_NE(error_of(g).find("exists and is not a trace"), std::string::npos) << error_of(g);
}

TEST_F(OutputGuardTest, RefusesAFolder) {
  OutputGuard g;
  g.output(dir_ / "model", "--out", "trace", trace_kind());
  EXPECT_NE(error_of(g).find("is a folder"), std::string::npos) << error_of(g);
}

TEST_F(OutputGuardTest, AllowsItsOwnKindNewFilesAndEmptyFiles) {
  std::ofstream(dir_ / "empty.json").close();
  OutputGuard g;
  g.input(dir_ / "request.json", "--request");
  g.input(dir_ / "model", "--model");
  g.output(dir_ / "old_report.json", "--out", "trace", trace_kind());
  g.output(dir_ / "new.json", "--dump-logits", "logits dump", trace_kind());
  g.output(dir_ / "empty.json", "--record", "session report", trace_kind());
  EXPECT_EQ(error_of(g), "");
}

TEST(SameFile, ComparesMissingFilesByNormalPath) {
  EXPECT_TRUE(same_file("/nonexistent-xyz/a/../b.txt", "/nonexistent-xyz/b.txt"));
  EXPECT_FALSE(same_file("/nonexistent-xyz/a.txt", "/nonexistent-xyz/b.txt"));
}

}  // namespace
}  // namespace lazyscope

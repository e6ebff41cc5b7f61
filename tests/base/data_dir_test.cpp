// The data folder is found at run time: from the environment, or from where the program runs
// (this test binary sits in the build tree, whose root holds share/lazyscope).
#include "base/data_dir.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <optional>
#include <string>

#include "base/error.h"

namespace lazyscope {
namespace {

namespace fs = std::filesystem;

// Sets an environment variable for one scope and restores what was there before.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const std::string& value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old;
    ::setenv(name, value.c_str(), 1);
  }
  ~ScopedEnv() {
    if (old_) {
      ::setenv(name_, old_->c_str(), 1);
    } else {
      ::unsetenv(name_);
    }
  }

 private:
  const char* name_;
  std::optional<std::string> old_;
};

std::string error_of(const std::function<void()>& call) {
  try {
    call();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(DataDir, BuildTreeHoldsTheTextAndTheSampleCorpus) {
  ::unsetenv("LAZYSCOPE_DATA_DIR");
  const fs::path dir = data_dir();
  EXPECT_TRUE(fs::exists(dir / "lazyscope-data")) << dir;
  EXPECT_TRUE(fs::exists(data_path("text") / "towns_and_rivers.txt")) << dir;
  EXPECT_TRUE(fs::exists(data_path("corpus/sample") / "passages.jsonl")) << dir;
}

TEST(DataDir, EnvironmentChoosesAnotherFolder) {
  const fs::path dir =
      fs::temp_directory_path() / ("lazyscope-data-test-" + std::to_string(::getpid()));
  fs::create_directories(dir / "text");
  std::ofstream(dir / "lazyscope-data") << "test\n";
  {
    ScopedEnv env("LAZYSCOPE_DATA_DIR", dir.string());
    EXPECT_EQ(data_dir(), dir);
    EXPECT_EQ(data_path("text"), dir / "text");
    const std::string missing =
        error_of([] { data_path("corpus/sample", "LAZYSCOPE_SAMPLE_CORPUS_DIR"); });
    EXPECT_NE(missing.find((dir / "corpus/sample").string()), std::string::npos) << missing;
    EXPECT_NE(missing.find("LAZYSCOPE_SAMPLE_CORPUS_DIR"), std::string::npos) << missing;
  }
  fs::remove_all(dir);
}

TEST(DataDir, FolderWithoutTheMarkerIsRefusedByName) {
  ScopedEnv env("LAZYSCOPE_DATA_DIR", fs::temp_directory_path().string());
  const std::string message = error_of([] { data_dir(); });
  EXPECT_NE(message.find("LAZYSCOPE_DATA_DIR=" + fs::temp_directory_path().string()),
            std::string::npos)
      << message;
  EXPECT_NE(message.find("lazyscope-data"), std::string::npos) << message;
}

TEST(DataDir, OverrideVariableWinsAndMustExist) {
  {
    ScopedEnv env("LAZYSCOPE_TEXT_DIR", fs::temp_directory_path().string());
    EXPECT_EQ(data_path("text", "LAZYSCOPE_TEXT_DIR"), fs::temp_directory_path());
  }
  ScopedEnv env("LAZYSCOPE_TEXT_DIR", "/nonexistent/lazyscope-text");
  const std::string message = error_of([] { data_path("text", "LAZYSCOPE_TEXT_DIR"); });
  EXPECT_NE(message.find("LAZYSCOPE_TEXT_DIR=/nonexistent/lazyscope-text: no such file"),
            std::string::npos)
      << message;
}

}  // namespace
}  // namespace lazyscope

// `lazyscope-cli tokenize` / `detokenize` as a user runs them, against the library's own results.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "engine/tokenizer/tokenizer.h"
#include "tests/engine/tokenizer/tokenizer_test_util.h"

namespace lazyscope {
namespace {

using nlohmann::json;
using namespace tokenizer_testing;

class TokenizeCommand : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = scratch_dir("tokcli");
    write_file(dir_ / "tokenizer.json", trained_tokenizer_json());
    tokenizer_ = std::make_unique<Tokenizer>(Tokenizer::from_json(trained_tokenizer_json(), "t"));
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  int cli(const std::string& arguments, std::string& output, bool merge_stderr = true) {
    return run_command(shell_quote(LAZYSCOPE_CLI) + " " + arguments, output, merge_stderr);
  }

  std::filesystem::path dir_;
  std::unique_ptr<Tokenizer> tokenizer_;
};

TEST_F(TokenizeCommand, PrintsTheLibraryIdsAsJson) {
  const std::string text = "It's 12345 cafés, 日本語 😀\n\tand <|eot_id|> more  ";
  std::string output;
  ASSERT_EQ(cli("tokenize --model " + shell_quote(dir_.string()) + " " + shell_quote(text), output),
            0)
      << output;
  EXPECT_EQ(json::parse(output).get<std::vector<int32_t>>(), tokenizer_->encode(text));
}

TEST_F(TokenizeCommand, BosFlagPrependsBos) {
  std::string output;
  ASSERT_EQ(cli("tokenize --bos --model " + shell_quote(dir_.string()) + " Hello", output), 0)
      << output;
  auto expected = tokenizer_->encode("Hello");
  expected.insert(expected.begin(), tokenizer_->bos_id());
  EXPECT_EQ(json::parse(output).get<std::vector<int32_t>>(), expected);
}

TEST_F(TokenizeCommand, DetokenizeAcceptsJsonOrSeparateIds) {
  const std::string text = "Die Straße am Fluss, 1947 — naïve?";
  const auto ids = tokenizer_->encode(text);
  std::string output;
  ASSERT_EQ(
      cli("detokenize --model " + shell_quote(dir_.string()) + " " + shell_quote(json(ids).dump()),
          output, false),
      0);
  EXPECT_EQ(output, text + "\n");
  std::string separate;
  for (int32_t id : ids) {
    separate += ' ';
    separate += std::to_string(id);
  }
  ASSERT_EQ(cli("detokenize --model " + shell_quote(dir_.string()) + separate, output, false), 0);
  EXPECT_EQ(output, text + "\n");
}

TEST_F(TokenizeCommand, BadInputFailsWithAClearMessage) {
  std::string output;
  EXPECT_NE(cli("tokenize --model /nonexistent/model x", output), 0);
  EXPECT_NE(output.find("/nonexistent/model"), std::string::npos) << output;

  EXPECT_NE(cli("detokenize --model " + shell_quote(dir_.string()) + " 1 two 3", output), 0);
  EXPECT_NE(output.find("'two' is not a token id"), std::string::npos) << output;

  EXPECT_NE(cli("detokenize --model " + shell_quote(dir_.string()) + " 99999999", output), 0);
  EXPECT_NE(output.find("out of range"), std::string::npos) << output;

  write_file(dir_ / "tokenizer.json", "{\"model\": ");
  EXPECT_NE(cli("tokenize --model " + shell_quote(dir_.string()) + " x", output), 0);
  EXPECT_NE(output.find((dir_ / "tokenizer.json").string()), std::string::npos) << output;
}

}  // namespace
}  // namespace lazyscope

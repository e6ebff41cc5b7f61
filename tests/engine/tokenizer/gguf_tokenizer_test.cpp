// The tokenizer built from GGUF metadata against HF `tokenizers` on the same vocabulary:
// a tiny trained vocabulary for each pre-tokenizer, and SmolLM2's real one when installed.
#include "engine/model/gguf_tokenizer.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "engine/model/gguf_file.h"
#include "engine/model/gguf_test_util.h"
#include "engine/model/model_registry.h"
#include "base/error.h"

namespace lazyscope {
namespace {

using testing_gguf::shell_quoted;

// Compares every case of a {text, ids} JSON list; returns the number of mismatches.
int compare_cases(const Tokenizer& tokenizer, const std::filesystem::path& cases_json, int* total,
                  bool check_decode) {
  const auto cases = nlohmann::json::parse(testing_gguf::read_text(cases_json));
  int mismatches = 0;
  *total = int(cases.size());
  for (const auto& c : cases) {
    const std::string text = c["text"];
    const std::vector<int32_t> expected = c["ids"].get<std::vector<int32_t>>();
    const std::vector<int32_t> ours = tokenizer.encode(text);
    if (ours != expected) {
      if (++mismatches <= 5) {
        ADD_FAILURE() << "text " << nlohmann::json(text).dump() << "\n ours "
                      << nlohmann::json(ours).dump() << "\n   HF "
                      << nlohmann::json(expected).dump();
      }
    } else if (check_decode) {
      EXPECT_EQ(tokenizer.decode(ours), text);
    }
  }
  return mismatches;
}

class GgufTokenizerTest : public ::testing::TestWithParam<const char*> {
 protected:
  void SetUp() override { dir_ = testing_gguf::scratch_dir("tok"); }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::filesystem::path dir_;
};

TEST_P(GgufTokenizerTest, MatchesHfTokenizersOnTheSameVocabulary) {
  const std::string pre = GetParam();
  ASSERT_TRUE(testing_gguf::run_fixture("llama " + shell_quoted(dir_ / "m.gguf") + " " +
                                        shell_quoted(dir_) + " --pre " + pre));
  const GgufFile file = GgufFile::open(dir_ / "m.gguf");
  const TokenizerSpec spec = gguf_tokenizer_spec(file);
  EXPECT_EQ(spec.vocab.size(), 420u);
  EXPECT_EQ(spec.added_tokens.size(), 3u);
  EXPECT_EQ(spec.bos_id, 1);
  EXPECT_EQ(spec.eos_ids, std::vector<int32_t>{2});
  EXPECT_TRUE(spec.add_bos);
  const Tokenizer tokenizer = load_gguf_tokenizer(file);
  EXPECT_EQ(tokenizer.bos_id(), 1);
  EXPECT_TRUE(tokenizer.add_bos());
  int total = 0;
  EXPECT_EQ(compare_cases(tokenizer, dir_ / "tokens.json", &total, true), 0);
  EXPECT_EQ(total, 300);
}

INSTANTIATE_TEST_SUITE_P(GgufPreTokenizers, GgufTokenizerTest,
                         ::testing::Values("smollm", "llama-bpe", "gpt-2"), [](const auto& info) {
                           std::string name = info.param;
                           for (char& c : name)
                             if (c == '-') c = '_';
                           return name;
                         });

TEST(GgufTokenizerPre, UnknownPreTokenizersAreRefused) {
  EXPECT_EQ(gguf_pre_tokenizer_regex("smollm", "x"), kSmolLMSplitRegex);
  EXPECT_EQ(gguf_pre_tokenizer_regex("llama-bpe", "x"), kLlama3SplitRegex);
  EXPECT_EQ(gguf_pre_tokenizer_regex("default", "x"), kGpt2SplitRegex);
  try {
    gguf_pre_tokenizer_regex("qwen2", "model.gguf");
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("model.gguf"), std::string::npos);
    EXPECT_NE(std::string(e.what()).find("qwen2"), std::string::npos);
  }
}

// Thousands of random and adversarial strings on SmolLM2's real 49k vocabulary.
TEST(GgufTokenizerSmolLM2, MatchesHfTokenizersOnThousandsOfStrings) {
  const auto path = default_model_path();
  if (!path) GTEST_SKIP() << "SmolLM2 is not installed (scripts/install_default_model.sh)";
  const auto dir = testing_gguf::scratch_dir("smollm2");
  ASSERT_TRUE(testing_gguf::run_fixture("hf-ids " + shell_quoted(*path) + " smollm " +
                                        shell_quoted(dir / "cases.json") + " 4000"));
  const GgufFile file = GgufFile::open(*path);
  const Tokenizer tokenizer = load_gguf_tokenizer(file);
  EXPECT_EQ(tokenizer.vocab_size(), 49152);
  EXPECT_FALSE(tokenizer.add_bos());
  EXPECT_EQ(tokenizer.encode("<|im_start|>user\n"), (std::vector<int32_t>{1, 4093, 198}));
  int total = 0;
  EXPECT_EQ(compare_cases(tokenizer, dir / "cases.json", &total, false), 0);
  EXPECT_GE(total, 5000);
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace lazyscope

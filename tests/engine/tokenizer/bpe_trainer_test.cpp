// The BPE trainer: deterministic output, the requested vocabulary size, a complete tokenizer.json
// that our Tokenizer and HF `tokenizers` both load.
#include "engine/tokenizer/bpe_trainer.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "engine/tokenizer/regex_splitter.h"
#include "engine/tokenizer/tokenizer.h"
#include "base/error.h"
#include "tests/engine/tokenizer/tokenizer_test_util.h"

namespace lazyscope {
namespace {

using nlohmann::json;
using namespace tokenizer_testing;

TEST(BpeTrainer, IsDeterministic) {
  BpeTrainingOptions options;
  options.vocab_size = 700;
  const auto texts = bundled_texts();
  const std::string first = train_bpe_tokenizer_json(texts, options);
  EXPECT_EQ(first, train_bpe_tokenizer_json(texts, options));
  options.vocab_size = 701;
  EXPECT_NE(first, train_bpe_tokenizer_json(texts, options));
}

TEST(BpeTrainer, WritesACompleteLlama3StyleTokenizerJson) {
  const json config = json::parse(trained_tokenizer_json());
  const json& model = config["model"];
  EXPECT_EQ(model["type"], "BPE");
  EXPECT_EQ(model["ignore_merges"], false);
  EXPECT_EQ(model["vocab"].size() + config["added_tokens"].size(), 2048u);
  // Every learned token adds one merge, unless two merges reach the same bytes.
  EXPECT_GE(model["merges"].size(), model["vocab"].size() - 256);
  EXPECT_EQ(config["pre_tokenizer"]["type"], "Sequence");
  EXPECT_EQ(config["pre_tokenizer"]["pretokenizers"][0]["pattern"]["Regex"], kLlama3SplitPattern);
  EXPECT_EQ(config["pre_tokenizer"]["pretokenizers"][1]["use_regex"], false);
  EXPECT_EQ(config["decoder"]["type"], "ByteLevel");
  EXPECT_EQ(config["post_processor"]["type"], "TemplateProcessing");
  EXPECT_EQ(config["post_processor"]["single"][0]["SpecialToken"]["id"], "<|begin_of_text|>");
  ASSERT_EQ(config["added_tokens"].size(), 5u);
  EXPECT_EQ(config["added_tokens"][0]["content"], "<|begin_of_text|>");
  EXPECT_EQ(config["added_tokens"][0]["id"], 2043);
  EXPECT_EQ(config["added_tokens"][0]["special"], true);
  // Frequent words of the training text became single tokens.
  EXPECT_TRUE(model["vocab"].contains("Ġthe"));
  EXPECT_TRUE(model["vocab"].contains("Ġriver"));
}

TEST(BpeTrainer, TrainsSpecialTokensFreeVocabularies) {
  BpeTrainingOptions options;
  options.vocab_size = 300;
  options.special_tokens.clear();
  const json config = json::parse(train_bpe_tokenizer_json({"aaa bbb aaa bbb ccc"}, options));
  EXPECT_TRUE(config["post_processor"].is_null());
  const Tokenizer tokenizer = Tokenizer::from_json(config.dump(), "small");
  EXPECT_FALSE(tokenizer.add_bos());
  EXPECT_EQ(tokenizer.decode(tokenizer.encode("aaa bbb")), "aaa bbb");
  EXPECT_LE(tokenizer.encode("aaa bbb").size(), 2u);
}

TEST(BpeTrainer, StopsWhenTheTextRunsOutOfPairs) {
  BpeTrainingOptions options;
  options.vocab_size = 5000;
  const json config = json::parse(train_bpe_tokenizer_json({"abab"}, options));
  EXPECT_LT(config["model"]["vocab"].size(), 260u);
  EXPECT_NO_THROW(Tokenizer::from_json(config.dump(), "tiny"));
}

TEST(BpeTrainer, RejectsImpossibleOptions) {
  BpeTrainingOptions options;
  options.vocab_size = 200;
  EXPECT_THROW(train_bpe_tokenizer_json({"x"}, options), Error);
  options.vocab_size = 400;
  options.special_tokens = {"<a>", "<a>"};
  EXPECT_THROW(train_bpe_tokenizer_json({"x"}, options), Error);
}

}  // namespace
}  // namespace lazyscope

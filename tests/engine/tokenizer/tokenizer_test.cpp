// Tokenizer behaviour on hand-built and trained vocabularies: pre-tokenizer pieces, merge order,
// added tokens, round trips, and clear errors for malformed tokenizer.json files.
#include "engine/tokenizer/tokenizer.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <random>
#include <thread>

#include "engine/tokenizer/byte_level.h"
#include "engine/tokenizer/regex_splitter.h"
#include "base/error.h"
#include "tests/engine/tokenizer/tokenizer_test_util.h"

namespace lazyscope {
namespace {

using nlohmann::json;
using namespace tokenizer_testing;

std::vector<std::string> split_llama3(const std::string& text) {
  const RegexSplitter splitter(kLlama3SplitPattern, "test");
  std::vector<std::string> pieces;
  for (auto piece : splitter.split_isolated(text)) pieces.emplace_back(piece);
  return pieces;
}

using Pieces = std::vector<std::string>;

TEST(Llama3PreTokenizer, SplitsWordsWithTheirLeadingSpace) {
  EXPECT_EQ(split_llama3("Hello world"), (Pieces{"Hello", " world"}));
  EXPECT_EQ(split_llama3("one, two."), (Pieces{"one", ",", " two", "."}));
}

TEST(Llama3PreTokenizer, SplitsContractionsCaseInsensitively) {
  EXPECT_EQ(split_llama3("it's you're we've I'm they'll he'd don't"),
            (Pieces{"it", "'s", " you", "'re", " we", "'ve", " I", "'m", " they", "'ll", " he",
                    "'d", " don", "'t"}));
  EXPECT_EQ(split_llama3("IT'S YOU'RE WE'VE I'M THEY'LL HE'D DON'T"),
            (Pieces{"IT", "'S", " YOU", "'RE", " WE", "'VE", " I", "'M", " THEY", "'LL", " HE",
                    "'D", " DON", "'T"}));
  EXPECT_EQ(split_llama3("You'Re"), (Pieces{"You", "'Re"}));
  // Not a contraction: the apostrophe joins the letters that follow.
  EXPECT_EQ(split_llama3("'tis"), (Pieces{"'t", "is"}));
  EXPECT_EQ(split_llama3("'hello"), (Pieces{"'hello"}));
}

TEST(Llama3PreTokenizer, GroupsDigitsInThrees) {
  EXPECT_EQ(split_llama3("1234567"), (Pieces{"123", "456", "7"}));
  EXPECT_EQ(split_llama3("x 42 3.14159"), (Pieces{"x", " ", "42", " ", "3", ".", "141", "59"}));
  EXPECT_EQ(split_llama3("٣٤٥٦"), (Pieces{"٣٤٥", "٦"}));  // Arabic-Indic digits are \p{N} too
}

TEST(Llama3PreTokenizer, KeepsWhitespaceRunsAwayFromTheNextWord) {
  EXPECT_EQ(split_llama3("a   b"), (Pieces{"a", "  ", " b"}));
  EXPECT_EQ(split_llama3("\t\tx"), (Pieces{"\t", "\tx"}));
  EXPECT_EQ(split_llama3("trailing   "), (Pieces{"trailing", "   "}));
  EXPECT_EQ(split_llama3("   "), (Pieces{"   "}));
}

TEST(Llama3PreTokenizer, GroupsNewlines) {
  EXPECT_EQ(split_llama3("x\n\ny"), (Pieces{"x", "\n\n", "y"}));
  EXPECT_EQ(split_llama3("end.  \n  next"), (Pieces{"end", ".", "  \n", " ", " next"}));
  EXPECT_EQ(split_llama3("a\r\nb"), (Pieces{"a", "\r\n", "b"}));
  EXPECT_EQ(split_llama3("done!\n\n"), (Pieces{"done", "!\n\n"}));
}

TEST(Llama3PreTokenizer, HandlesAccentsCjkAndEmoji) {
  EXPECT_EQ(split_llama3("café naïve Straße"), (Pieces{"café", " naïve", " Straße"}));
  EXPECT_EQ(split_llama3("日本語テキスト 한국어"), (Pieces{"日本語テキスト", " 한국어"}));
  EXPECT_EQ(split_llama3("😀😀 ok 👍"), (Pieces{"😀😀", " ok", " 👍"}));
  EXPECT_EQ(split_llama3("(x)"), (Pieces{"(x", ")"}));  // one non-letter may lead a word
  // U+180E is not White_Space (Oniguruma agrees), although PCRE2's own \s would match it.
  EXPECT_EQ(split_llama3("\u180e'd x"), (Pieces{"\u180e'", "d", " x"}));
  EXPECT_EQ(split_llama3("a\u00a0\u3000b"), (Pieces{"a", "\u00a0", "\u3000b"}));
}

TEST(Llama3PreTokenizer, InvalidUtf8FallsIntoTheGaps) {
  const std::string text = "ab\xff\xfe cd\x80";
  std::string joined;
  for (const auto& piece : split_llama3(text)) joined += piece;
  EXPECT_EQ(joined, text);
}

TEST(ByteLevel, MapsEveryByteToADistinctPrintableSymbol) {
  EXPECT_EQ(byte_level::encode(" "), "Ġ");
  EXPECT_EQ(byte_level::encode("\n"), "Ċ");
  EXPECT_EQ(byte_level::encode("a"), "a");
  std::string all_bytes;
  for (int b = 0; b < 256; ++b) all_bytes.push_back(static_cast<char>(b));
  std::set<std::string> symbols;
  for (int b = 0; b < 256; ++b) symbols.insert(byte_level::byte_to_symbol(static_cast<uint8_t>(b)));
  EXPECT_EQ(symbols.size(), 256u);
  EXPECT_EQ(byte_level::decode(byte_level::encode(all_bytes)), all_bytes);
  EXPECT_FALSE(byte_level::decode("a b").has_value());  // a plain space is not in the alphabet
}

// A minimal tokenizer.json: the 256 byte symbols plus the given merges (and their results).
json small_tokenizer(const std::vector<std::pair<std::string, std::string>>& merges,
                     const std::vector<std::string>& extra_tokens = {}) {
  json vocab = json::object();
  int32_t next = 0;
  for (int b = 0; b < 256; ++b) vocab[byte_level::byte_to_symbol(static_cast<uint8_t>(b))] = next++;
  json merge_list = json::array();
  for (const auto& [left, right] : merges) {
    merge_list.push_back(left + " " + right);
    if (!vocab.contains(left + right)) vocab[left + right] = next++;
  }
  for (const auto& token : extra_tokens)
    if (!vocab.contains(token)) vocab[token] = next++;
  return json{
      {"version", "1.0"},
      {"added_tokens", json::array()},
      {"normalizer", nullptr},
      {"pre_tokenizer", {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"use_regex", true}}},
      {"post_processor", nullptr},
      {"decoder", {{"type", "ByteLevel"}}},
      {"model",
       {{"type", "BPE"}, {"ignore_merges", false}, {"vocab", vocab}, {"merges", merge_list}}}};
}

std::vector<std::string> token_strings(const Tokenizer& tokenizer, const std::string& text) {
  std::vector<std::string> strings;
  for (int32_t id : tokenizer.encode(text)) strings.push_back(tokenizer.token_text(id));
  return strings;
}

TEST(BpeMerges, ApplyLowestRankFirst) {
  const auto ab_first = Tokenizer::from_json(small_tokenizer({{"a", "b"}, {"b", "c"}}).dump(), "t");
  EXPECT_EQ(token_strings(ab_first, "abc"), (Pieces{"ab", "c"}));
  const auto bc_first = Tokenizer::from_json(small_tokenizer({{"b", "c"}, {"a", "b"}}).dump(), "t");
  EXPECT_EQ(token_strings(bc_first, "abc"), (Pieces{"a", "bc"}));
}

TEST(BpeMerges, MergeLeftmostOccurrenceFirstAndChain) {
  const auto tokenizer =
      Tokenizer::from_json(small_tokenizer({{"a", "a"}, {"aa", "a"}, {"aa", "aa"}}).dump(), "t");
  EXPECT_EQ(token_strings(tokenizer, "aaa"), (Pieces{"aaa"}));
  EXPECT_EQ(token_strings(tokenizer, "aaaa"), (Pieces{"aaaa"}));
  // a a a a a -> aa a a a -> aa aa a -> (aa a ranks before aa aa) aa aaa
  EXPECT_EQ(token_strings(tokenizer, "aaaaa"), (Pieces{"aa", "aaa"}));
}

TEST(BpeMerges, AcceptMergesAsPairs) {
  json config = small_tokenizer({{"Ġ", "w"}, {"Ġw", "o"}});
  config["model"]["merges"] = json::array({json::array({"Ġ", "w"}), json::array({"Ġw", "o"})});
  const auto tokenizer = Tokenizer::from_json(config.dump(), "t");
  EXPECT_EQ(token_strings(tokenizer, " wow"), (Pieces{" wo", "w"}));
}

TEST(BpeMerges, IgnoreMergesTakesWholeWordsFromTheVocabulary) {
  json config = small_tokenizer({{"a", "b"}}, {"abc"});
  EXPECT_EQ(token_strings(Tokenizer::from_json(config.dump(), "t"), "abc"), (Pieces{"ab", "c"}));
  config["model"]["ignore_merges"] = true;
  const auto tokenizer = Tokenizer::from_json(config.dump(), "t");
  EXPECT_EQ(token_strings(tokenizer, "abc"), (Pieces{"abc"}));
  EXPECT_EQ(token_strings(tokenizer, "abcd"), (Pieces{"ab", "c", "d"}));
}

TEST(AddedTokens, LongestMatchWinsAndSplitsText) {
  json config = small_tokenizer({});
  config["added_tokens"] =
      json::array({{{"id", 300}, {"content", "<x>"}, {"special", true}, {"normalized", false}},
                   {{"id", 301}, {"content", "<x><y>"}, {"special", true}, {"normalized", false}},
                   {{"id", 302}, {"content", "river"}, {"special", false}, {"normalized", true}}});
  const auto tokenizer = Tokenizer::from_json(config.dump(), "t");
  const auto ids = tokenizer.encode("a<x><y>b<x>riverside");
  const std::vector<int32_t> expected{'a', 301, 'b', 300, 302, 's', 'i', 'd', 'e'};
  EXPECT_EQ(ids, expected);
  EXPECT_EQ(tokenizer.decode(ids), "a<x><y>b<x>riverside");
  EXPECT_EQ(tokenizer.token_id("<x><y>"), 301);
  EXPECT_EQ(tokenizer.token_text(301), "<x><y>");
  EXPECT_EQ(tokenizer.vocab_size(), 303);
}

TEST(AddedTokens, LstripAndRstripSwallowSpaces) {
  json config = small_tokenizer({});
  config["added_tokens"] = json::array(
      {{{"id", 300}, {"content", "<m>"}, {"special", true}, {"lstrip", true}, {"rstrip", true}}});
  const auto tokenizer = Tokenizer::from_json(config.dump(), "t");
  EXPECT_EQ(tokenizer.encode("a  <m>  b"), (std::vector<int32_t>{'a', 300, 'b'}));
  // Unicode white space too (U+3000, U+00A0), as HF strips it.
  EXPECT_EQ(tokenizer.encode("a\u3000<m>\u00a0\nb"), (std::vector<int32_t>{'a', 300, 'b'}));
}

class TrainedTokenizer : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    tokenizer_ = new Tokenizer(Tokenizer::from_json(trained_tokenizer_json(), "trained.json"));
  }
  static void TearDownTestSuite() {
    delete tokenizer_;
    tokenizer_ = nullptr;
  }
  static Tokenizer* tokenizer_;
};
Tokenizer* TrainedTokenizer::tokenizer_ = nullptr;

TEST_F(TrainedTokenizer, KnowsItsSpecialTokensAndBos) {
  const auto bos = tokenizer_->token_id("<|begin_of_text|>");
  ASSERT_TRUE(bos.has_value());
  EXPECT_EQ(tokenizer_->bos_id(), *bos);
  EXPECT_TRUE(tokenizer_->add_bos());
  EXPECT_EQ(tokenizer_->vocab_size(), 2048);
}

TEST_F(TrainedTokenizer, RecognisesSpecialTokensInsideText) {
  const int32_t bos = *tokenizer_->token_id("<|begin_of_text|>");
  const int32_t eot = *tokenizer_->token_id("<|eot_id|>");
  const auto ids = tokenizer_->encode("<|begin_of_text|>Hello<|eot_id|> river<|eot_id|>");
  ASSERT_GE(ids.size(), 4u);
  EXPECT_EQ(ids.front(), bos);
  EXPECT_EQ(ids.back(), eot);
  EXPECT_EQ(std::count(ids.begin(), ids.end(), eot), 2);
  // Almost-special text is ordinary text.
  const auto partial = tokenizer_->encode("<|begin_of_text|");
  EXPECT_EQ(std::count(partial.begin(), partial.end(), bos), 0);
  EXPECT_EQ(tokenizer_->decode(partial), "<|begin_of_text|");
}

TEST_F(TrainedTokenizer, CompressesAndRoundTripsTheTrainingText) {
  for (const auto& text : bundled_texts()) {
    const auto ids = tokenizer_->encode(text);
    EXPECT_LT(ids.size() * 2, text.size());  // a 2048 vocabulary packs several bytes per token
    EXPECT_EQ(tokenizer_->decode(ids), text);
  }
}

// Decoded token boundaries, as byte offsets into the decoded text.
std::set<size_t> token_boundaries(const Tokenizer& tokenizer, const std::vector<int32_t>& ids) {
  std::set<size_t> boundaries{0};
  size_t offset = 0;
  for (int32_t id : ids) boundaries.insert(offset += tokenizer.token_text(id).size());
  return boundaries;
}

TEST_F(TrainedTokenizer, TokensNeverCrossPreTokenizerPieces) {
  const std::vector<std::string> samples = {
      "It's the river's bend; THEY'LL see 1234567 stones.",
      "a   b\t\tc\n\n\nd  \n  e",
      "café naïve Straße łódź",
      "我们明天去河边散步。今日は良い天気ですね。",
      "😀👍🏽 🎉🎉 ❤️ fish🐟",
      "x = y + 1; if (count >= 10) { return total / count; }"};
  for (const auto& text : samples) {
    const auto ids = tokenizer_->encode(text);
    ASSERT_EQ(tokenizer_->decode(ids), text);
    const auto boundaries = token_boundaries(*tokenizer_, ids);
    size_t offset = 0;
    for (const auto& piece : split_llama3(text)) {
      EXPECT_TRUE(boundaries.count(offset)) << "no token boundary at " << offset << " in " << text;
      offset += piece.size();
    }
  }
}

TEST_F(TrainedTokenizer, DigitTokensStayInsideGroupsOfThree) {
  const std::string digits = "31415926535897932384626";
  const auto ids = tokenizer_->encode(digits);
  ASSERT_EQ(tokenizer_->decode(ids), digits);
  const auto boundaries = token_boundaries(*tokenizer_, ids);
  for (size_t offset = 0; offset <= digits.size(); offset += 3)
    EXPECT_TRUE(boundaries.count(offset)) << "no token boundary at digit " << offset;
  for (int32_t id : ids) EXPECT_LE(tokenizer_->token_text(id).size(), 3u);
}

// Random valid UTF-8 from every plane (no surrogates), biased toward ASCII and whitespace.
std::string random_utf8(std::mt19937& rng, size_t max_chars) {
  std::uniform_int_distribution<size_t> length_dist(0, max_chars);
  std::uniform_int_distribution<int> kind_dist(0, 9);
  const size_t length = length_dist(rng);
  std::string text;
  for (size_t i = 0; i < length; ++i) {
    uint32_t cp = 0;
    switch (kind_dist(rng)) {
      case 0:
      case 1:
      case 2:
        cp = std::uniform_int_distribution<uint32_t>(0x20, 0x7E)(rng);
        break;
      case 3:
        cp = " \t\n\r'"[std::uniform_int_distribution<int>(0, 4)(rng)];
        break;
      case 4:
        cp = std::uniform_int_distribution<uint32_t>(0, 0x1F)(rng);
        break;
      case 5:
        cp = std::uniform_int_distribution<uint32_t>(0x80, 0x7FF)(rng);
        break;
      case 6:
        cp = std::uniform_int_distribution<uint32_t>(0x4E00, 0x9FFF)(rng);
        break;
      case 7:
        cp = std::uniform_int_distribution<uint32_t>(0x1F300, 0x1FAFF)(rng);
        break;
      default:
        do cp = std::uniform_int_distribution<uint32_t>(0, 0x10FFFF)(rng);
        while (cp >= 0xD800 && cp <= 0xDFFF);
    }
    byte_level::append_utf8(cp, text);
  }
  return text;
}

TEST_F(TrainedTokenizer, RoundTripsRandomUtf8) {
  std::mt19937 rng(20240611);
  for (int i = 0; i < 5000; ++i) {
    const std::string text = random_utf8(rng, 40);
    ASSERT_EQ(tokenizer_->decode(tokenizer_->encode(text)), text) << "case " << i;
  }
}

TEST_F(TrainedTokenizer, RoundTripsArbitraryBytes) {
  std::mt19937 rng(7);
  for (int i = 0; i < 2000; ++i) {
    std::string bytes(std::uniform_int_distribution<size_t>(0, 30)(rng), '\0');
    for (auto& c : bytes) c = static_cast<char>(std::uniform_int_distribution<int>(0, 255)(rng));
    ASSERT_EQ(tokenizer_->decode(tokenizer_->encode(bytes)), bytes) << "case " << i;
  }
}

TEST_F(TrainedTokenizer, EncodesConsistentlyFromSeveralThreads) {
  std::vector<std::string> texts;
  std::mt19937 rng(5);
  for (int i = 0; i < 400; ++i) texts.push_back(random_utf8(rng, 60));
  std::vector<std::vector<int32_t>> expected;
  for (const auto& text : texts) expected.push_back(tokenizer_->encode(text));
  const Tokenizer fresh = Tokenizer::from_json(trained_tokenizer_json(), "fresh");  // cold cache
  std::vector<int> mismatches(4, 0);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (size_t i = 0; i < texts.size(); ++i)
        if (fresh.encode(texts[(i + t * 97) % texts.size()]) !=
            expected[(i + t * 97) % texts.size()])
          ++mismatches[t];
    });
  }
  for (auto& thread : threads) thread.join();
  EXPECT_EQ(mismatches, std::vector<int>(4, 0));
}

TEST_F(TrainedTokenizer, RejectsOutOfRangeIds) {
  const std::vector<int32_t> bad{5, 999999};
  EXPECT_THROW(tokenizer_->decode(bad), Error);
  EXPECT_THROW(tokenizer_->token_text(-1), Error);
}

TEST_F(TrainedTokenizer, FromSpecMatchesFromJson) {
  const json config = json::parse(trained_tokenizer_json());
  TokenizerSpec spec;
  spec.vocab.resize(static_cast<size_t>(tokenizer_->vocab_size()));
  for (const auto& [token, id] : config["model"]["vocab"].items())
    spec.vocab[id.get<size_t>()] = token;
  for (const auto& merge : config["model"]["merges"]) {
    const std::string text = merge;
    spec.merges.emplace_back(text.substr(0, text.find(' ')), text.substr(text.find(' ') + 1));
  }
  for (const auto& added : config["added_tokens"]) {
    spec.vocab[added["id"].get<size_t>()] = added["content"];
    spec.added_tokens.push_back(AddedToken{added["id"], added["content"], true});
  }
  spec.split_regex = kLlama3SplitPattern;
  spec.bos_id = tokenizer_->bos_id();
  spec.eos_ids = {*tokenizer_->token_id("<|end_of_text|>")};
  spec.add_bos = true;
  const Tokenizer from_spec = Tokenizer::from_spec(spec, "spec");
  EXPECT_EQ(from_spec.bos_id(), tokenizer_->bos_id());
  EXPECT_EQ(from_spec.eos_ids(), spec.eos_ids);
  std::mt19937 rng(99);
  for (int i = 0; i < 500; ++i) {
    const std::string text = random_utf8(rng, 30) + "<|eot_id|>" + random_utf8(rng, 10);
    ASSERT_EQ(from_spec.encode(text), tokenizer_->encode(text)) << "case " << i;
  }
  for (const auto& text : bundled_texts())
    EXPECT_EQ(from_spec.encode(text), tokenizer_->encode(text));
}

// Loads a broken variant of a valid file and checks the error names the file and the problem.
void expect_load_error(const std::string& content, const std::string& expected_fragment) {
  const auto dir = scratch_dir("tokbad");
  const auto path = dir / "tokenizer.json";
  write_file(path, content);
  try {
    Tokenizer::from_json_file(path);
    ADD_FAILURE() << "expected an error mentioning '" << expected_fragment << "'";
  } catch (const Error& e) {
    const std::string message = e.what();
    EXPECT_NE(message.find(path.string()), std::string::npos) << message;
    EXPECT_NE(message.find(expected_fragment), std::string::npos) << message;
  }
  std::filesystem::remove_all(dir);
}

TEST(MalformedTokenizerJson, NamesTheFileAndTheProblem) {
  const json good = small_tokenizer({{"a", "b"}});
  const std::string text = good.dump();
  expect_load_error(text.substr(0, text.size() / 2), "invalid JSON");
  expect_load_error("[1, 2]", "not a JSON object");
  expect_load_error("{}", "model");

  auto with = [&](const json::json_pointer& pointer, json value) {
    json broken = good;
    broken[pointer] = std::move(value);
    return broken.dump();
  };
  expect_load_error(with("/model/type"_json_pointer, "WordPiece"), "WordPiece");
  expect_load_error(with("/normalizer"_json_pointer, json{{"type", "NFC"}}), "NFC");
  expect_load_error(with("/pre_tokenizer"_json_pointer, json{{"type", "Metaspace"}}), "Metaspace");
  expect_load_error(with("/pre_tokenizer"_json_pointer, nullptr), "ByteLevel");
  expect_load_error(with("/decoder"_json_pointer, json{{"type", "WordPiece"}}), "decoder");
  expect_load_error(with("/post_processor"_json_pointer, json{{"type", "BertProcessing"}}),
                    "BertProcessing");
  expect_load_error(with("/model/merges"_json_pointer, json::array({"a zz"})), "merge 0");
  expect_load_error(with("/model/merges"_json_pointer, json::array({"abc"})), "merge");
  expect_load_error(with("/model/merges"_json_pointer, json::array({7})), "merge");
  expect_load_error(with("/model/vocab/a"_json_pointer, "seven"), "model");
  expect_load_error(with("/model/vocab"_json_pointer, json::array()), "vocab");
  expect_load_error(with("/model/byte_fallback"_json_pointer, true), "byte_fallback");
  expect_load_error(with("/added_tokens"_json_pointer, json::array({json{{"content", "<x>"}}})),
                    "added_tokens");
  expect_load_error(with("/pre_tokenizer"_json_pointer, json{{"type", "Split"},
                                                             {"pattern", {{"Regex", "(unclosed"}}},
                                                             {"behavior", "Isolated"}}),
                    "regex");
  expect_load_error(
      with("/pre_tokenizer"_json_pointer,
           json{{"type", "Split"}, {"pattern", {{"Regex", "x"}}}, {"behavior", "Sideways"}}),
      "Sideways");
}

TEST(MalformedTokenizerJson, MissingFileIsNamed) {
  try {
    Tokenizer::from_json_file("/nonexistent/dir/tokenizer.json");
    ADD_FAILURE() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("/nonexistent/dir/tokenizer.json"), std::string::npos);
  }
}

}  // namespace
}  // namespace lazyscope

TEST(TokenizerVocabIds, OutsideTheirRangeAreErrorsNamingTheToken) {
  for (const char* id : {"6.6e126", "2000000000", "-1", "1.5"}) {
    const std::string json = std::string(R"({"model":{"type":"BPE","vocab":{"a":)") + id + R"(},"merges":[]}})";
    try {
      (void)lazyscope::Tokenizer::from_json(json, "bad.json");
      ADD_FAILURE() << "accepted vocab id " << id;
    } catch (const lazyscope::Error& e) {
      EXPECT_NE(std::string(e.what()).find("bad.json: model.vocab id of token \"a\""), std::string::npos) << e.what();
    }
  }
}

// Found by fuzz_tokenizer (2026-12-03): an added token's id of 1.18e22 reached get<int32_t>(), which
// is undefined behaviour; a negative or huge integer id would have sized the id table by it.
TEST(TokenizerVocabIds, AddedTokenIdsOutsideTheirRangeAreErrorsNamingTheToken) {
  for (const char* id :
       {"1.1844674407370955e22", "18446744073709551615", "2000000000", "-1", "1.5", "\"7\""}) {
    const std::string json =
        std::string(R"({"model":{"type":"BPE","vocab":{"a":0},"merges":[]},"added_tokens":[{"id":)") +
        id + R"(,"content":"<x>"}]})";
    try {
      (void)lazyscope::Tokenizer::from_json(json, "bad.json");
      ADD_FAILURE() << "accepted added token id " << id;
    } catch (const lazyscope::Error& e) {
      EXPECT_NE(std::string(e.what()).find(
                    "bad.json: added_tokens id of token \"<x>\" must be an integer in 0..16777215"),
                std::string::npos)
          << e.what();
    }
  }
}

// Differential test: our encoder against the PyPI `tokenizers` library on the same tokenizer.json,
// over thousands of random and adversarial strings (fixed seed), for several pre-tokenizer setups.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <random>

#include "engine/tokenizer/byte_level.h"
#include "engine/tokenizer/regex_splitter.h"
#include "engine/tokenizer/tokenizer.h"
#include "tests/engine/tokenizer/tokenizer_test_util.h"

namespace lazyscope {
namespace {

using nlohmann::json;
using namespace tokenizer_testing;

constexpr const char* kReferenceScript = R"PY(
import json, sys
from tokenizers import Tokenizer
strings = json.load(open(sys.argv[1], encoding="utf-8"))
result = {}
for path in sys.argv[3:]:
    tokenizer = Tokenizer.from_file(path)
    result[path] = [e.ids for e in tokenizer.encode_batch(strings, add_special_tokens=False)]
json.dump(result, open(sys.argv[2], "w"))
)PY";

// Code points chosen to hit each regex branch and the Unicode classes the two engines must agree
// on.
std::string random_adversarial_string(std::mt19937& rng) {
  static const std::vector<std::string> fragments = {"'s",
                                                     "'S",
                                                     "'t",
                                                     "'T",
                                                     "'re",
                                                     "'RE",
                                                     "'rE",
                                                     "'ve",
                                                     "'Ve",
                                                     "'m",
                                                     "'M",
                                                     "'ll",
                                                     "'lL",
                                                     "'d",
                                                     "'D",
                                                     "'",
                                                     "''",
                                                     "'x",
                                                     "\u2019s",
                                                     " '",
                                                     "'ſ",
                                                     "<|begin_of_text|>",
                                                     "<|eot_id|>",
                                                     "<|eot_id",
                                                     "<|end_of_text|>",
                                                     "<|",
                                                     "|>",
                                                     "\r\n",
                                                     "\n\n",
                                                     "\r",
                                                     " \n",
                                                     "\t",
                                                     "  ",
                                                     "   ",
                                                     "\u00a0",
                                                     "\u2003",
                                                     "\u3000",
                                                     "\u0085",
                                                     "\u2028",
                                                     "\u200b",
                                                     "\ufeff",
                                                     "\u180e",
                                                     "\u000b",
                                                     "\u000c",
                                                     "123",
                                                     "4567",
                                                     "0",
                                                     "٣٤",
                                                     "３４５",
                                                     "Ⅻ",
                                                     "½",
                                                     "²",
                                                     "e\u0301",
                                                     "\u0301",
                                                     "ﬁ",
                                                     "İ",
                                                     "ß",
                                                     "Ω",
                                                     "river",
                                                     " river",
                                                     "<tag>",
                                                     "<mask>",
                                                     "Harrowmere",
                                                     " the",
                                                     "The",
                                                     "THE",
                                                     "😀",
                                                     "👍🏽",
                                                     "👨‍👩‍👧",
                                                     "❤️",
                                                     "🇫🇷",
                                                     "日本",
                                                     "한국어",
                                                     "中文",
                                                     "ไทย",
                                                     "हिन्दी",
                                                     "עברית",
                                                     "العربية",
                                                     "...",
                                                     "!?",
                                                     "—",
                                                     "«»",
                                                     "(",
                                                     ")",
                                                     "{",
                                                     "}",
                                                     "$",
                                                     "€",
                                                     "#",
                                                     "_",
                                                     "\\",
                                                     "\u0000",
                                                     "\u007f",
                                                     "\u00ad"};
  std::uniform_int_distribution<int> parts_dist(1, 12);
  std::uniform_int_distribution<size_t> fragment_dist(0, fragments.size() - 1);
  std::uniform_int_distribution<int> kind_dist(0, 7);
  std::string text;
  const int parts = parts_dist(rng);
  for (int i = 0; i < parts; ++i) {
    switch (kind_dist(rng)) {
      case 0:
      case 1:
      case 2:
        text += fragments[fragment_dist(rng)];
        break;
      case 3: {  // a short ASCII word
        const int length = std::uniform_int_distribution<int>(1, 8)(rng);
        for (int j = 0; j < length; ++j)
          text.push_back(static_cast<char>(std::uniform_int_distribution<int>('a', 'z')(rng)));
        break;
      }
      case 4:
        text.push_back(static_cast<char>(std::uniform_int_distribution<int>(0x20, 0x7E)(rng)));
        break;
      case 5:
        byte_level::append_utf8(std::uniform_int_distribution<uint32_t>(0xA0, 0x24F)(rng), text);
        break;
      case 6:
        byte_level::append_utf8(std::uniform_int_distribution<uint32_t>(0x1, 0x1F)(rng), text);
        break;
      default: {
        // The system PCRE2 may know an older Unicode than HF's Oniguruma: letters assigned since
        // then would be classified differently, so only code points PCRE2 knows are drawn.
        static const RegexSplitter unassigned(R"(\p{Cn})", "test");
        std::string character;
        do {
          uint32_t cp = 0;
          do cp = std::uniform_int_distribution<uint32_t>(1, 0x2FFFF)(rng);
          while (cp >= 0xD800 && cp <= 0xDFFF);
          character.clear();
          byte_level::append_utf8(cp, character);
        } while (!unassigned.find_all(character).empty());
        text += character;
      }
    }
  }
  return text;
}

std::vector<std::string> differential_strings() {
  std::vector<std::string> strings = {"",
                                      " ",
                                      "  ",
                                      "\n",
                                      "Hello world",
                                      "Hello  world",
                                      " leading",
                                      "trailing ",
                                      "a\n\nb",
                                      "It's, they're, we've, I'm, you'll, he'd, don't",
                                      "IT'S THEY'RE WE'VE I'M YOU'LL HE'D DON'T",
                                      "1 12 123 1234 12345 123456 1234567",
                                      "3.14159 2,417 1e-9 0x1F",
                                      "café naïve façade Straße",
                                      "日本語のテキスト、中文文本。",
                                      "😀 👍🏽 👨‍👩‍👧 ❤️ 🇫🇷",
                                      "tab\there",
                                      "cr\r\nlf\rcr",
                                      "<|begin_of_text|>Hello<|eot_id|>",
                                      "<|begin_of_text|",
                                      "x<|end_of_text|>y",
                                      "    indented",
                                      "end.\n\n\n",
                                      "  \n  \n",
                                      "!!!???",
                                      "a'b'c'd",
                                      "riverside river rivers",
                                      "<tag><tag>",
                                      "hi <mask> there",
                                      "spaces   <mask>   around",
                                      std::string(300, ' '),
                                      std::string(100, '9'),
                                      std::string(200, 'a'),
                                      "'''s'''",
                                      "\u00a0\u00a0x",
                                      "x\u3000y",
                                      "e\u0301\u0301\u0301",
                                      "x\u3000<mask>\u00a0y",
                                      "\u2003\u2003<mask>\u0085\n",
                                      "a\u180e<mask>\u180eb",
                                      "<mask><mask>"};
  for (const auto& text : bundled_texts()) {
    size_t begin = 0;
    while (begin < text.size()) {
      const size_t end = std::min(text.size(), text.find('\n', begin) == std::string::npos
                                                   ? text.size()
                                                   : text.find('\n', begin) + 1);
      strings.push_back(text.substr(begin, end - begin));
      begin = end;
    }
    strings.push_back(text);
  }
  std::mt19937 rng(1234567);
  for (int i = 0; i < 4000; ++i) strings.push_back(random_adversarial_string(rng));
  return strings;
}

struct Variant {
  std::string name;
  json config;
  bool round_trips = true;  // false where the tokenizer adds or swallows spaces by design
};

std::vector<Variant> variants() {
  const json llama3 = json::parse(trained_tokenizer_json());
  std::vector<Variant> result{{"llama3", llama3}};

  json ignore_merges = llama3;
  ignore_merges["model"]["ignore_merges"] = true;
  result.push_back({"llama3_ignore_merges", ignore_merges});

  json gpt2 = llama3;
  gpt2["pre_tokenizer"] = json{{"type", "ByteLevel"},
                               {"add_prefix_space", false},
                               {"trim_offsets", true},
                               {"use_regex", true}};
  gpt2["post_processor"] = json{{"type", "ByteLevel"},
                                {"add_prefix_space", true},
                                {"trim_offsets", false},
                                {"use_regex", true}};
  result.push_back({"gpt2", gpt2});

  json gpt2_prefix = gpt2;
  gpt2_prefix["pre_tokenizer"]["add_prefix_space"] = true;
  result.push_back({"gpt2_prefix_space", gpt2_prefix, false});

  json added = llama3;
  const auto token = [](int id, const char* content, bool special, bool normalized, bool strip) {
    return json{{"id", id},          {"content", content}, {"single_word", false},
                {"lstrip", strip},   {"rstrip", strip},    {"normalized", normalized},
                {"special", special}};
  };
  added["added_tokens"].push_back(token(2048, "river", false, true, false));
  added["added_tokens"].push_back(token(2049, "<tag>", false, false, false));
  added["added_tokens"].push_back(token(2050, "<mask>", true, false, true));
  added["added_tokens"].push_back(token(2051, "Harrow", false, true, false));
  result.push_back({"added_tokens", added, false});

  // Every Split behavior (and invert) on a punctuation pattern, ahead of GPT-2's ByteLevel.
  for (const char* behavior :
       {"Removed", "MergedWithPrevious", "MergedWithNext", "Contiguous", "Isolated-invert"}) {
    const std::string name = behavior;
    const bool invert = name == "Isolated-invert";
    json split = gpt2;
    split["pre_tokenizer"] = json{{"type", "Sequence"},
                                  {"pretokenizers",
                                   {json{{"type", "Split"},
                                         {"pattern", {{"Regex", R"([\p{P}\s]+)"}}},
                                         {"behavior", invert ? "Isolated" : behavior},
                                         {"invert", invert}},
                                    gpt2["pre_tokenizer"]}}};
    result.push_back({"split_" + name, split, name != "Removed"});
  }
  json literal = gpt2;
  literal["pre_tokenizer"] = json{{"type", "Sequence"},
                                  {"pretokenizers",
                                   {json{{"type", "Split"},
                                         {"pattern", {{"String", ", "}}},
                                         {"behavior", "MergedWithNext"},
                                         {"invert", false}},
                                    gpt2["pre_tokenizer"]}}};
  result.push_back({"split_string", literal});
  return result;
}

// Encodes `strings` with HF tokenizers and with ours for each tokenizer.json in `paths`; reports
// mismatches as failures and returns how many encodings were compared.
size_t compare_with_hf(const std::filesystem::path& dir, const std::vector<std::string>& strings,
                       const std::vector<std::filesystem::path>& paths,
                       const std::vector<bool>& check_decode) {
  write_file(dir / "strings.json", json(strings).dump());
  write_file(dir / "reference.py", kReferenceScript);
  std::string command =
      shell_quote(LAZYSCOPE_PYTHON) + " " + shell_quote((dir / "reference.py").string()) + " " +
      shell_quote((dir / "strings.json").string()) + " " + shell_quote((dir / "ids.json").string());
  for (const auto& path : paths) {
    command += ' ';
    command += shell_quote(path.string());
  }
  std::string output;
  if (run_command(command, output) != 0) {
    ADD_FAILURE() << "reference script failed:\n" << output;
    return 0;
  }
  const json reference = json::parse(read_file(dir / "ids.json"));
  size_t compared = 0;
  for (size_t p = 0; p < paths.size(); ++p) {
    const auto& path = paths[p];
    const Tokenizer ours = Tokenizer::from_json_file(path);
    const auto& expected_all = reference.at(path.string());
    EXPECT_EQ(expected_all.size(), strings.size());
    int mismatches = 0;
    for (size_t i = 0; i < strings.size() && i < expected_all.size(); ++i) {
      const auto expected = expected_all[i].get<std::vector<int32_t>>();
      const auto actual = ours.encode(strings[i]);
      ++compared;
      if (actual != expected && ++mismatches <= 5) {
        ADD_FAILURE() << path.filename() << " string " << i << " " << json(strings[i]).dump()
                      << "\n ours " << json(actual).dump() << "\n   HF " << json(expected).dump();
      }
      if (actual == expected && check_decode[p]) {
        EXPECT_EQ(ours.decode(actual), strings[i]);
      }
    }
    EXPECT_EQ(mismatches, 0) << path.filename() << ": " << mismatches << " of " << strings.size()
                             << " strings differ";
  }
  return compared;
}

bool have_python() { return std::filesystem::exists(LAZYSCOPE_PYTHON); }

TEST(TokenizerVersusHfTokenizers, EncodesExactlyTheSameIds) {
  if (!have_python()) GTEST_SKIP() << "no Python at " << LAZYSCOPE_PYTHON;
  const auto dir = scratch_dir("tokdiff");
  const auto strings = differential_strings();
  std::vector<std::filesystem::path> paths;
  std::vector<bool> check_decode;
  for (const auto& variant : variants()) {
    paths.push_back(dir / (variant.name + ".json"));
    check_decode.push_back(variant.round_trips);
    write_file(paths.back(), variant.config.dump(1));
  }
  const size_t compared = compare_with_hf(dir, strings, paths, check_decode);
  std::printf("compared %zu encodings (%zu strings x %zu tokenizer variants) with HF tokenizers\n",
              compared, strings.size(), paths.size());
  std::filesystem::remove_all(dir);
}

// Rebuilds SmolLM2's tokenizer.json (49152 tokens, Digits + ByteLevel pre-tokenizer) from the
// GGUF that scripts/install_default_model.sh installs.
constexpr const char* kGgufToTokenizerJson = R"PY(
import json, struct, sys
# Reads only GGUF's metadata section (gguf.GGUFReader would also map every tensor, which is slow).
SCALARS = {0: "<B", 1: "<b", 2: "<H", 3: "<h", 4: "<I", 5: "<i", 6: "<f", 7: "<?", 10: "<Q", 11: "<q", 12: "<d"}
data = open(sys.argv[1], "rb").read()
pos = 0
def take(fmt):
    global pos
    value = struct.unpack_from(fmt, data, pos)
    pos += struct.calcsize(fmt)
    return value[0]
def string():
    global pos
    length = take("<Q")
    pos += length
    return data[pos - length:pos].decode("utf-8")
def value(kind):
    if kind == 8:
        return string()
    if kind == 9:
        element, count = take("<I"), take("<Q")
        return [value(element) for _ in range(count)]
    return take(SCALARS[kind])
assert data[:4] == b"GGUF"
pos = 8
tensor_count, kv_count = take("<Q"), take("<Q")
fields = {}
for _ in range(kv_count):
    key = string()
    fields[key] = value(take("<I"))
tokens = fields["tokenizer.ggml.tokens"]
merges = fields["tokenizer.ggml.merges"]
types = fields["tokenizer.ggml.token_type"]
added = [{"id": i, "content": t, "single_word": False, "lstrip": False, "rstrip": False,
          "normalized": False, "special": True} for i, (t, k) in enumerate(zip(tokens, types)) if k == 3]
config = {
  "version": "1.0", "truncation": None, "padding": None, "added_tokens": added, "normalizer": None,
  "pre_tokenizer": {"type": "Sequence", "pretokenizers": [
      {"type": "Digits", "individual_digits": True},
      {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": True}]},
  "post_processor": {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": False, "use_regex": True},
  "decoder": {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True, "use_regex": True},
  "model": {"type": "BPE", "dropout": None, "unk_token": None, "continuing_subword_prefix": None,
            "end_of_word_suffix": None, "fuse_unk": False, "byte_fallback": False,
            "ignore_merges": False, "vocab": {t: i for i, t in enumerate(tokens)}, "merges": merges}}
json.dump(config, open(sys.argv[2], "w", encoding="utf-8"), ensure_ascii=False)
)PY";

TEST(TokenizerVersusHfTokenizers, MatchesOnSmolLM2sRealVocabulary) {
  if (!have_python()) GTEST_SKIP() << "no Python at " << LAZYSCOPE_PYTHON;
  const char* model_dir = std::getenv("LAZYSCOPE_MODEL_DIR");
  const char* home = std::getenv("HOME");
  const std::filesystem::path gguf =
      (model_dir ? std::filesystem::path(model_dir)
                 : std::filesystem::path(home ? home : "/") / ".cache/lazyscope/models") /
      "SmolLM2-135M-Instruct.Q4_1.gguf";
  if (!std::filesystem::exists(gguf)) GTEST_SKIP() << "SmolLM2 is not installed at " << gguf;
  const auto dir = scratch_dir("toksmol");
  write_file(dir / "convert.py", kGgufToTokenizerJson);
  std::string output;
  ASSERT_EQ(
      run_command(shell_quote(LAZYSCOPE_PYTHON) + " " + shell_quote((dir / "convert.py").string()) +
                      " " + shell_quote(gguf.string()) + " " +
                      shell_quote((dir / "smollm2.json").string()),
                  output),
      0)
      << output;
  auto strings = differential_strings();
  for (auto& text : strings)
    text = text.substr(0, 2000);  // the whole-file strings add nothing here
  for (const char* chat : {"<|im_start|>user\nWhat's 2+2?<|im_end|>\n<|im_start|>assistant\n",
                           "<|endoftext|><|im_start|>system\nYou are helpful.<|im_end|>"})
    strings.emplace_back(chat);
  // No round-trip check: SmolLM2's vocabulary lacks some control-byte tokens, so HF and we both
  // drop those bytes.
  const size_t compared = compare_with_hf(dir, strings, {dir / "smollm2.json"}, {false});
  std::printf("compared %zu encodings with HF tokenizers on SmolLM2's vocabulary\n", compared);
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace lazyscope

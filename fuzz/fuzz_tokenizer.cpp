// Fuzzes tokenizer.json, then encodes and decodes a fixed text with whatever loaded.
#include "base/error.h"
#include "engine/tokenizer/tokenizer.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, std::size_t size) {
  try {
    const auto tokenizer = lazyscope::Tokenizer::from_json(
        std::string_view(reinterpret_cast<const char*>(data), size), "tokenizer.json");
    const std::vector<int32_t> ids =
        tokenizer.encode("Hello, world! 123 h\xc3\xa9llo  <|im_start|>x\n\tz");
    (void)tokenizer.decode(ids);
  } catch (const lazyscope::Error&) {
  }
  return 0;
}

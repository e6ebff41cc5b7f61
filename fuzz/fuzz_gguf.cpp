// Fuzzes the GGUF container: metadata, tensor infos, the tokenizer and model config read from it,
// and dequantizing every (small) tensor.
#include "base/error.h"
#include "engine/model/gguf_file.h"
#include "engine/model/gguf_loader.h"
#include "engine/model/gguf_tokenizer.h"
#include "fuzz/fuzz_input.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, std::size_t size) {
  const auto path = lazyscope::fuzz::write_scratch("model.gguf", data, size);
  try {
    const lazyscope::GgufFile file = lazyscope::GgufFile::open(path);
    for (const auto& t : file.tensors()) {
      if (t.elements <= (1 << 20)) (void)file.dequantize(t);
    }
    try {
      (void)lazyscope::gguf_model_config(file);
    } catch (const lazyscope::Error&) {
    }
    const lazyscope::Tokenizer tokenizer = lazyscope::load_gguf_tokenizer(file);
    (void)tokenizer.decode(tokenizer.encode("Hello, world! 123"));
  } catch (const lazyscope::Error&) {
  }
  return 0;
}

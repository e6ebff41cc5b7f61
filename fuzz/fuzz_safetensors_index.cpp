// Fuzzes model.safetensors.index.json: the weight map, shard names (which must stay beside the
// index) and tensors looked up in a real shard.
#include "base/error.h"
#include "engine/model/safetensors.h"
#include "engine/model/safetensors_writer.h"
#include "fuzz/fuzz_input.h"

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  using namespace lazyscope;
  const auto dir = fuzz::scratch_dir() / "index";
  std::filesystem::create_directories(dir);
  TensorWithValues a{{"model.embed_tokens.weight", TensorDtype::BF16, {4, 2}},
                     std::vector<float>(8, 0.5f)};
  TensorWithValues b{{"model.norm.weight", TensorDtype::F32, {2}}, {1.0f, 2.0f}};
  write_safetensors_file(dir / "model-00001-of-00002.safetensors", {a});
  write_safetensors_file(dir / "model-00002-of-00002.safetensors", {b});
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, std::size_t size) {
  const auto path =
      lazyscope::fuzz::write_scratch("index/model.safetensors.index.json", data, size);
  try {
    auto checkpoint = lazyscope::SafetensorsCheckpoint::open_index(path);
    (void)checkpoint.find("model.norm.weight");
  } catch (const lazyscope::Error&) {
  }
  return 0;
}

// Fuzzes the safetensors reader: header JSON, dtypes, shapes, offsets, and reading every tensor.
#include "base/error.h"
#include "engine/model/safetensors.h"
#include "fuzz/fuzz_input.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, std::size_t size) {
  const auto path = lazyscope::fuzz::write_scratch("model.safetensors", data, size);
  try {
    lazyscope::SafetensorsFile file(path);
    std::vector<float> values;
    for (const lazyscope::TensorInfo& t : file.tensors()) {
      if (lazyscope::dtype_is_loadable(t.dtype) && t.element_count() <= (1u << 20))
        file.read_f32(t, values);
      (void)file.tensor_bytes(t);
    }
  } catch (const lazyscope::Error&) {
  }
  return 0;
}

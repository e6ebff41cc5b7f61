// Fuzzes config.json: every field, rope_scaling / rope_parameters, and the shape checks.
#include "base/error.h"
#include "engine/model/config.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, std::size_t size) {
  try {
    (void)lazyscope::parse_model_config(std::string(reinterpret_cast<const char*>(data), size),
                                        "config.json");
  } catch (const lazyscope::Error&) {
  }
  return 0;
}

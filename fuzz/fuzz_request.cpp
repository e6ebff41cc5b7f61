// Fuzzes the request JSON (text and *_ids forms, order, max_new_tokens).
#include "base/error.h"
#include "engine/runtime/request.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, std::size_t size) {
  try {
    const lazyscope::Request r = lazyscope::parse_request_json(
        std::string(reinterpret_cast<const char*>(data), size), "request.json");
    (void)r.effective_order();
  } catch (const lazyscope::Error&) {
  }
  return 0;
}

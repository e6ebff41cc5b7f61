// Fuzzes the session-report reader (SQLite written by generate --record or the workbench) and
// the Chrome-trace export of whatever it read.
#include "base/error.h"
#include "fuzz/fuzz_input.h"
#include "profiler/session_recorder.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, std::size_t size) {
  const auto path = lazyscope::fuzz::write_scratch("session.db", data, size);
  try {
    (void)lazyscope::chrome_trace_json(lazyscope::load_session_sqlite(path));
  } catch (const lazyscope::Error&) {
  }
  return 0;
}

// Fuzzes the session-report reader (SQLite written by generate --record, workload --record or the
// workbench): the session tables, the Chrome-trace export of whatever they held, and the workload
// tables (what the workbench's Workload Lab reads from the same file).
#include "base/error.h"
#include "fuzz/fuzz_input.h"
#include "profiler/session_recorder.h"
#include "profiler/workload_tables.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, std::size_t size) {
  const auto path = lazyscope::fuzz::write_scratch("session.db", data, size);
  try {
    (void)lazyscope::chrome_trace_json(lazyscope::load_session_sqlite(path));
  } catch (const lazyscope::Error&) {
  }
  try {
    (void)lazyscope::load_workload_sqlite(path);
  } catch (const lazyscope::Error&) {
  }
  return 0;
}

#pragma once
// How the CLI recognises its own kinds of output files, so that a command replaces an earlier
// report, trace or dump of the same kind but refuses to write over anything else.
#include <filesystem>

#include "base/output_guard.h"
#include "profiler/session_recorder.h"

namespace lazyscope::cli {

inline bool is_session_report(const std::filesystem::path& path) {
  try {
    (void)load_session_sqlite(path);
    return true;
  } catch (const std::exception&) {
    return false;
  }
}

inline bool is_chrome_trace(const std::filesystem::path& path) {
  return is_json_object_with_keys(path, {"traceEvents"});
}

inline bool is_logits_dump(const std::filesystem::path& path) {
  return is_json_object_with_keys(path, {"step_logits", "generated_ids"});
}

}  // namespace lazyscope::cli

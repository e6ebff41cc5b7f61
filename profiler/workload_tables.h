#pragma once
// Serving workload runs in a session report: the session tables (metadata, one requests row per
// served request) plus workload_runs, workload_requests and workload_steps (profiler/README.md).
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "engine/serving/serving_result.h"

namespace lazyscope {

// Written to a temporary file and renamed over `path` when complete. Throws Error naming the file.
void save_workload_sqlite(const std::map<std::string, std::string>& metadata, const std::vector<ServingResult>& runs,
                          const std::filesystem::path& path);

}  // namespace lazyscope

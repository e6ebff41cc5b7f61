#pragma once
// Serving workload runs in a session report: the session tables (metadata, one requests row per
// served request) plus workload_runs, workload_requests, workload_steps, and the prompts every run
// served (workload_documents, workload_placements); docs/report-schema.md lists the columns.
// A report that holds them replays in the workbench's Workload Lab without running the engine.
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "engine/serving/serving_result.h"
#include "engine/workload/workload.h"

namespace lazyscope {

struct SessionRecording;

// One pool document of the workload.
struct WorkloadDocumentRow {
  int document = 0;       // pool index
  std::string source_id;  // corpus passage id; empty for synthetic documents
  std::string title;
  int tokens = 0;
};
// One document placed in one request's prompt (the same for every policy of the run).
struct WorkloadPlacementRow {
  int request = 0;
  int slot = 0;      // 0-based order in the prompt
  int document = 0;  // pool index
  int start = 0;     // position s of its first token
  int shift = 0;     // δ = s − P, P the shared prefix length
  int tokens = 0;
};
struct WorkloadPrompts {
  std::string source;  // Workload::source
  int prefix_tokens = 0;
  std::vector<WorkloadDocumentRow> documents;
  std::vector<WorkloadPlacementRow> placements;  // by request, then slot
};
WorkloadPrompts workload_prompts(const Workload& workload);

struct WorkloadReport {
  std::map<std::string, std::string> metadata;  // the whole metadata table
  std::vector<ServingResult> runs;              // in run order, with records and step samples
  WorkloadPrompts prompts;                      // empty when the report has no prompt tables
};

// Written to a temporary file and renamed over `path` when complete. `session`: the session
// tables to keep beside the workload (the workbench's recording); its requests come first.
// Throws Error naming the file.
void save_workload_sqlite(const std::map<std::string, std::string>& metadata, const std::vector<ServingResult>& runs,
                          const std::filesystem::path& path, const WorkloadPrompts* prompts = nullptr,
                          const SessionRecording* session = nullptr);

// The workload tables of a session report; nullopt when it has none (a report of single requests).
// Throws Error naming the file when it is not a readable report.
std::optional<WorkloadReport> load_workload_sqlite(const std::filesystem::path& path);

}  // namespace lazyscope

#pragma once
// Records everything a Session reports, with timestamps, so a session can be saved as a plain
// SQLite report (docs/report-schema.md documents the tables: our own, and Nsight Systems' export
// tables for the host ranges and CUPTI records) and as a Chrome/Perfetto trace.
#include <chrono>
#include <filesystem>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "engine/events/events.h"
#include "kernels/kernel_names.h"
#include "profiler/overhead_probe.h"

namespace lazyscope {

struct RecordedSpan {
  int request = 0;
  std::string name;
  std::string category;  // host: "request", "encode", "prefill", "decode"; device: "kernel", "graph", "memcpy", "memset", "range"
  double start_ms = 0.0;  // since the recorder started
  double duration_ms = 0.0;
};

struct RecordedBlockEvent {
  int request = 0;
  double t_ms = 0.0;
  BlockEvent event;
};

struct RecordedSegment {
  int request = 0;
  double t_ms = 0.0;
  SegmentEvent event;
};

struct RecordedToken {
  int request = 0;
  TokenEvent event;
};

struct RecordedRequest {
  int id = 0;
  double start_ms = 0.0;
  RequestFinishedEvent event;
};

// A host range with the request it belongs to; times in ns since the recorder started.
struct RecordedRange {
  int request = 0;
  HostRange range;
};

// Per request: what the device trace delivered (our own table device_trace).
struct RecordedTraceSummary {
  int request = 0;
  bool device_traced = false;
  int64_t kernels = 0, memcpys = 0, memsets = 0, api_calls = 0, ranges = 0;
  uint64_t dropped_records = 0;
  int64_t graphs = 0;            // graph-level records (decode steps without kernel detail)
  int kernel_detail_steps = -1;  // decode steps 1..this have kernel records; -1: every step
  int graph_level_steps = 0;     // the decode steps after them, recorded per graph launch
  double flush_ms = 0.0;         // what draining CUPTI's buffers took, after the request
};

struct SessionRecording {
  std::map<std::string, std::string> metadata;  // model, backend, device, ...
  std::vector<RecordedRequest> requests;
  std::vector<RecordedSegment> segments;
  std::vector<RecordedBlockEvent> blocks;
  std::vector<RecordedToken> tokens;
  std::vector<RecordedSpan> spans;
  // Nsight Systems' tables. Times in ns since the recorder started (the origin of every *_ms above).
  uint32_t process_id = 0;
  std::vector<RecordedRange> ranges;
  std::vector<KernelRecord> kernels;
  std::vector<MemcpyRecord> memcpys;
  std::vector<MemsetRecord> memsets;
  std::vector<ApiRecord> api_calls;  // runtime and driver API calls (ApiRecord::driver)
  std::vector<GraphRecord> graphs;
  std::vector<GpuInfo> gpus;
  std::vector<RecordedTraceSummary> traces;
  // Lazy-overhead probes (lazyscope-cli overhead --record, the workbench's probe action).
  std::vector<OverheadProbeRow> overhead;
};

class SessionRecorder final : public EventSink {
 public:
  SessionRecorder();
  void set_metadata(const std::string& key, const std::string& value);
  void on_segment(const SegmentEvent& e) override;
  void on_block(const BlockEvent& e) override;
  void on_token(const TokenEvent& e) override;
  void on_request_finished(const RequestFinishedEvent& e) override;
  void on_device_activity(const DeviceActivity& activity) override;
  void add_overhead(const std::vector<OverheadProbeRow>& rows);
  SessionRecording snapshot() const;

 private:
  double now_ms() const;
  void begin_request_if_needed(double t);
  mutable std::mutex mutex_;
  std::chrono::steady_clock::time_point start_;
  SessionRecording data_;
  int current_request_ = 1;
  bool request_open_ = false;
  double request_start_ms_ = 0.0;
  double last_token_ms_ = 0.0;
  std::map<std::string, KernelNames> kernel_names_;  // demangled once per symbol
};

// Writes the recording as a SQLite file: into a temporary file first, renamed over `path` only
// when complete, so an existing report is never left half-written. Throws Error naming the file.
void save_session_sqlite(const SessionRecording& recording, const std::filesystem::path& path);
// Reads a report written by save_session_sqlite (schema 1, 2 or 3). Throws Error naming the file and
// the problem (not SQLite, damaged or truncated, not a LazyScope session, a newer schema, missing tables).
SessionRecording load_session_sqlite(const std::filesystem::path& path);
// Chrome trace-event JSON (opens in Perfetto and chrome://tracing).
std::string chrome_trace_json(const SessionRecording& recording);

}  // namespace lazyscope

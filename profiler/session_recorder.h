#pragma once
// Records everything a Session reports, with timestamps, so a session can be saved as a plain
// SQLite report (profiler/README.md documents the tables) and as a Chrome/Perfetto trace.
#include <chrono>
#include <filesystem>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "engine/events/events.h"

namespace lazyscope {

struct RecordedSpan {
  int request = 0;
  std::string name;
  std::string category;  // host: "request", "encode", "prefill", "decode"; device: "kernel", "memcpy", "memset", "range"
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

struct SessionRecording {
  std::map<std::string, std::string> metadata;  // model, backend, device, ...
  std::vector<RecordedRequest> requests;
  std::vector<RecordedSegment> segments;
  std::vector<RecordedBlockEvent> blocks;
  std::vector<RecordedToken> tokens;
  std::vector<RecordedSpan> spans;
};

class SessionRecorder final : public EventSink {
 public:
  SessionRecorder();
  void set_metadata(const std::string& key, const std::string& value);
  void on_segment(const SegmentEvent& e) override;
  void on_block(const BlockEvent& e) override;
  void on_token(const TokenEvent& e) override;
  void on_request_finished(const RequestFinishedEvent& e) override;
  void on_device_spans(const std::vector<DeviceSpan>& spans) override;
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
};

// Writes the recording as a SQLite file: into a temporary file first, renamed over `path` only
// when complete, so an existing report is never left half-written. Throws Error naming the file.
void save_session_sqlite(const SessionRecording& recording, const std::filesystem::path& path);
// Reads a report written by save_session_sqlite. Throws Error naming the file and the problem
// (not SQLite, not a LazyScope session, a newer schema, missing tables).
SessionRecording load_session_sqlite(const std::filesystem::path& path);
// Chrome trace-event JSON (opens in Perfetto and chrome://tracing).
std::string chrome_trace_json(const SessionRecording& recording);

}  // namespace lazyscope

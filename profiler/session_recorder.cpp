#include "profiler/session_recorder.h"

namespace lazyscope {

SessionRecorder::SessionRecorder() : start_(std::chrono::steady_clock::now()) {}

double SessionRecorder::now_ms() const {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start_).count();
}

void SessionRecorder::set_metadata(const std::string& key, const std::string& value) {
  std::lock_guard lock(mutex_);
  data_.metadata[key] = value;
}

void SessionRecorder::begin_request_if_needed(double t) {
  if (request_open_) return;
  request_open_ = true;
  request_start_ms_ = t;
  last_token_ms_ = t;
}

void SessionRecorder::on_segment(const SegmentEvent& e) {
  std::lock_guard lock(mutex_);
  const double t = now_ms();
  begin_request_if_needed(t - e.encode_ms);
  data_.segments.push_back({current_request_, t, e});
  if (!e.from_cache) {
    data_.spans.push_back({current_request_, "encode " + e.label, "encode", t - e.encode_ms, e.encode_ms});
  }
}

void SessionRecorder::on_block(const BlockEvent& e) {
  std::lock_guard lock(mutex_);
  const double t = now_ms();
  begin_request_if_needed(t);
  data_.blocks.push_back({current_request_, t, e});
}

void SessionRecorder::on_token(const TokenEvent& e) {
  std::lock_guard lock(mutex_);
  const double t = now_ms();
  begin_request_if_needed(t);
  data_.tokens.push_back({current_request_, e});
  // Step 0 ends the prefill (TTFT); later steps are one decode forward each.
  const double start = e.step == 0 ? request_start_ms_ : last_token_ms_;
  data_.spans.push_back({current_request_, e.step == 0 ? "prefill + first token" : "decode step " + std::to_string(e.step),
                         e.step == 0 ? "prefill" : "decode", start, t - start});
  last_token_ms_ = t;
}

void SessionRecorder::on_request_finished(const RequestFinishedEvent& e) {
  std::lock_guard lock(mutex_);
  const double t = now_ms();
  begin_request_if_needed(t);
  data_.requests.push_back({current_request_, request_start_ms_, e});
  data_.spans.push_back({current_request_, "request " + std::to_string(current_request_) + " (" + e.policy + ")",
                         "request", request_start_ms_, t - request_start_ms_});
  ++current_request_;
  request_open_ = false;
}

void SessionRecorder::on_device_spans(const std::vector<DeviceSpan>& spans) {
  std::lock_guard lock(mutex_);
  const double origin_ns =
      double(std::chrono::duration_cast<std::chrono::nanoseconds>(start_.time_since_epoch()).count());
  for (const DeviceSpan& d : spans) {
    const double start = (double(d.start_ns) - origin_ns) * 1e-6;
    data_.spans.push_back({current_request_, d.name, d.kind, start, double(d.end_ns - d.start_ns) * 1e-6});
  }
}

SessionRecording SessionRecorder::snapshot() const {
  std::lock_guard lock(mutex_);
  return data_;
}

}  // namespace lazyscope

#include "profiler/session_recorder.h"

#include <unistd.h>

namespace lazyscope {

SessionRecorder::SessionRecorder() : start_(std::chrono::steady_clock::now()) { data_.process_id = uint32_t(getpid()); }

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

namespace {

std::string bytes_text(uint64_t bytes) {
  if (bytes >= (1ull << 20)) return std::to_string(bytes >> 20) + " MiB";
  if (bytes >= (1ull << 10)) return std::to_string(bytes >> 10) + " KiB";
  return std::to_string(bytes) + " B";
}

const char* copy_kind_text(int kind) {
  switch (kind) {
    case 1: return "HtoD";
    case 2: return "DtoH";
    case 8: return "DtoD";
    case 9: return "HtoH";
    case 10: return "PtoP";
    default: return "other";
  }
}

}  // namespace

void SessionRecorder::on_device_activity(const DeviceActivity& a) {
  std::lock_guard lock(mutex_);
  const int64_t origin = std::chrono::duration_cast<std::chrono::nanoseconds>(start_.time_since_epoch()).count();
  const int request = current_request_;
  auto ms = [&](int64_t ns) { return double(ns - origin) * 1e-6; };
  auto span = [&](const std::string& name, const char* category, int64_t start, int64_t end) {
    data_.spans.push_back({request, name, category, ms(start), double(end - start) * 1e-6});
  };
  for (HostRange r : a.ranges) {
    span(r.name, "range", r.start_ns, r.end_ns);
    r.start_ns -= origin;
    r.end_ns -= origin;
    data_.ranges.push_back({request, std::move(r)});
  }
  for (KernelRecord k : a.kernels) {
    if (k.demangled_name.empty()) {
      auto it = kernel_names_.find(k.mangled_name);
      if (it == kernel_names_.end()) it = kernel_names_.emplace(k.mangled_name, kernel_names(k.mangled_name)).first;
      k.demangled_name = it->second.demangled;
      k.short_name = it->second.base;
      k.display_name = it->second.display;
    }
    span(k.display_name, "kernel", k.start_ns, k.end_ns);
    k.start_ns -= origin;
    k.end_ns -= origin;
    data_.kernels.push_back(std::move(k));
  }
  for (MemcpyRecord m : a.memcpys) {
    span(std::string("memcpy ") + copy_kind_text(m.copy_kind) + " " + bytes_text(m.bytes), "memcpy", m.start_ns, m.end_ns);
    m.start_ns -= origin;
    m.end_ns -= origin;
    data_.memcpys.push_back(m);
  }
  for (MemsetRecord m : a.memsets) {
    span("memset " + bytes_text(m.bytes), "memset", m.start_ns, m.end_ns);
    m.start_ns -= origin;
    m.end_ns -= origin;
    data_.memsets.push_back(m);
  }
  for (ApiRecord c : a.api_calls) {
    c.start_ns -= origin;
    c.end_ns -= origin;
    data_.api_calls.push_back(std::move(c));
  }
  for (GraphRecord g : a.graphs) {
    span("CUDA graph " + std::to_string(g.graph_id), "graph", g.start_ns, g.end_ns);
    g.start_ns -= origin;
    g.end_ns -= origin;
    data_.graphs.push_back(g);
  }
  if (data_.gpus.empty()) data_.gpus = a.gpus;
  RecordedTraceSummary summary;
  summary.request = request;
  summary.device_traced = a.device_traced;
  summary.kernels = int64_t(a.kernels.size());
  summary.memcpys = int64_t(a.memcpys.size());
  summary.memsets = int64_t(a.memsets.size());
  summary.api_calls = int64_t(a.api_calls.size());
  summary.ranges = int64_t(a.ranges.size());
  summary.dropped_records = a.dropped_records;
  summary.graphs = int64_t(a.graphs.size());
  summary.kernel_detail_steps = a.kernel_detail_steps;
  summary.graph_level_steps = a.graph_level_steps;
  summary.flush_ms = a.flush_ms;
  data_.traces.push_back(summary);
}

void SessionRecorder::add_overhead(const std::vector<OverheadProbeRow>& rows) {
  std::lock_guard lock(mutex_);
  data_.overhead.insert(data_.overhead.end(), rows.begin(), rows.end());
}

SessionRecording SessionRecorder::snapshot() const {
  std::lock_guard lock(mutex_);
  return data_;
}

}  // namespace lazyscope

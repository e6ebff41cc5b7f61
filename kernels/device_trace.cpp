#include "kernels/device_trace.h"

#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>

#include "kernels/nvtx_ranges.h"

namespace lazyscope {
namespace {

int64_t steady_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

uint32_t this_thread_id() {
  thread_local const uint32_t id = uint32_t(syscall(SYS_gettid));
  return id;
}

}  // namespace

void HostRangeTracer::range_push(const std::string& name, int64_t request_id) {
  nvtx_push(name.c_str(), request_id);
  const uint32_t tid = this_thread_id();
  std::lock_guard lock(mutex_);
  const int depth = int(std::count_if(open_.begin(), open_.end(), [&](const HostRange& r) { return r.thread_id == tid; }));
  open_.push_back({name, steady_ns(), 0, tid, depth, request_id});
}

void HostRangeTracer::range_pop() {
  const int64_t end = steady_ns();
  nvtx_pop();
  const uint32_t tid = this_thread_id();
  std::lock_guard lock(mutex_);
  for (auto it = open_.rbegin(); it != open_.rend(); ++it) {
    if (it->thread_id != tid) continue;
    HostRange range = std::move(*it);
    open_.erase(std::next(it).base());
    range.end_ns = end;
    done_.push_back(std::move(range));
    return;
  }
}

std::vector<HostRange> HostRangeTracer::take_ranges() {
  std::lock_guard lock(mutex_);
  std::vector<HostRange> out = std::move(done_);
  done_.clear();
  std::stable_sort(out.begin(), out.end(), [](const HostRange& a, const HostRange& b) { return a.start_ns < b.start_ns; });
  return out;
}

DeviceActivity HostRangeTracer::drain() {
  DeviceActivity activity;
  activity.ranges = take_ranges();
  return activity;
}

DeviceRange::DeviceRange(DeviceTracer* tracer, const std::string& name, int64_t request_id) : tracer_(tracer) {
  if (tracer_) {
    tracer_->range_push(name, request_id);
  } else {
    nvtx_push(name.c_str(), request_id);
  }
}

DeviceRange::~DeviceRange() {
  if (tracer_) {
    tracer_->range_pop();
  } else {
    nvtx_pop();
  }
}

}  // namespace lazyscope

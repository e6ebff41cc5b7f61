#pragma once
// GPU activity of a session as plain spans: kernels, copies and memsets as the device ran them
// (CUPTI activity records) and the host's named ranges (also emitted as NVTX ranges, so Nsight
// Systems shows the same names). No CUDA header here; the CUDA build provides the tracer.
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace lazyscope {

struct DeviceSpan {
  std::string name;       // kernel name (demangled, without parameters), "memcpy HtoD 4 KiB", range name
  std::string kind;       // "kernel", "memcpy", "memset" or "range"
  int64_t start_ns = 0;   // std::chrono::steady_clock nanoseconds (the host clock the recorder uses)
  int64_t end_ns = 0;
  uint32_t stream = 0;    // CUDA stream id (0 for ranges)
};

class DeviceTracer {
 public:
  virtual ~DeviceTracer() = default;
  // A named host range around device work (nested ranges allowed); ends at range_pop.
  virtual void range_push(const std::string& name) = 0;
  virtual void range_pop() = 0;
  // Every span completed since the last call (flushes the activity buffers), sorted by start.
  virtual std::vector<DeviceSpan> drain() = 0;
};

// Pushes on construction, pops on destruction; a null tracer makes it a no-op.
class DeviceRange {
 public:
  DeviceRange(DeviceTracer* tracer, const std::string& name) : tracer_(tracer) {
    if (tracer_) tracer_->range_push(name);
  }
  ~DeviceRange() {
    if (tracer_) tracer_->range_pop();
  }
  DeviceRange(const DeviceRange&) = delete;
  DeviceRange& operator=(const DeviceRange&) = delete;

 private:
  DeviceTracer* tracer_;
};

// The CUPTI tracer when this build has CUDA and CUPTI and a GPU is visible; otherwise null, with
// the reason in *why. One tracer at a time per process (CUPTI's activity buffers are global).
std::unique_ptr<DeviceTracer> make_device_tracer(std::string* why);

}  // namespace lazyscope

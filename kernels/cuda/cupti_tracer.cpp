// DeviceTracer on CUPTI's activity API: kernel, memcpy and memset records with device start/end
// times, plus host ranges (NVTX ranges too, for Nsight Systems). CUPTI timestamps are moved onto
// std::chrono::steady_clock with one offset taken when the tracer starts.
#include <cxxabi.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <mutex>
#include <string>
#include <vector>

#include "kernels/cuda/cupti_tracer.h"
#include "kernels/cuda_entry.h"

#ifdef LAZYSCOPE_HAVE_CUPTI
#include <cupti.h>
#endif
#ifdef LAZYSCOPE_HAVE_NVTX
#include <nvtx3/nvToolsExt.h>
#endif

namespace lazyscope::cuda {

std::string short_kernel_name(const char* mangled) {
  if (mangled == nullptr) return "kernel";
  int status = 0;
  char* demangled = abi::__cxa_demangle(mangled, nullptr, nullptr, &status);
  std::string name = status == 0 && demangled != nullptr ? demangled : mangled;
  std::free(demangled);
  // Drop the parameter list (the last top-level parenthesis group) and the return type.
  int depth = 0;
  for (std::size_t i = name.size(); i-- > 0;) {
    if (name[i] == ')') ++depth;
    if (name[i] == '(' && --depth == 0) {
      if (i > 0) name.resize(i);
      break;
    }
  }
  std::size_t angle = 0, cut = 0;
  for (std::size_t i = 0; i < name.size(); ++i) {
    if (name[i] == '<') ++angle;
    if (name[i] == '>' && angle > 0) --angle;
    if (angle == 0 && (name[i] == ' ' || name.compare(i, 2, "::") == 0)) cut = name[i] == ' ' ? i + 1 : i + 2;
  }
  return name.substr(cut);
}

#ifdef LAZYSCOPE_HAVE_CUPTI
namespace {

std::atomic<bool> g_active{false};
std::mutex g_mutex;
std::vector<DeviceSpan> g_spans;  // completed records, steady-clock times
int64_t g_offset_ns = 0;          // steady_clock − CUPTI timestamp

int64_t steady_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

std::string bytes_text(uint64_t bytes) {
  if (bytes >= (1ull << 20)) return std::to_string(bytes >> 20) + " MiB";
  if (bytes >= (1ull << 10)) return std::to_string(bytes >> 10) + " KiB";
  return std::to_string(bytes) + " B";
}

const char* copy_kind(uint8_t kind) {
  switch (kind) {
    case CUPTI_ACTIVITY_MEMCPY_KIND_HTOD: return "HtoD";
    case CUPTI_ACTIVITY_MEMCPY_KIND_DTOH: return "DtoH";
    case CUPTI_ACTIVITY_MEMCPY_KIND_DTOD: return "DtoD";
    default: return "other";
  }
}

void CUPTIAPI buffer_requested(uint8_t** buffer, size_t* size, size_t* max_records) {
  constexpr size_t kBytes = 4u << 20;
  *buffer = static_cast<uint8_t*>(std::aligned_alloc(8, kBytes));
  *size = *buffer != nullptr ? kBytes : 0;
  *max_records = 0;
}

void CUPTIAPI buffer_completed(CUcontext, uint32_t, uint8_t* buffer, size_t, size_t valid_size) {
  std::vector<DeviceSpan> spans;
  CUpti_Activity* record = nullptr;
  while (valid_size > 0 && cuptiActivityGetNextRecord(buffer, valid_size, &record) == CUPTI_SUCCESS) {
    DeviceSpan span;
    if (record->kind == CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL || record->kind == CUPTI_ACTIVITY_KIND_KERNEL) {
      const auto* k = reinterpret_cast<const CUpti_ActivityKernel10*>(record);
      span = {short_kernel_name(k->name), "kernel", int64_t(k->start), int64_t(k->end), k->streamId};
    } else if (record->kind == CUPTI_ACTIVITY_KIND_MEMCPY) {
      const auto* m = reinterpret_cast<const CUpti_ActivityMemcpy6*>(record);
      span = {std::string("memcpy ") + copy_kind(m->copyKind) + " " + bytes_text(m->bytes), "memcpy", int64_t(m->start),
              int64_t(m->end), m->streamId};
    } else if (record->kind == CUPTI_ACTIVITY_KIND_MEMSET) {
      const auto* m = reinterpret_cast<const CUpti_ActivityMemset4*>(record);
      span = {"memset " + bytes_text(m->bytes), "memset", int64_t(m->start), int64_t(m->end), m->streamId};
    } else {
      continue;
    }
    spans.push_back(std::move(span));
  }
  std::free(buffer);
  std::lock_guard lock(g_mutex);
  for (DeviceSpan& s : spans) {
    s.start_ns += g_offset_ns;
    s.end_ns += g_offset_ns;
    g_spans.push_back(std::move(s));
  }
}

const CUpti_ActivityKind kKinds[] = {CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, CUPTI_ACTIVITY_KIND_MEMCPY,
                                     CUPTI_ACTIVITY_KIND_MEMSET};

std::string cupti_error(const char* call, CUptiResult result) {
  const char* text = nullptr;
  cuptiGetResultString(result, &text);
  return std::string("CUPTI ") + call + " failed: " + (text != nullptr ? text : "unknown error");
}

class CuptiTracer final : public DeviceTracer {
 public:
  ~CuptiTracer() override {
    cuptiActivityFlushAll(1);
    for (CUpti_ActivityKind kind : kKinds) cuptiActivityDisable(kind);
    {
      std::lock_guard lock(g_mutex);
      g_spans.clear();
    }
    g_active = false;
  }

  void range_push(const std::string& name) override {
#ifdef LAZYSCOPE_HAVE_NVTX
    nvtxRangePushA(name.c_str());
#endif
    open_.push_back({name, "range", steady_ns(), 0, 0});
  }

  void range_pop() override {
    if (open_.empty()) return;
#ifdef LAZYSCOPE_HAVE_NVTX
    nvtxRangePop();
#endif
    DeviceSpan span = std::move(open_.back());
    open_.pop_back();
    span.end_ns = steady_ns();
    ranges_.push_back(std::move(span));
  }

  std::vector<DeviceSpan> drain() override {
    cuptiActivityFlushAll(0);
    std::vector<DeviceSpan> out = std::move(ranges_);
    ranges_.clear();
    {
      std::lock_guard lock(g_mutex);
      out.insert(out.end(), std::make_move_iterator(g_spans.begin()), std::make_move_iterator(g_spans.end()));
      g_spans.clear();
    }
    std::stable_sort(out.begin(), out.end(), [](const DeviceSpan& a, const DeviceSpan& b) { return a.start_ns < b.start_ns; });
    return out;
  }

 private:
  std::vector<DeviceSpan> open_, ranges_;
};

}  // namespace

std::unique_ptr<DeviceTracer> make_cupti_tracer(std::string* why) {
  bool expected = false;
  if (!g_active.compare_exchange_strong(expected, true)) {
    if (why) *why = "another device trace is already running in this process";
    return nullptr;
  }
  CUptiResult result = cuptiActivityRegisterCallbacks(buffer_requested, buffer_completed);
  const char* failed = "cuptiActivityRegisterCallbacks";
  for (CUpti_ActivityKind kind : kKinds) {
    if (result != CUPTI_SUCCESS) break;
    result = cuptiActivityEnable(kind);
    failed = "cuptiActivityEnable";
  }
  uint64_t now = 0;
  if (result == CUPTI_SUCCESS) {
    result = cuptiGetTimestamp(&now);
    failed = "cuptiGetTimestamp";
  }
  if (result != CUPTI_SUCCESS) {
    for (CUpti_ActivityKind kind : kKinds) cuptiActivityDisable(kind);
    g_active = false;
    if (why) *why = cupti_error(failed, result);
    return nullptr;
  }
  g_offset_ns = steady_ns() - int64_t(now);
  return std::make_unique<CuptiTracer>();
}
#else
std::unique_ptr<DeviceTracer> make_cupti_tracer(std::string* why) {
  if (why) *why = "this build has no CUPTI (the CUDA toolkit's libcupti was not found at configure time)";
  return nullptr;
}
#endif

}  // namespace lazyscope::cuda

#pragma once
// What a traced session saw, as plain records: the engine's host ranges (also NVTX ranges in the
// "LazyScope" domain, kernels/nvtx_ranges.h) and, on the CUDA backend with a device trace, CUPTI's
// kernel, memcpy, memset, CUDA graph and runtime/driver API records with their correlation ids and
// launch configuration. No CUDA header here; kernels/cuda/cupti_tracer.cpp fills the device records.
// Every time is std::chrono::steady_clock nanoseconds (the clock the session recorder uses).
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace lazyscope {

// One push/pop range of the engine ("request 3 (lazy)", "decode step 7", ...).
struct HostRange {
  std::string name;
  int64_t start_ns = 0;
  int64_t end_ns = 0;
  uint32_t thread_id = 0;  // OS thread id (gettid) of the thread that pushed it
  int depth = 0;           // nesting level on that thread, 0 = outermost
  int64_t request_id = 0;  // the NVTX payload (int64): the session's request number; 0 = none
};

// CUPTI kernel record (CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL).
struct KernelRecord {
  int64_t start_ns = 0;
  int64_t end_ns = 0;
  uint32_t device_id = 0;
  uint32_t context_id = 0;
  uint32_t stream_id = 0;
  uint32_t correlation_id = 0;  // the API record that launched it (cudaGraphLaunch for graph kernels)
  std::string mangled_name;     // as the module holds it (plain C names are not mangled)
  // kernel_names(mangled_name), filled in by the session recorder when empty (not by the tracer:
  // demangling waits until the request's timers stopped).
  std::string demangled_name, short_name, display_name;
  int grid[3] = {0, 0, 0};
  int block[3] = {0, 0, 0};
  int registers_per_thread = 0;
  int static_shared_memory = 0;   // bytes
  int dynamic_shared_memory = 0;  // bytes
  int64_t local_memory_per_thread = 0;
  int64_t local_memory_total = 0;
  int64_t grid_id = 0;
  int64_t shared_memory_executed = 0;  // bytes the driver configured
  int launch_type = 0;                 // CUPTI's CUpti_ActivityLaunchType (0 regular)
  int cache_config = 0;                // executed CUfunc_cache
  int shared_memory_limit_config = 0;
  uint64_t graph_node_id = 0;          // non-zero for kernels launched as part of a CUDA graph
  uint32_t graph_id = 0;
};

struct MemcpyRecord {
  int64_t start_ns = 0;
  int64_t end_ns = 0;
  uint32_t device_id = 0;
  uint32_t context_id = 0;
  uint32_t stream_id = 0;
  uint32_t correlation_id = 0;
  uint64_t bytes = 0;
  int copy_kind = 0;  // CUpti_ActivityMemcpyKind: 1 HtoD, 2 DtoH, 8 DtoD, ...
  int src_kind = 0;   // CUpti_ActivityMemoryKind
  int dst_kind = 0;
  uint64_t graph_node_id = 0;
};

struct MemsetRecord {
  int64_t start_ns = 0;
  int64_t end_ns = 0;
  uint32_t device_id = 0;
  uint32_t context_id = 0;
  uint32_t stream_id = 0;
  uint32_t correlation_id = 0;
  uint64_t bytes = 0;
  uint32_t value = 0;
  int memory_kind = 0;
  uint64_t graph_node_id = 0;
};

// One execution of a CUDA graph as a whole (CUPTI_ACTIVITY_KIND_GRAPH_TRACE): the decode steps past
// the ones with kernel detail are recorded this way, one record per cudaGraphLaunch.
struct GraphRecord {
  int64_t start_ns = 0;
  int64_t end_ns = 0;
  uint32_t device_id = 0;
  uint32_t context_id = 0;
  uint32_t stream_id = 0;
  uint32_t correlation_id = 0;  // the cudaGraphLaunch API record's
  uint32_t graph_id = 0;
};

// A CUDA runtime or driver API call (cudaLaunchKernel_v7000, cudaGraphLaunch_v10000, cuLaunchKernelEx).
struct ApiRecord {
  int64_t start_ns = 0;
  int64_t end_ns = 0;
  bool driver = false;  // false: runtime API
  uint32_t thread_id = 0;
  uint32_t correlation_id = 0;
  std::string name;
  int64_t return_value = 0;
};

struct GpuInfo {
  int id = 0;  // CUDA device ordinal
  std::string name;
  std::string uuid;
  std::string bus_location;
  int64_t total_memory = 0;
  int64_t l2_cache_size = 0;
  int64_t clock_rate_hz = 0;
  int sm_count = 0;
  int compute_major = 0;
  int compute_minor = 0;
  int max_threads_per_block = 0;
  int threads_per_warp = 0;
  int64_t max_shmem_per_block = 0;
  int64_t max_shmem_per_block_optin = 0;
  int64_t max_shmem_per_sm = 0;
  int max_registers_per_block = 0;
  int max_registers_per_sm = 0;
};

// Everything a request produced, handed to the event sink when the request finishes.
struct DeviceActivity {
  std::vector<HostRange> ranges;
  std::vector<KernelRecord> kernels;
  std::vector<MemcpyRecord> memcpys;
  std::vector<MemsetRecord> memsets;
  std::vector<ApiRecord> api_calls;
  std::vector<GraphRecord> graphs;  // graph-level records of the decode steps without kernel detail
  std::vector<GpuInfo> gpus;      // filled once, with the first request's activity
  uint64_t dropped_records = 0;   // CUPTI records lost since the previous drain (buffers full)
  bool device_traced = false;     // false: host ranges only (CPU backend or no device trace)
  // Which decode steps have per-kernel records: steps 1..kernel_detail_steps ran their kernels one
  // by one; the graph_level_steps after them replayed a CUDA graph, one GraphRecord each. Encodes,
  // copies and the prefill always have kernel detail. kernel_detail_steps = -1: every kernel of
  // every step was recorded (graph replays too, node by node).
  int kernel_detail_steps = -1;
  int graph_level_steps = 0;
  double flush_ms = 0.0;          // time drain() spent flushing and copying CUPTI's buffers
  bool empty() const {
    return ranges.empty() && kernels.empty() && memcpys.empty() && memsets.empty() && api_calls.empty() &&
           graphs.empty();
  }
};

class DeviceTracer {
 public:
  virtual ~DeviceTracer() = default;
  // A named host range (nested ranges allowed, per thread); ends at range_pop on the same thread.
  // Always an NVTX range too (payload: request_id when non-zero), free when no tool listens.
  virtual void range_push(const std::string& name, int64_t request_id = 0) = 0;
  virtual void range_pop() = 0;
  // The engine is about to run decode step `step` (1, 2, ...) of the current request. True: run
  // that step's kernels one by one, not from its CUDA graph (Backend::next_decode_without_graph),
  // so that each gets a record: a CUPTI tracer asks this for the first
  // DeviceTraceOptions::kernel_steps steps; the later ones replay their graph and get one
  // graph-level record each. The counts come back with the next drain().
  virtual bool decode_step(int step) {
    (void)step;
    return false;
  }
  // Every record completed since the last call (flushes CUPTI's buffers first), sorted by start.
  virtual DeviceActivity drain() = 0;
};

// Records host ranges only (the CPU backend, or no device trace asked for): a session always has
// one, so its ranges reach the report.
class HostRangeTracer : public DeviceTracer {
 public:
  void range_push(const std::string& name, int64_t request_id = 0) override;
  void range_pop() override;
  DeviceActivity drain() override;

 protected:
  std::vector<HostRange> take_ranges();

 private:
  std::mutex mutex_;
  std::vector<HostRange> open_, done_;
};

// Pushes on construction, pops on destruction. With a null tracer it is still an NVTX range.
class DeviceRange {
 public:
  DeviceRange(DeviceTracer* tracer, const std::string& name, int64_t request_id = 0);
  ~DeviceRange();
  DeviceRange(const DeviceRange&) = delete;
  DeviceRange& operator=(const DeviceRange&) = delete;

 private:
  DeviceTracer* tracer_;
};

// What the CUPTI tracer records (bench/tracing_overhead.cpp measures the modes).
struct DeviceTraceOptions {
  bool memory = true;     // memcpy and memset records
  bool api_calls = true;  // runtime and driver API calls (the correlation ids' other side)
  // Decode steps per request whose kernels run one by one with a record each; later decode steps
  // replay their CUDA graph with one CUPTI graph-trace record per launch (a per-kernel record inside
  // a graph costs GPU time in every step of many short kernels). -1: no graph-level records, every
  // kernel of every step recorded (graph nodes too).
  int kernel_steps = 1;
};

// The CUPTI tracer when this build has CUDA and CUPTI and a GPU is visible; otherwise null, with
// the reason in *why. One tracer at a time per process (CUPTI's activity buffers are global).
std::unique_ptr<DeviceTracer> make_device_tracer(std::string* why);
std::unique_ptr<DeviceTracer> make_device_tracer(const DeviceTraceOptions& options, std::string* why);

}  // namespace lazyscope

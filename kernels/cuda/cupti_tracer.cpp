// DeviceTracer on CUPTI's activity API: concurrent-kernel records (launch configuration, registers,
// shared memory, graph node), memcpy and memset records, runtime and driver API records (cuBLASLt
// launches its kernels through the driver), all with correlation ids; with
// DeviceTraceOptions::kernel_steps >= 0 also graph-trace records, one per CUDA graph launch (graph
// replays then get no per-node kernel records, as with nsys --cuda-graph-trace=graph), and the
// first kernel_steps decode steps of a request run their kernels outside the graph to keep their
// kernel records. Every kind is enabled once, when the tracer starts. Host ranges and their NVTX
// twins come from HostRangeTracer. CUPTI timestamps are moved onto std::chrono::steady_clock with
// one offset taken when the tracer starts. CUPTI fills large pre-zeroed buffers; completed ones are
// only queued, and drain() (after the request's timers stopped) reads the records and recycles the
// buffers; kernel names are demangled later, by the session recorder. Destroying the tracer
// detaches CUPTI from the process.
#include <cuda_runtime_api.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "kernels/cuda/cupti_tracer.h"
#include "kernels/cuda_entry.h"
#include "kernels/kernel_names.h"

#ifdef LAZYSCOPE_HAVE_CUPTI
#include <cupti.h>
#endif

namespace lazyscope::cuda {

std::string short_kernel_name(const char* mangled) {
  return kernel_names(mangled != nullptr ? mangled : "").display;
}

#ifdef LAZYSCOPE_HAVE_CUPTI
namespace {

std::atomic<bool> g_active{false};
std::atomic<uint64_t> g_dropped{0};  // records CUPTI could not store (all buffers full)
int64_t g_offset_ns = 0;             // steady_clock − CUPTI timestamp

// Activity buffers: a pool of zeroed, resident buffers handed to CUPTI (so CUPTI neither zeroes a
// buffer nor faults its pages in on the launching thread), and the completed ones, kept as they
// are until drain() reads them (no per-record work while the request runs).
constexpr size_t kBufferBytes = 32u << 20;
constexpr int kPreallocatedBuffers = 3;
std::mutex g_buffer_mutex;
std::vector<uint8_t*> g_free_buffers;
struct CompletedBuffer {
  uint8_t* data = nullptr;
  size_t valid = 0;
};
std::vector<CompletedBuffer> g_completed;

uint8_t* new_zeroed_buffer() {
  auto* b = static_cast<uint8_t*>(std::aligned_alloc(64, kBufferBytes));
  if (b != nullptr) std::memset(b, 0, kBufferBytes);  // zero and fault every page in now
  return b;
}

int64_t steady_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

void CUPTIAPI buffer_requested(uint8_t** buffer, size_t* size, size_t* max_records) {
  uint8_t* b = nullptr;
  {
    std::lock_guard lock(g_buffer_mutex);
    if (!g_free_buffers.empty()) {
      b = g_free_buffers.back();
      g_free_buffers.pop_back();
    }
  }
  if (b == nullptr) b = new_zeroed_buffer();
  *buffer = b;
  *size = b != nullptr ? kBufferBytes : 0;
  *max_records = 0;
}

void CUPTIAPI buffer_completed(CUcontext context, uint32_t stream_id, uint8_t* buffer, size_t, size_t valid_size) {
  size_t dropped = 0;
  if (cuptiActivityGetNumDroppedRecords(context, stream_id, &dropped) == CUPTI_SUCCESS) g_dropped += dropped;
  if (buffer == nullptr) return;
  std::lock_guard lock(g_buffer_mutex);
  g_completed.push_back({buffer, valid_size});
}

// Names of API callbacks, looked up once per (domain, cbid).
class ApiNames {
 public:
  const std::string& get(bool driver, uint32_t cbid) {
    const uint64_t key = (uint64_t(driver) << 32) | cbid;
    auto it = names_.find(key);
    if (it != names_.end()) return it->second;
    const CUpti_CallbackDomain domain = driver ? CUPTI_CB_DOMAIN_DRIVER_API : CUPTI_CB_DOMAIN_RUNTIME_API;
    const char* name = nullptr;
    std::string text = cuptiGetCallbackName(domain, cbid, &name) == CUPTI_SUCCESS && name != nullptr
                           ? std::string(name)
                           : (driver ? "driver API " : "runtime API ") + std::to_string(cbid);
    return names_.emplace(key, std::move(text)).first->second;
  }

 private:
  std::map<uint64_t, std::string> names_;
};

// Copies one completed buffer's records into `out` (steady-clock times).
void parse_buffer(const CompletedBuffer& buffer, ApiNames& names, DeviceActivity& out) {
  const int64_t offset = g_offset_ns;
  CUpti_Activity* record = nullptr;
  size_t valid_size = buffer.valid;
  while (valid_size > 0 && cuptiActivityGetNextRecord(buffer.data, valid_size, &record) == CUPTI_SUCCESS) {
    if (record->kind == CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL || record->kind == CUPTI_ACTIVITY_KIND_KERNEL) {
      const auto* k = reinterpret_cast<const CUpti_ActivityKernel10*>(record);
      KernelRecord r;
      r.start_ns = int64_t(k->start) + offset;
      r.end_ns = int64_t(k->end) + offset;
      r.device_id = k->deviceId;
      r.context_id = k->contextId;
      r.stream_id = k->streamId;
      r.correlation_id = k->correlationId;
      r.mangled_name = k->name != nullptr ? k->name : "";
      r.grid[0] = k->gridX, r.grid[1] = k->gridY, r.grid[2] = k->gridZ;
      r.block[0] = k->blockX, r.block[1] = k->blockY, r.block[2] = k->blockZ;
      r.registers_per_thread = k->registersPerThread;
      r.static_shared_memory = k->staticSharedMemory;
      r.dynamic_shared_memory = k->dynamicSharedMemory;
      r.local_memory_per_thread = k->localMemoryPerThread;
      r.local_memory_total = int64_t(k->localMemoryTotal_v2);
      r.grid_id = k->gridId;
      r.shared_memory_executed = k->sharedMemoryExecuted;
      r.launch_type = k->launchType;
      r.cache_config = k->cacheConfig.config.executed;
      r.shared_memory_limit_config = int(k->shmemLimitConfig);
      r.graph_node_id = k->graphNodeId;
      r.graph_id = k->graphId;
      out.kernels.push_back(std::move(r));
    } else if (record->kind == CUPTI_ACTIVITY_KIND_MEMCPY) {
      const auto* m = reinterpret_cast<const CUpti_ActivityMemcpy6*>(record);
      out.memcpys.push_back({int64_t(m->start) + offset, int64_t(m->end) + offset, m->deviceId, m->contextId,
                             m->streamId, m->correlationId, m->bytes, m->copyKind, m->srcKind, m->dstKind,
                             m->graphNodeId});
    } else if (record->kind == CUPTI_ACTIVITY_KIND_MEMSET) {
      const auto* m = reinterpret_cast<const CUpti_ActivityMemset4*>(record);
      out.memsets.push_back({int64_t(m->start) + offset, int64_t(m->end) + offset, m->deviceId, m->contextId,
                             m->streamId, m->correlationId, m->bytes, m->value, m->memoryKind, m->graphNodeId});
    } else if (record->kind == CUPTI_ACTIVITY_KIND_GRAPH_TRACE) {
      const auto* g = reinterpret_cast<const CUpti_ActivityGraphTrace2*>(record);
      if (g->start == 0 && g->end == 0) continue;  // CUPTI could not time this launch
      out.graphs.push_back({int64_t(g->start) + offset, int64_t(g->end) + offset, g->deviceId, g->contextId,
                            g->streamId, g->correlationId, g->graphId});
    } else if (record->kind == CUPTI_ACTIVITY_KIND_RUNTIME || record->kind == CUPTI_ACTIVITY_KIND_DRIVER) {
      const auto* a = reinterpret_cast<const CUpti_ActivityAPI*>(record);
      const bool driver = record->kind == CUPTI_ACTIVITY_KIND_DRIVER;
      out.api_calls.push_back({int64_t(a->start) + offset, int64_t(a->end) + offset, driver, a->threadId,
                               a->correlationId, names.get(driver, a->cbid), int64_t(a->returnValue)});
    }
  }
}

const CUpti_ActivityKind kAllKinds[] = {CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, CUPTI_ACTIVITY_KIND_GRAPH_TRACE,
                                        CUPTI_ACTIVITY_KIND_MEMCPY,            CUPTI_ACTIVITY_KIND_MEMSET,
                                        CUPTI_ACTIVITY_KIND_RUNTIME,           CUPTI_ACTIVITY_KIND_DRIVER};

// Per-kernel and per-copy records.
std::vector<CUpti_ActivityKind> detail_kinds(const DeviceTraceOptions& o) {
  std::vector<CUpti_ActivityKind> kinds{CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL};
  if (o.memory) kinds.insert(kinds.end(), {CUPTI_ACTIVITY_KIND_MEMCPY, CUPTI_ACTIVITY_KIND_MEMSET});
  return kinds;
}

// Runtime and every driver API call: cuBLASLt launches its GEMM kernels through the driver, so
// their correlation ids join CUPTI_ACTIVITY_KIND_DRIVER rows.
std::vector<CUpti_ActivityKind> api_kinds(const DeviceTraceOptions& o) {
  if (!o.api_calls) return {};
  return {CUPTI_ACTIVITY_KIND_RUNTIME, CUPTI_ACTIVITY_KIND_DRIVER};
}

void disable_all() {
  for (CUpti_ActivityKind kind : kAllKinds) cuptiActivityDisable(kind);
}

std::string cupti_error(const char* call, CUptiResult result) {
  const char* text = nullptr;
  cuptiGetResultString(result, &text);
  return std::string("CUPTI ") + call + " failed: " + (text != nullptr ? text : "unknown error");
}

std::string uuid_text(const cudaUUID_t& uuid) {
  const auto* b = reinterpret_cast<const unsigned char*>(uuid.bytes);
  char text[48];
  std::snprintf(text, sizeof text, "GPU-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", b[0],
                b[1], b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12], b[13], b[14], b[15]);
  return text;
}

std::vector<GpuInfo> visible_gpus() {
  std::vector<GpuInfo> gpus;
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess) return gpus;
  for (int d = 0; d < count; ++d) {
    cudaDeviceProp prop{};
    if (cudaGetDeviceProperties(&prop, d) != cudaSuccess) continue;
    auto attribute = [d](cudaDeviceAttr a) {
      int v = 0;
      return cudaDeviceGetAttribute(&v, a, d) == cudaSuccess ? v : 0;
    };
    GpuInfo g;
    g.id = d;
    g.name = prop.name;
    g.uuid = uuid_text(prop.uuid);
    char bus[32];
    std::snprintf(bus, sizeof bus, "%04x:%02x:%02x.0", attribute(cudaDevAttrPciDomainId), attribute(cudaDevAttrPciBusId),
                  attribute(cudaDevAttrPciDeviceId));
    g.bus_location = bus;
    g.total_memory = int64_t(prop.totalGlobalMem);
    g.l2_cache_size = attribute(cudaDevAttrL2CacheSize);
    g.clock_rate_hz = int64_t(attribute(cudaDevAttrClockRate)) * 1000;
    g.sm_count = attribute(cudaDevAttrMultiProcessorCount);
    g.compute_major = attribute(cudaDevAttrComputeCapabilityMajor);
    g.compute_minor = attribute(cudaDevAttrComputeCapabilityMinor);
    g.max_threads_per_block = attribute(cudaDevAttrMaxThreadsPerBlock);
    g.threads_per_warp = attribute(cudaDevAttrWarpSize);
    g.max_shmem_per_block = attribute(cudaDevAttrMaxSharedMemoryPerBlock);
    g.max_shmem_per_block_optin = attribute(cudaDevAttrMaxSharedMemoryPerBlockOptin);
    g.max_shmem_per_sm = attribute(cudaDevAttrMaxSharedMemoryPerMultiprocessor);
    g.max_registers_per_block = attribute(cudaDevAttrMaxRegistersPerBlock);
    g.max_registers_per_sm = attribute(cudaDevAttrMaxRegistersPerMultiprocessor);
    gpus.push_back(std::move(g));
  }
  return gpus;
}

class CuptiTracer final : public HostRangeTracer {
 public:
  CuptiTracer(const DeviceTraceOptions& options, bool graph_level)
      : options_(options), gpus_(visible_gpus()), graph_level_(graph_level) {}

  ~CuptiTracer() override {
    // Detach CUPTI entirely (cuptiFinalize, after the synchronisation and flush it requires): a
    // process that stops tracing runs at its untraced speed again, not with CUPTI's hooks left in.
    cudaDeviceSynchronize();
    cuptiActivityFlushAll(1);
    disable_all();
    cuptiFinalize();
    std::lock_guard lock(g_buffer_mutex);
    for (const CompletedBuffer& b : g_completed) std::free(b.data);
    for (uint8_t* b : g_free_buffers) std::free(b);
    g_completed.clear();
    g_free_buffers.clear();
    g_dropped = 0;
    g_active = false;
  }

  bool decode_step(int step) override {
    if (!graph_level_) return false;  // every kernel is recorded, graph nodes too
    if (step <= options_.kernel_steps) {
      ++detail_steps_;
      return true;
    }
    ++graph_level_steps_;
    return false;
  }

  DeviceActivity drain() override {
    const auto t0 = std::chrono::steady_clock::now();
    DeviceActivity out;
    out.kernel_detail_steps = graph_level_ ? detail_steps_ : -1;
    out.graph_level_steps = graph_level_steps_;
    detail_steps_ = graph_level_steps_ = 0;
    cuptiActivityFlushAll(0);
    std::vector<CompletedBuffer> completed;
    {
      std::lock_guard lock(g_buffer_mutex);
      completed.swap(g_completed);
    }
    for (const CompletedBuffer& b : completed) {
      parse_buffer(b, names_, out);
      std::memset(b.data, 0, kBufferBytes);  // zeroed again for its next use
    }
    {
      std::lock_guard lock(g_buffer_mutex);
      for (const CompletedBuffer& b : completed) g_free_buffers.push_back(b.data);
    }
    out.ranges = take_ranges();
    out.device_traced = true;
    out.dropped_records = g_dropped.exchange(0);
    if (!gpus_sent_) {
      out.gpus = gpus_;
      gpus_sent_ = true;
    }
    auto by_start = [](const auto& a, const auto& b) { return a.start_ns < b.start_ns; };
    std::stable_sort(out.kernels.begin(), out.kernels.end(), by_start);
    std::stable_sort(out.memcpys.begin(), out.memcpys.end(), by_start);
    std::stable_sort(out.memsets.begin(), out.memsets.end(), by_start);
    std::stable_sort(out.api_calls.begin(), out.api_calls.end(), by_start);
    std::stable_sort(out.graphs.begin(), out.graphs.end(), by_start);
    out.flush_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    return out;
  }

 private:
  DeviceTraceOptions options_;
  std::vector<GpuInfo> gpus_;
  bool gpus_sent_ = false;
  ApiNames names_;
  bool graph_level_ = false;  // graph launches give graph-trace records (CUPTI_ACTIVITY_KIND_GRAPH_TRACE on)
  int detail_steps_ = 0;
  int graph_level_steps_ = 0;
};

}  // namespace

std::unique_ptr<DeviceTracer> make_cupti_tracer(const DeviceTraceOptions& options, std::string* why) {
  bool expected = false;
  if (!g_active.compare_exchange_strong(expected, true)) {
    if (why) *why = "another device trace is already running in this process";
    return nullptr;
  }
  {
    std::lock_guard lock(g_buffer_mutex);
    while (int(g_free_buffers.size()) < kPreallocatedBuffers) {
      uint8_t* b = new_zeroed_buffer();
      if (b == nullptr) break;
      g_free_buffers.push_back(b);
    }
  }
  // Our buffers come zeroed (CUPTI would otherwise zero each one on the thread that needs it).
  uint8_t zeroed = 1;
  size_t attribute_size = sizeof zeroed;
  cuptiActivitySetAttribute(CUPTI_ACTIVITY_ATTR_ZEROED_OUT_ACTIVITY_BUFFER, &attribute_size, &zeroed);
  // API records carry the OS thread id (gettid), the id NVTX_EVENTS and Nsight Systems use.
  CUptiResult result = cuptiSetThreadIdType(CUPTI_ACTIVITY_THREAD_ID_TYPE_SYSTEM);
  const char* failed = "cuptiSetThreadIdType";
  if (result == CUPTI_SUCCESS) {
    result = cuptiActivityRegisterCallbacks(buffer_requested, buffer_completed);
    failed = "cuptiActivityRegisterCallbacks";
  }
  std::vector<CUpti_ActivityKind> kinds = detail_kinds(options);
  for (CUpti_ActivityKind kind : api_kinds(options)) kinds.push_back(kind);
  for (CUpti_ActivityKind kind : kinds) {
    if (result != CUPTI_SUCCESS) break;
    result = cuptiActivityEnable(kind);
    failed = "cuptiActivityEnable";
  }
  // Graph-level records for graph launches (kernels launched outside graphs keep their kernel
  // records, as with Nsight Systems' --cuda-graph-trace=graph). Enabled here, never toggled while
  // graphs run. Where CUPTI refuses it, every kernel is recorded instead.
  bool graph_level = false;
  if (result == CUPTI_SUCCESS && options.kernel_steps >= 0) {
    graph_level = cuptiActivityEnable(CUPTI_ACTIVITY_KIND_GRAPH_TRACE) == CUPTI_SUCCESS;
  }
  uint64_t now = 0;
  if (result == CUPTI_SUCCESS) {
    result = cuptiGetTimestamp(&now);
    failed = "cuptiGetTimestamp";
  }
  if (result != CUPTI_SUCCESS) {
    disable_all();
    g_active = false;
    if (why) *why = cupti_error(failed, result);
    return nullptr;
  }
  g_offset_ns = steady_ns() - int64_t(now);
  g_dropped = 0;
  return std::make_unique<CuptiTracer>(options, graph_level);
}
#else
std::unique_ptr<DeviceTracer> make_cupti_tracer(const DeviceTraceOptions&, std::string* why) {
  if (why) *why = "this build has no CUPTI (the CUDA toolkit's libcupti was not found at configure time)";
  return nullptr;
}
#endif

}  // namespace lazyscope::cuda

// DeviceTracer on CUPTI's activity API: concurrent-kernel records (launch configuration, registers,
// shared memory, graph node), memcpy and memset records, and runtime API records plus the driver's
// kernel launches (cuBLAS launches some kernels through the driver), all with correlation ids; host
// ranges and their NVTX twins come from HostRangeTracer. CUPTI timestamps are moved onto
// std::chrono::steady_clock with one offset taken when the tracer starts. Records are copied out of
// CUPTI's buffers as they complete; kernel names are demangled once per symbol at drain time, after
// the request's timers stopped. Destroying the tracer detaches CUPTI from the process.
#include <cuda_runtime_api.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
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
std::mutex g_mutex;
DeviceActivity g_pending;            // completed records, steady-clock times
std::atomic<uint64_t> g_dropped{0};  // records CUPTI could not store (all buffers full)
int64_t g_offset_ns = 0;             // steady_clock − CUPTI timestamp

int64_t steady_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

void CUPTIAPI buffer_requested(uint8_t** buffer, size_t* size, size_t* max_records) {
  constexpr size_t kBytes = 8u << 20;
  *buffer = static_cast<uint8_t*>(std::aligned_alloc(8, kBytes));
  *size = *buffer != nullptr ? kBytes : 0;
  *max_records = 0;
}

std::string api_name(CUpti_CallbackDomain domain, uint32_t cbid) {
  const char* name = nullptr;
  if (cuptiGetCallbackName(domain, cbid, &name) == CUPTI_SUCCESS && name != nullptr) return name;
  return (domain == CUPTI_CB_DOMAIN_DRIVER_API ? "driver API " : "runtime API ") + std::to_string(cbid);
}

void CUPTIAPI buffer_completed(CUcontext context, uint32_t stream_id, uint8_t* buffer, size_t, size_t valid_size) {
  DeviceActivity batch;
  const int64_t offset = g_offset_ns;
  CUpti_Activity* record = nullptr;
  while (valid_size > 0 && cuptiActivityGetNextRecord(buffer, valid_size, &record) == CUPTI_SUCCESS) {
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
      batch.kernels.push_back(std::move(r));
    } else if (record->kind == CUPTI_ACTIVITY_KIND_MEMCPY) {
      const auto* m = reinterpret_cast<const CUpti_ActivityMemcpy6*>(record);
      batch.memcpys.push_back({int64_t(m->start) + offset, int64_t(m->end) + offset, m->deviceId, m->contextId,
                               m->streamId, m->correlationId, m->bytes, m->copyKind, m->srcKind, m->dstKind,
                               m->graphNodeId});
    } else if (record->kind == CUPTI_ACTIVITY_KIND_MEMSET) {
      const auto* m = reinterpret_cast<const CUpti_ActivityMemset4*>(record);
      batch.memsets.push_back({int64_t(m->start) + offset, int64_t(m->end) + offset, m->deviceId, m->contextId,
                               m->streamId, m->correlationId, m->bytes, m->value, m->memoryKind, m->graphNodeId});
    } else if (record->kind == CUPTI_ACTIVITY_KIND_RUNTIME || record->kind == CUPTI_ACTIVITY_KIND_DRIVER) {
      const auto* a = reinterpret_cast<const CUpti_ActivityAPI*>(record);
      const bool driver = record->kind == CUPTI_ACTIVITY_KIND_DRIVER;
      batch.api_calls.push_back({int64_t(a->start) + offset, int64_t(a->end) + offset, driver, a->threadId,
                                 a->correlationId,
                                 api_name(driver ? CUPTI_CB_DOMAIN_DRIVER_API : CUPTI_CB_DOMAIN_RUNTIME_API, a->cbid),
                                 int64_t(a->returnValue)});
    }
  }
  size_t dropped = 0;
  if (cuptiActivityGetNumDroppedRecords(context, stream_id, &dropped) == CUPTI_SUCCESS) g_dropped += dropped;
  std::free(buffer);
  std::lock_guard lock(g_mutex);
  auto append = [](auto& to, auto& from) { to.insert(to.end(), std::make_move_iterator(from.begin()), std::make_move_iterator(from.end())); };
  append(g_pending.kernels, batch.kernels);
  append(g_pending.memcpys, batch.memcpys);
  append(g_pending.memsets, batch.memsets);
  append(g_pending.api_calls, batch.api_calls);
}

const CUpti_ActivityKind kAllKinds[] = {CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, CUPTI_ACTIVITY_KIND_MEMCPY,
                                        CUPTI_ACTIVITY_KIND_MEMSET, CUPTI_ACTIVITY_KIND_RUNTIME};
// Driver calls that launch kernels: cuBLAS(Lt) launches through these, not through the runtime.
const CUpti_CallbackId kDriverLaunches[] = {
    CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel,           CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel_ptsz,
    CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx,         CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx_ptsz,
    CUPTI_DRIVER_TRACE_CBID_cuLaunchCooperativeKernel, CUPTI_DRIVER_TRACE_CBID_cuLaunchCooperativeKernel_ptsz,
    CUPTI_DRIVER_TRACE_CBID_cuGraphLaunch,            CUPTI_DRIVER_TRACE_CBID_cuGraphLaunch_ptsz};

std::vector<CUpti_ActivityKind> kinds_for(const DeviceTraceOptions& o) {
  std::vector<CUpti_ActivityKind> kinds{CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL};
  if (o.memory) kinds.insert(kinds.end(), {CUPTI_ACTIVITY_KIND_MEMCPY, CUPTI_ACTIVITY_KIND_MEMSET});
  if (o.api_calls) kinds.push_back(CUPTI_ACTIVITY_KIND_RUNTIME);
  return kinds;
}

void disable_all() {
  for (CUpti_ActivityKind kind : kAllKinds) cuptiActivityDisable(kind);
  for (CUpti_CallbackId cbid : kDriverLaunches) cuptiActivityEnableDriverApi(cbid, 0);
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
  CuptiTracer() : gpus_(visible_gpus()) {}

  ~CuptiTracer() override {
    // Detach CUPTI entirely (cuptiFinalize, after the synchronisation and flush it requires): a
    // process that stops tracing runs at its untraced speed again, not with CUPTI's hooks left in.
    cudaDeviceSynchronize();
    cuptiActivityFlushAll(1);
    disable_all();
    cuptiFinalize();
    {
      std::lock_guard lock(g_mutex);
      g_pending = DeviceActivity{};
    }
    g_dropped = 0;
    g_active = false;
  }

  DeviceActivity drain() override {
    cuptiActivityFlushAll(0);
    DeviceActivity out;
    {
      std::lock_guard lock(g_mutex);
      out = std::move(g_pending);
      g_pending = DeviceActivity{};
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
    return out;
  }

 private:
  std::vector<GpuInfo> gpus_;
  bool gpus_sent_ = false;
};

}  // namespace

std::unique_ptr<DeviceTracer> make_cupti_tracer(const DeviceTraceOptions& options, std::string* why) {
  bool expected = false;
  if (!g_active.compare_exchange_strong(expected, true)) {
    if (why) *why = "another device trace is already running in this process";
    return nullptr;
  }
  // API records carry the OS thread id (gettid), the id NVTX_EVENTS and Nsight Systems use.
  CUptiResult result = cuptiSetThreadIdType(CUPTI_ACTIVITY_THREAD_ID_TYPE_SYSTEM);
  const char* failed = "cuptiSetThreadIdType";
  if (result == CUPTI_SUCCESS) {
    result = cuptiActivityRegisterCallbacks(buffer_requested, buffer_completed);
    failed = "cuptiActivityRegisterCallbacks";
  }
  for (CUpti_ActivityKind kind : kinds_for(options)) {
    if (result != CUPTI_SUCCESS) break;
    result = cuptiActivityEnable(kind);
    failed = "cuptiActivityEnable";
  }
  for (CUpti_CallbackId cbid : kDriverLaunches) {
    if (result != CUPTI_SUCCESS || !options.api_calls) break;
    result = cuptiActivityEnableDriverApi(cbid, 1);
    failed = "cuptiActivityEnableDriverApi";
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
  return std::make_unique<CuptiTracer>();
}
#else
std::unique_ptr<DeviceTracer> make_cupti_tracer(const DeviceTraceOptions&, std::string* why) {
  if (why) *why = "this build has no CUPTI (the CUDA toolkit's libcupti was not found at configure time)";
  return nullptr;
}
#endif

}  // namespace lazyscope::cuda

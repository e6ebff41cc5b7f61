// Chooses and builds a backend; the only place that links the CUDA library when it exists.
#include "kernels/backend.h"
#include "kernels/cpu/cpu_backend.h"
#include "kernels/cpu/cpu_fast_backend.h"
#include "kernels/device_trace.h"
#include "kernels/overhead_probe.h"
#include "base/error.h"
#ifdef LAZYSCOPE_HAVE_CUDA
#include "kernels/cuda_entry.h"
#endif

namespace lazyscope {

int cuda_device_count() {
#ifdef LAZYSCOPE_HAVE_CUDA
  return cuda::device_count();
#else
  return 0;
#endif
}

std::unique_ptr<Backend> make_backend(BackendKind kind, int cpu_threads, CpuPrecision precision) {
  if (kind == BackendKind::Auto) kind = cuda_device_count() > 0 ? BackendKind::Cuda : BackendKind::Cpu;
  if (kind == BackendKind::Cpu) {
    if (precision == CpuPrecision::Fast) return std::make_unique<CpuFastBackend>(cpu_threads);
    return std::make_unique<CpuBackend>(cpu_threads);
  }
#ifdef LAZYSCOPE_HAVE_CUDA
  if (cuda_device_count() == 0) throw Error("--backend cuda: no CUDA GPU is visible on this machine");
  return cuda::make_backend();
#else
  throw Error("--backend cuda: this build of LazyScope has no CUDA backend (nvcc was not found)");
#endif
}

std::unique_ptr<Backend> make_backend_for(BackendKind kind, const ModelShape& shape, int cpu_threads,
                                          std::string* note, CpuPrecision precision) {
  std::unique_ptr<Backend> backend = make_backend(kind, cpu_threads, precision);
  const std::string why = backend->unsupported_reason(shape);
  if (why.empty()) return backend;
  if (kind != BackendKind::Auto) throw Error("--backend " + backend->name() + ": " + why);
  if (note) *note = "the " + backend->name() + " backend cannot run this model (" + why + "): using the CPU";
  return make_backend(BackendKind::Cpu, cpu_threads, precision);
}

std::unique_ptr<DeviceTracer> make_device_tracer(std::string* why) { return make_device_tracer(DeviceTraceOptions{}, why); }

std::unique_ptr<DeviceTracer> make_device_tracer(const DeviceTraceOptions& options, std::string* why) {
#ifdef LAZYSCOPE_HAVE_CUDA
  if (cuda_device_count() == 0) {
    if (why) *why = "no CUDA GPU is visible on this machine";
    return nullptr;
  }
  return cuda::make_cupti_tracer(options, why);
#else
  (void)options;
  if (why) *why = "this build of LazyScope has no CUDA backend (nvcc was not found)";
  return nullptr;
#endif
}

std::unique_ptr<AttentionProbe> make_attention_probe(BackendKind kind, const AttentionProbeShape& shape,
                                                     int cpu_threads) {
  if (kind == BackendKind::Auto) kind = cuda_device_count() > 0 ? BackendKind::Cuda : BackendKind::Cpu;
  if (kind == BackendKind::Cpu) return make_cpu_attention_probe(shape, cpu_threads);
#ifdef LAZYSCOPE_HAVE_CUDA
  if (cuda_device_count() == 0) throw Error("--backend cuda: no CUDA GPU is visible on this machine");
  return cuda::make_attention_probe(shape);
#else
  throw Error("--backend cuda: this build of LazyScope has no CUDA backend (nvcc was not found)");
#endif
}

}  // namespace lazyscope

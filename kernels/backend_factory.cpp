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

std::string tensor_parallel_error(int ranks) {
  const std::string option = "--tp " + std::to_string(ranks);
#ifdef LAZYSCOPE_HAVE_CUDA
  if (!cuda::tensor_parallel_compiled()) {
    return option + ": tensor parallelism is compiled out of this build (NCCL was not found when it was configured)";
  }
  const int gpus = cuda_device_count();
  if (ranks < 1 || ranks > gpus) {
    return option + ": this machine has " + std::to_string(gpus) + " CUDA GPU(s), so the tensor-parallel size must be " +
           (gpus > 0 ? "1.." + std::to_string(gpus) : std::string("unset (no GPU)"));
  }
  return {};
#else
  return option + ": this build of LazyScope has no CUDA backend (nvcc was not found), so no tensor parallelism";
#endif
}

std::unique_ptr<Backend> make_backend(BackendKind kind, int cpu_threads, CpuPrecision precision, int tensor_parallel) {
  if (tensor_parallel != 0) {
    if (kind == BackendKind::Cpu) {
      throw Error("--tp " + std::to_string(tensor_parallel) + ": tensor parallelism is for the CUDA backend, not the CPU");
    }
    const std::string why = tensor_parallel_error(tensor_parallel);
    if (!why.empty()) throw Error(why);
#ifdef LAZYSCOPE_HAVE_CUDA
    return cuda::make_tensor_parallel_backend(tensor_parallel);
#endif
  }
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
                                          std::string* note, CpuPrecision precision, int tensor_parallel) {
  std::unique_ptr<Backend> backend = make_backend(kind, cpu_threads, precision, tensor_parallel);
  const std::string why = backend->unsupported_reason(shape);
  if (why.empty()) return backend;
  if (tensor_parallel != 0) throw Error("--tp " + std::to_string(tensor_parallel) + ": " + why);
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

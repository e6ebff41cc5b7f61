// A step under the CUPTI tracer, a prompt (bench_cuda_end_to_end --prompt-profile) or one decode
// token after a prompt (--decode-profile): which kernels its time goes to, how much of the GPU span
// no kernel runs, and its first kernels as they ran.
#include <algorithm>
#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <stdexcept>
#include <string>
#include <tuple>
#include <vector>

#include <cuda_runtime.h>

#include "bench/cuda/scenarios.h"
#include "kernels/cuda/check.h"
#include "kernels/cuda/cuda_backend.h"
#include "kernels/device_trace.h"
#include "kernels/kernel_names.h"
#include "kernels/synthetic_shapes.h"

namespace lazyscope::bench {
namespace {

using Clock = std::chrono::steady_clock;

struct PromptTime {
  double wall_ms = 0;  // synchronised start to the logits on the host
  double gpu_ms = 0;   // events on the backend's stream around the same work
};

// The step being profiled: a prompt of n tokens, or one decode token after a prompt.
using StepFn = std::function<void()>;

PromptTime timed_step(cuda::CudaBackend& backend, const StepFn& step) {
  cudaEvent_t begin, end;
  LAZYSCOPE_CUDA_CHECK(cudaEventCreate(&begin));
  LAZYSCOPE_CUDA_CHECK(cudaEventCreate(&end));
  backend.synchronize();
  const auto start = Clock::now();
  LAZYSCOPE_CUDA_CHECK(cudaEventRecord(begin, backend.stream()));
  step();
  PromptTime t;
  t.wall_ms = std::chrono::duration<double, std::milli>(Clock::now() - start).count();
  LAZYSCOPE_CUDA_CHECK(cudaEventRecord(end, backend.stream()));  // the step has synchronised
  LAZYSCOPE_CUDA_CHECK(cudaEventSynchronize(end));
  float ms = 0.0f;
  LAZYSCOPE_CUDA_CHECK(cudaEventElapsedTime(&ms, begin, end));
  t.gpu_ms = ms;
  LAZYSCOPE_CUDA_CHECK(cudaEventDestroy(begin));
  LAZYSCOPE_CUDA_CHECK(cudaEventDestroy(end));
  return t;
}

// Median wall and GPU times of three untraced prompts.
PromptTime untraced(cuda::CudaBackend& backend, const StepFn& step) {
  std::vector<double> walls, gpus;
  for (int r = 0; r < 3; ++r) {
    const PromptTime t = timed_step(backend, step);
    walls.push_back(t.wall_ms);
    gpus.push_back(t.gpu_ms);
  }
  std::sort(walls.begin(), walls.end());
  std::sort(gpus.begin(), gpus.end());
  return PromptTime{walls[1], gpus[1]};
}

// cuBLAS names run to a hundred characters; the head and tail say which kernel it is.
std::string shortened(const std::string& name) {
  if (name.size() <= 72) return name;
  return name.substr(0, 40) + "…" + name.substr(name.size() - 28);
}

PromptProfile profile_step(cuda::CudaBackend& backend, const StepFn& step, const char* what) {
  PromptProfile result;
  timed_step(backend, step);  // warm-up (cuBLAS heuristics, workspaces, graphs)
  const PromptTime before = untraced(backend, step);
  result.untraced_wall_ms = before.wall_ms;
  result.untraced_gpu_ms = before.gpu_ms;

  DeviceActivity activity;
  {
    std::string why;
    DeviceTraceOptions options;
    options.api_calls = false;
    // A record for every kernel, those a CUDA graph launches too. (Graph-level records would need
    // the decode step's graphs instantiated under the tracer, as Session::set_device_tracer has
    // them; these were captured before it, and with graph-level records on the run crashed.)
    options.kernel_steps = -1;
    std::unique_ptr<DeviceTracer> tracer = make_device_tracer(options, &why);
    if (!tracer) throw std::runtime_error(std::string(what) + ": no device trace: " + why);
    timed_step(backend, step);  // warm-up under the tracer
    tracer->drain();
    const PromptTime traced = timed_step(backend, step);
    result.traced_wall_ms = traced.wall_ms;
    result.traced_gpu_ms = traced.gpu_ms;
    activity = tracer->drain();
  }
  const PromptTime after = untraced(backend, step);  // the tracer gone (CUPTI detached)
  result.after_wall_ms = after.wall_ms;
  result.after_gpu_ms = after.gpu_ms;
  result.dropped = activity.dropped_records;
  if (activity.kernels.empty()) throw std::runtime_error(std::string(what) + ": the trace holds no kernel");
  std::vector<KernelRecord> kernels = activity.kernels;
  std::sort(kernels.begin(), kernels.end(), [](const KernelRecord& a, const KernelRecord& b) { return a.start_ns < b.start_ns; });
  result.kernels = int(kernels.size());
  result.gpu_span_ms = double(kernels.back().end_ns - kernels.front().start_ns) * 1e-6;
  std::map<std::tuple<std::string, std::string>, PromptKernelGroup> groups;
  int64_t covered_until = kernels.front().start_ns, idle_ns = 0;
  for (const KernelRecord& k : kernels) {
    if (k.start_ns > covered_until) idle_ns += k.start_ns - covered_until;  // kernels may overlap (PDL)
    covered_until = std::max(covered_until, k.end_ns);
    const double us = double(k.end_ns - k.start_ns) * 1e-3;
    result.kernel_ms += us * 1e-3;
    const std::string grid = std::to_string(k.grid[0]) + "×" + std::to_string(k.grid[1]) + "×" + std::to_string(k.grid[2]);
    PromptKernelGroup& g = groups[{kernel_names(k.mangled_name).display, grid}];
    g.name = shortened(kernel_names(k.mangled_name).display);
    g.grid = grid;
    ++g.launches;
    g.total_us += us;
  }
  result.idle_ms = double(idle_ns) * 1e-6;
  for (auto& [key, g] : groups) result.groups.push_back(g);
  std::sort(result.groups.begin(), result.groups.end(),
            [](const PromptKernelGroup& a, const PromptKernelGroup& b) { return a.total_us > b.total_us; });
  for (std::size_t i = 0; i < kernels.size() && i < 16; ++i) {  // the step's first kernels, as they ran
    const KernelRecord& k = kernels[i];
    result.first.push_back(PromptKernelSpan{shortened(kernel_names(k.mangled_name).display),
                                            double(k.start_ns - kernels.front().start_ns) * 1e-3,
                                            double(k.end_ns - kernels.front().start_ns) * 1e-3});
  }
  return result;
}

}  // namespace

PromptProfile measure_prompt_profile(const std::string& model, int tokens) {
  const ModelShape shape = synthetic_shape(model);
  cuda::CudaBackend backend;
  backend.load_synthetic(shape, 1);
  backend.allocate_pool((tokens + 15) / 16 + 8, 16);
  return profile_step(
      backend, [&] { run_segment(backend, tokens, 0, 0, {}, false, true, nullptr, 1, shape.vocab_size); },
      "--prompt-profile");
}

PromptProfile measure_decode_profile(const std::string& model, int context, bool layer_kernel) {
  const ModelShape shape = synthetic_shape(model);
  cuda::CudaTuning tuning;
  tuning.decode_layer_kernel = layer_kernel;
  cuda::CudaBackend backend(tuning);
  backend.load_synthetic(shape, 1);
  const int prompt_blocks = (context + 15) / 16;
  backend.allocate_pool(prompt_blocks + 8, 16);
  std::vector<BlockRef> table;
  run_segment(backend, context, 0, 0, {}, false, false, &table, 1, shape.vocab_size);
  // One token at position `context` into the block after the prompt's, again and again (the same slot).
  return profile_step(
      backend, [&] { run_segment(backend, 1, context, prompt_blocks, table, false, true, nullptr, 2, shape.vocab_size); },
      "--decode-profile");
}

}  // namespace lazyscope::bench

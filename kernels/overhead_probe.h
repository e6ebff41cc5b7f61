#pragma once
// The lazy-overhead probe's kernel side: the same decode attention call, plain and lazy, on one
// shape, timed by the backend that runs it. The CPU probe (kernels/cpu/overhead_probe.cpp) times
// the fp32 reference kernel, the CUDA probe (kernels/cuda/overhead_probe.cu) the bf16 GPU kernel;
// profiler/overhead_probe.h alternates them (ABBA) and reports the ratios. C++17-clean: nvcc
// compiles the CUDA probe.
#include <memory>
#include <string>

namespace lazyscope {

enum class BackendKind;  // kernels/backend.h

struct AttentionProbeShape {
  int num_heads = 0;
  int num_kv_heads = 0;
  int head_dim = 0;
  int block_size = 16;
  int batch = 1;            // sequences, one query each
  int context = 0;          // keys per sequence
  int document_tokens = 0;  // lazy tables change shift every this many keys (0: one document = context)
};

class AttentionProbe {
 public:
  virtual ~AttentionProbe() = default;
  // Microseconds per call, averaged over `calls` back-to-back calls of the plain or lazy variant.
  virtual double time_us(bool lazy, int calls) = 0;
  virtual std::string backend() const = 0;  // "cpu" or "cuda"
  virtual std::string device() const = 0;   // GPU name, or the CPU and its threads
  virtual std::string kernel() const = 0;   // which kernel is measured, with its precision
};

// Throws Error naming the option when the shape is invalid or the backend cannot run it.
std::unique_ptr<AttentionProbe> make_cpu_attention_probe(const AttentionProbeShape& shape, int threads);
// kernels/backend_factory.cpp: Auto picks the GPU when one is visible.
std::unique_ptr<AttentionProbe> make_attention_probe(BackendKind kind, const AttentionProbeShape& shape,
                                                     int cpu_threads);
// Validates a shape (head dim even, kv heads divide heads, sizes positive); throws Error.
void check_probe_shape(const AttentionProbeShape& shape);

namespace cuda {
std::unique_ptr<AttentionProbe> make_attention_probe(const AttentionProbeShape& shape);
}  // namespace cuda

}  // namespace lazyscope

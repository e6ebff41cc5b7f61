#pragma once
// The one interface between the engine and a compute backend (CPU reference or CUDA).
// The engine decides what is cached where (block ids, shifts); a backend owns the weights and
// the paged KV pool and runs the Llama forward over a block table.
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "kernels/model_shape.h"

namespace lazyscope {

// One entry of a block table. Keys in `block` are stored rotated at their encoding positions;
// attention treats them as if rotated by a further `shift` (docs/design.md). 12 bytes, packed.
struct BlockRef {
  int32_t block = 0;
  int32_t shift = 0;
  int32_t valid = 0;  // filled token slots, 1..block_size
};

// One forward step of one sequence: n new tokens attend to every token of `table`
// (flattened in order), causally among themselves. The new tokens are the last n valid
// entries of the flattened table; their K/V are written to `slots` first.
struct ForwardStep {
  std::span<const int32_t> tokens;     // n token ids
  std::span<const int32_t> positions;  // encoding position of each new token
  std::span<const int32_t> slots;      // pool slot (block * block_size + offset) for its K/V
  std::span<const BlockRef> table;     // everything attended to, new tokens' blocks last
  bool lazy_rotation = false;  // honour shifts by rotating the query; if false every shift is 0
  bool want_logits = false;    // compute the logits of the last new token
};

// Copy a block's K and V into another block, rotating the keys by `shift` (materialize).
struct BlockCopy {
  int32_t src = 0;
  int32_t dst = 0;
  int32_t shift = 0;
  int32_t valid = 0;
};

class Backend {
 public:
  virtual ~Backend() = default;
  virtual std::string name() const = 0;    // "cpu" or "cuda"
  virtual std::string device() const = 0;  // human readable device description
  // Bytes one KV block takes in this backend's pool (its element type).
  virtual std::size_t kv_element_bytes() const = 0;
  // Empty when this backend can run the shape; otherwise why not (e.g. an unsupported head_dim).
  virtual std::string unsupported_reason(const ModelShape& shape) const { return {}; }
  virtual void load(const ModelShape& shape, const WeightsView& weights) = 0;
  // Deterministic random weights made by the backend itself (benchmarks without a download).
  virtual void load_synthetic(const ModelShape& shape, uint64_t seed);
  virtual void allocate_pool(int num_blocks, int block_size) = 0;
  // Runs the step; when step.want_logits, `logits` receives vocab_size floats.
  virtual void forward(const ForwardStep& step, std::vector<float>* logits) = 0;
  // Runs the step and returns the greedy next token: the argmax of the last new token's logits
  // (first index on ties). want_logits is ignored. A GPU
  // backend picks it on the device and reads back only the token; this default reads the logits.
  virtual int32_t forward_greedy(const ForwardStep& step) {
    ForwardStep with_logits = step;
    with_logits.want_logits = true;
    std::vector<float> logits;
    forward(with_logits, &logits);
    int32_t best = 0;
    for (std::size_t i = 1; i < logits.size(); ++i) {
      if (logits[i] > logits[best]) best = int32_t(i);
    }
    return best;
  }
  // One decode step of several sequences at once (continuous batching): every step has exactly
  // one new token and its own table and shifts. When `logits` is given it receives
  // steps.size() rows of vocab_size floats, row-major. The default runs the steps one by one.
  virtual void forward_batch(std::span<const ForwardStep> steps, std::vector<float>* logits);
  // As forward_batch, greedy: tokens[i] is the argmax of step i's logits (first index on ties).
  virtual void forward_batch_greedy(std::span<const ForwardStep> steps, std::span<int32_t> tokens);
  virtual void copy_blocks(std::span<const BlockCopy> copies) = 0;
  // Waits for outstanding device work (for honest host timings). No-op on the CPU.
  virtual void synchronize() {}
  // For device traces (kernels/device_trace.h): run the next one-token step's kernels one by one
  // instead of replaying its CUDA graph, so each kernel gets its own trace record; and drop the
  // captured graphs, so the graphs a trace sees are instantiated while it is attached. No-ops
  // where there are no graphs.
  virtual void next_decode_without_graph() {}
  virtual void drop_graphs() {}
};

enum class BackendKind { Auto, Cpu, Cuda };

// What the CPU backend computes with: Exact is the fp32 reference (every weight dequantized,
// double-accumulated attention); Fast keeps weights in their file's format and runs fused
// int8/fp32 SIMD kernels (logits within quantization noise of Exact).
enum class CpuPrecision { Fast, Exact };

BackendKind parse_backend_kind(const std::string& text);
CpuPrecision parse_cpu_precision(const std::string& text);  // "fast" or "exact"
// Number of usable CUDA devices (0 when built without CUDA or no GPU/driver is present).
int cuda_device_count();
// Empty when `--tp ranks` can run here (CUDA and NCCL built in, 1..cuda_device_count()); else why not.
std::string tensor_parallel_error(int ranks);
// Auto resolves to Cuda when a GPU is present, else Cpu. Throws Error if Cuda is unavailable.
// tensor_parallel > 0: the CUDA backend split over GPUs 0..tensor_parallel-1 (--tp; 1 runs the
// tensor-parallel path on one NCCL rank); 0: the plain CUDA backend.
std::unique_ptr<Backend> make_backend(BackendKind kind, int cpu_threads = 0,
                                      CpuPrecision precision = CpuPrecision::Exact, int tensor_parallel = 0);
// As make_backend, but Auto also falls back to the CPU when the GPU backend cannot run `shape`
// (never under tensor parallelism, which was asked for); `note` (if given) receives why.
std::unique_ptr<Backend> make_backend_for(BackendKind kind, const ModelShape& shape, int cpu_threads,
                                          std::string* note, CpuPrecision precision = CpuPrecision::Exact,
                                          int tensor_parallel = 0);

}  // namespace lazyscope

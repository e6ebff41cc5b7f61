#pragma once
// Tensor parallelism over N GPUs of one host: one CudaBackend rank per GPU (rank r on device r),
// each with its own host thread, stream and NCCL communicator, all driven in lock step: every call
// runs on every rank at once and returns when all are done. Each rank holds its share of the
// weights (tensor_shard.h) and of the paged KV pool (its KV heads of every block, so the pool's
// budget is split evenly over the GPUs); block tables, shifts and block copies are the same on
// every rank, so the lazy rotation is unchanged. Rank 0's logits and tokens are the result.
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "kernels/backend.h"
#include "kernels/cuda/cuda_backend.h"

namespace lazyscope::cuda {

class TensorParallelBackend final : public Backend {
 public:
  // Throws Error when `ranks` is outside 1..device_count() or NCCL was compiled out.
  explicit TensorParallelBackend(int ranks);
  ~TensorParallelBackend() override;
  std::string name() const override { return "cuda"; }
  std::string device() const override;
  std::size_t kv_element_bytes() const override { return 2; }
  std::string unsupported_reason(const ModelShape& shape) const override;
  void load(const ModelShape& shape, const WeightsView& weights) override;
  void load_synthetic(const ModelShape& shape, uint64_t seed) override;
  // Every rank allocates `num_blocks` blocks of its KV heads: 1 / ranks of the pool on each GPU.
  void allocate_pool(int num_blocks, int block_size) override;
  void forward(const ForwardStep& step, std::vector<float>* logits) override;
  int32_t forward_greedy(const ForwardStep& step) override;
  void forward_batch(std::span<const ForwardStep> steps, std::vector<float>* logits) override;
  void forward_batch_greedy(std::span<const ForwardStep> steps, std::span<int32_t> tokens) override;
  void copy_blocks(std::span<const BlockCopy> copies) override;
  void synchronize() override;
  void next_decode_without_graph() override;
  void drop_graphs() override;

  int ranks() const { return int(workers_.size()); }
  // Benchmarks and tests: a rank's backend (use it only between calls, from the calling thread
  // for its plain accessors; anything that launches work goes through on_every_rank).
  CudaBackend& rank(int r) { return *workers_[r]->backend; }
  // Runs work(rank, backend) on every rank's thread at once; rethrows the first rank's error.
  void on_every_rank(const std::function<void(int, CudaBackend&)>& work);

 private:
  struct Worker {
    int rank = 0;
    std::unique_ptr<CudaBackend> backend;
    std::thread thread;
    std::function<void(int, CudaBackend&)> task;
    bool has_task = false, quit = false;
    std::exception_ptr error;
    std::vector<float> scratch_logits;  // ranks > 0: outputs nobody reads
    std::vector<int32_t> scratch_tokens;
  };
  void serve(Worker& worker);
  void stop();  // ends the threads (each frees its rank on its GPU), then the communicators

  std::vector<std::unique_ptr<Worker>> workers_;
  std::vector<ncclComm*> comms_;
  std::mutex mutex_;
  std::condition_variable wake_, done_;
  int pending_ = 0;
};

}  // namespace lazyscope::cuda

// Tensor parallelism's driver: one host thread per GPU rank, every call on all ranks in lock step.
#include "kernels/cuda/tensor_parallel_backend.h"

#include <string>

#include "base/error.h"
#include "kernels/cuda/check.h"
#include "kernels/cuda/collectives.h"
#include "kernels/cuda_entry.h"
#include "kernels/tensor_shard.h"

namespace lazyscope::cuda {

TensorParallelBackend::TensorParallelBackend(int ranks) {
  if (!tensor_parallel_compiled()) {
    throw Error("--tp " + std::to_string(ranks) +
                ": tensor parallelism is compiled out of this build (NCCL was not found when it "
                "was configured)");
  }
  const int gpus = device_count();
  if (ranks < 1 || ranks > gpus) {
    throw Error("--tp " + std::to_string(ranks) + ": this machine has " + std::to_string(gpus) +
                " CUDA GPU(s), so the tensor-parallel size must be 1.." + std::to_string(gpus));
  }
  std::vector<int> devices(ranks);
  for (int r = 0; r < ranks; ++r) devices[r] = r;
  comms_ = make_communicators(devices);
  for (int r = 0; r < ranks; ++r) {
    auto worker = std::make_unique<Worker>();
    worker->rank = r;
    Worker* raw = worker.get();
    worker->thread = std::thread([this, raw] { serve(*raw); });
    workers_.push_back(std::move(worker));
  }
  try {
    // Each rank's backend is made on its own thread, so its stream and buffers live on its GPU.
    on_every_rank([](int, CudaBackend&) {});
  } catch (...) {
    stop();
    throw;
  }
}

TensorParallelBackend::~TensorParallelBackend() { stop(); }

void TensorParallelBackend::stop() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    for (auto& worker : workers_) worker->quit = true;
  }
  wake_.notify_all();
  for (auto& worker : workers_) {
    if (worker->thread.joinable()) worker->thread.join();
  }
  workers_.clear();
  for (ncclComm* comm : comms_) destroy_communicator(comm);
  comms_.clear();
}

void TensorParallelBackend::serve(Worker& worker) {
  cudaSetDevice(worker.rank);
  try {
    worker.backend = std::make_unique<CudaBackend>();
  } catch (...) {
    worker.error = std::current_exception();
  }
  for (;;) {
    std::function<void(int, CudaBackend&)> task;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      wake_.wait(lock, [&] { return worker.has_task || worker.quit; });
      if (worker.quit) break;
      task = std::move(worker.task);
    }
    if (worker.backend) {
      try {
        task(worker.rank, *worker.backend);
      } catch (...) {
        worker.error = std::current_exception();
      }
    }
    {
      std::lock_guard<std::mutex> lock(mutex_);
      worker.has_task = false;
      if (--pending_ == 0) done_.notify_all();
    }
  }
  worker.backend.reset();  // on its own device
}

void TensorParallelBackend::on_every_rank(const std::function<void(int, CudaBackend&)>& work) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    pending_ = int(workers_.size());
    for (auto& worker : workers_) {
      worker->task = work;
      worker->has_task = true;
    }
  }
  wake_.notify_all();
  std::unique_lock<std::mutex> lock(mutex_);
  done_.wait(lock, [&] { return pending_ == 0; });
  for (auto& worker : workers_) {
    if (worker->error) {
      std::exception_ptr error = worker->error;
      for (auto& w : workers_) w->error = nullptr;
      std::rethrow_exception(error);
    }
  }
}

std::string TensorParallelBackend::device() const {
  return std::to_string(workers_.size()) + " x " + workers_.front()->backend->device() +
         ", tensor parallel";
}

std::string TensorParallelBackend::unsupported_reason(const ModelShape& shape) const {
  std::string why = workers_.front()->backend->unsupported_reason(shape);
  if (why.empty()) why = tensor_split_error(shape, ranks());
  return why;
}

void TensorParallelBackend::load(const ModelShape& shape, const WeightsView& weights) {
  on_every_rank([&](int r, CudaBackend& b) {
    b.set_tensor_shard(tensor_shard(shape, ranks(), r), comms_[r]);
    b.load(shape, weights);
  });
}

void TensorParallelBackend::load_synthetic(const ModelShape& shape, uint64_t seed) {
  on_every_rank([&](int r, CudaBackend& b) {
    b.set_tensor_shard(tensor_shard(shape, ranks(), r), comms_[r]);
    b.load_synthetic(shape, seed);
  });
}

void TensorParallelBackend::allocate_pool(int num_blocks, int block_size) {
  on_every_rank([&](int, CudaBackend& b) { b.allocate_pool(num_blocks, block_size); });
}

void TensorParallelBackend::forward(const ForwardStep& step, std::vector<float>* logits) {
  on_every_rank([&](int r, CudaBackend& b) {
    // Every rank takes the same path (the collectives must match); rank 0's logits are the result.
    std::vector<float>* out = logits == nullptr ? nullptr
                              : r == 0          ? logits
                                                : &workers_[r]->scratch_logits;
    b.forward(step, out);
  });
}

int32_t TensorParallelBackend::forward_greedy(const ForwardStep& step) {
  int32_t token = -1;
  on_every_rank([&](int r, CudaBackend& b) {
    const int32_t picked = b.forward_greedy(step);
    if (r == 0) token = picked;
  });
  return token;
}

void TensorParallelBackend::forward_batch(std::span<const ForwardStep> steps,
                                          std::vector<float>* logits) {
  on_every_rank([&](int r, CudaBackend& b) {
    std::vector<float>* out = logits == nullptr ? nullptr
                              : r == 0          ? logits
                                                : &workers_[r]->scratch_logits;
    b.forward_batch(steps, out);
  });
}

void TensorParallelBackend::forward_batch_greedy(std::span<const ForwardStep> steps,
                                                 std::span<int32_t> tokens) {
  on_every_rank([&](int r, CudaBackend& b) {
    if (r == 0) {
      b.forward_batch_greedy(steps, tokens);
      return;
    }
    std::vector<int32_t>& scratch = workers_[r]->scratch_tokens;
    scratch.resize(tokens.size());
    b.forward_batch_greedy(steps, scratch);
  });
}

void TensorParallelBackend::copy_blocks(std::span<const BlockCopy> copies) {
  on_every_rank([&](int, CudaBackend& b) { b.copy_blocks(copies); });
}

void TensorParallelBackend::synchronize() {
  on_every_rank([](int, CudaBackend& b) { b.synchronize(); });
}

void TensorParallelBackend::next_decode_without_graph() {
  on_every_rank([](int, CudaBackend& b) { b.next_decode_without_graph(); });
}

void TensorParallelBackend::drop_graphs() {
  on_every_rank([](int, CudaBackend& b) { b.drop_graphs(); });
}

std::unique_ptr<Backend> make_tensor_parallel_backend(int ranks) {
  return std::make_unique<TensorParallelBackend>(ranks);
}

}  // namespace lazyscope::cuda

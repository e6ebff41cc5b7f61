// The tensor-parallel parts of a CUDA step: the vocabulary-split embedding, the all-reduce of the
// row-parallel partial sums and the all-gather of the logits shards. Unsharded, the local op only.
#include <chrono>

#include "base/error.h"
#include "kernels/cuda/check.h"
#include "kernels/cuda/collectives.h"
#include "kernels/cuda/cuda_backend.h"
#include "kernels/cuda/ops.h"

namespace lazyscope::cuda {

void CudaBackend::set_tensor_shard(const TensorShard& shard, ncclComm* comm) {
  if (comm == nullptr) throw Error("cuda backend: a tensor-parallel rank needs a communicator");
  LAZYSCOPE_CUDA_CHECK(cudaStreamSynchronize(stream_));
  invalidate_graphs();
  shard_ = shard;
  comm_ = comm;
  loaded_ = false;  // the weights held so far were not this rank's share
}

void CudaBackend::embed_tokens(const int32_t* ids, int n, float* x) {
  const int H = shape_.hidden_size;
  if (!sharded()) {
    embedding(ids, n, embed_.as<bf16_bits>(), H, x, stream_);
    return;
  }
  embedding_shard(ids, n, embed_.as<bf16_bits>(), shard_.vocab.begin, shard_.vocab.count, H, x,
                  stream_);
  reduce_residual(x, n);  // each token's row comes from the one rank that holds it
}

void CudaBackend::reduce_residual(float* x, int rows) {
  if (!sharded()) return;
  const std::size_t count = std::size_t(rows) * shape_.hidden_size;
  if (!time_collectives) {
    all_reduce_sum(x, count, comm_, stream_);
    return;
  }
  // The benchmark's split of a step: the work before, then the all-reduce alone.
  LAZYSCOPE_CUDA_CHECK(cudaStreamSynchronize(stream_));
  const auto start = std::chrono::steady_clock::now();
  all_reduce_sum(x, count, comm_, stream_);
  LAZYSCOPE_CUDA_CHECK(cudaStreamSynchronize(stream_));
  collective_seconds +=
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

// At one row (or one rank) the gathered [rank][row][vocabulary share] layout is the logits'
// [row][vocabulary]; otherwise each rank's block goes to its columns of every row.
void CudaBackend::gather_logits(int rows) {
  const std::size_t share = std::size_t(shape_.vocab_size);
  const std::size_t count = std::size_t(rows) * share;
  if (rows == 1 || shard_.ranks == 1) {
    all_gather(logits_shard_.as<float>(), logits_.as<float>(), count, comm_, stream_);
    return;
  }
  all_gather(logits_shard_.as<float>(), logits_gathered_.as<float>(), count, comm_, stream_);
  const std::size_t row_bytes = std::size_t(output_vocab()) * sizeof(float);
  for (int r = 0; r < shard_.ranks; ++r) {
    LAZYSCOPE_CUDA_CHECK(cudaMemcpy2DAsync(
        logits_.as<float>() + r * share, row_bytes, logits_gathered_.as<float>() + r * count,
        share * sizeof(float), share * sizeof(float), rows, cudaMemcpyDeviceToDevice, stream_));
  }
}

}  // namespace lazyscope::cuda

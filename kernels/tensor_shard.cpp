// Tensor-parallel shard math: even splits of heads, KV heads, MLP columns and vocabulary.
#include "kernels/tensor_shard.h"

#include "base/error.h"

namespace lazyscope {
namespace {

ShardRange even_part(int size, int ranks, int rank) {
  const int count = size / ranks;
  return ShardRange{rank * count, count};
}

}  // namespace

std::string tensor_split_error(const ModelShape& shape, int ranks) {
  if (ranks < 1) return "tensor parallel size " + std::to_string(ranks) + " is below 1";
  const struct {
    const char* what;
    int size;
  } dims[] = {{"query heads", shape.num_heads},
              {"KV heads", shape.num_kv_heads},
              {"intermediate size", shape.intermediate_size},
              {"vocabulary", shape.vocab_size}};
  for (const auto& dim : dims) {
    if (dim.size % ranks != 0) {
      return std::string(dim.what) + " (" + std::to_string(dim.size) +
             ") do not split evenly over " + std::to_string(ranks) + " GPUs (" +
             std::to_string(dim.size % ranks) + " left over)";
    }
  }
  return {};
}

TensorShard tensor_shard(const ModelShape& shape, int ranks, int rank) {
  const std::string why = tensor_split_error(shape, ranks);
  if (!why.empty()) throw Error("tensor parallel: " + why);
  if (rank < 0 || rank >= ranks) {
    throw Error("tensor parallel: rank " + std::to_string(rank) + " is outside 0.." +
                std::to_string(ranks - 1));
  }
  TensorShard shard;
  shard.rank = rank;
  shard.ranks = ranks;
  shard.heads = even_part(shape.num_heads, ranks, rank);
  shard.kv_heads = even_part(shape.num_kv_heads, ranks, rank);
  shard.intermediate = even_part(shape.intermediate_size, ranks, rank);
  shard.vocab = even_part(shape.vocab_size, ranks, rank);
  return shard;
}

ModelShape shard_shape(const ModelShape& shape, const TensorShard& shard) {
  ModelShape local = shape;
  local.num_heads = shard.heads.count;
  local.num_kv_heads = shard.kv_heads.count;
  local.intermediate_size = shard.intermediate.count;
  local.vocab_size = shard.vocab.count;
  return local;
}

}  // namespace lazyscope

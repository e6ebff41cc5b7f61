#pragma once
// Tensor-parallel shard math (host only): which query heads, KV heads, MLP columns and vocabulary
// rows each of `ranks` GPUs owns. Every split is even; an uneven one is refused with the sizes.
// QKV and gate/up are split by output rows (column-parallel), o_proj and down by input columns
// (row-parallel, summed by an all-reduce), the embedding and the LM head by vocabulary rows.
#include <string>

#include "kernels/model_shape.h"

namespace lazyscope {

// A half-open range [begin, begin + count) of one dimension.
struct ShardRange {
  int begin = 0;
  int count = 0;
  int end() const { return begin + count; }
};

struct TensorShard {
  int rank = 0;
  int ranks = 1;
  ShardRange heads;         // query heads
  ShardRange kv_heads;      // KV heads (the query heads of a rank use only its KV heads)
  ShardRange intermediate;  // MLP columns (gate and up rows, down columns)
  ShardRange vocab;         // embedding and LM head rows
};

// Empty when `shape` splits evenly over `ranks`; otherwise which size does not, and by what.
std::string tensor_split_error(const ModelShape& shape, int ranks);
// Rank `rank`'s share; throws Error with tensor_split_error's sentence for an uneven split.
TensorShard tensor_shard(const ModelShape& shape, int ranks, int rank);
// The model one rank computes: its heads, KV heads, MLP columns and vocabulary rows, the full
// hidden size and layer count.
ModelShape shard_shape(const ModelShape& shape, const TensorShard& shard);

}  // namespace lazyscope

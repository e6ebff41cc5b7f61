#include "engine/kv/block_pool.h"

#include "base/error.h"

namespace lazyscope {

BlockPool::BlockPool(int num_blocks, int block_size) : block_size_(block_size), blocks_(num_blocks) {
  if (num_blocks <= 0) throw Error("KV pool: the budget holds no block");
  if (block_size <= 0) throw Error("KV pool: block size must be positive");
  free_.reserve(num_blocks);
  for (int b = num_blocks - 1; b >= 0; --b) free_.push_back(b);
}

std::vector<int32_t> BlockPool::take(int count, int64_t segment) {
  if (count > free_count()) throw Error("KV pool: not enough free blocks");
  std::vector<int32_t> out;
  out.reserve(count);
  for (int i = 0; i < count; ++i) {
    int32_t b = free_.back();
    free_.pop_back();
    blocks_[b] = BlockState{segment, 0, 0, 0, 0};
    out.push_back(b);
  }
  return out;
}

void BlockPool::give_back(int32_t block) {
  BlockState& s = blocks_.at(block);
  if (s.segment < 0) throw Error("KV pool: block " + std::to_string(block) + " freed twice");
  if (s.refcount != 0) throw Error("KV pool: block " + std::to_string(block) + " freed while in use");
  s = BlockState{};
  free_.push_back(block);
}

}  // namespace lazyscope

#pragma once
// Accounting for the paged KV pool: which block is free, who owns it, how many requests hold it.
// No tensors here: the backend owns the memory, this owns the bookkeeping.
#include <cstdint>
#include <vector>

namespace lazyscope {

struct BlockState {
  int64_t segment = -1;  // owner; -1 when free
  int refcount = 0;      // requests holding the block right now
  int valid = 0;         // filled slots
  int shift = 0;         // rotation already applied to the stored keys (positional/materialized copies)
  uint64_t last_use = 0;
};

class BlockPool {
 public:
  BlockPool(int num_blocks, int block_size);
  int num_blocks() const { return int(blocks_.size()); }
  int block_size() const { return block_size_; }
  int free_count() const { return int(free_.size()); }
  // Takes `count` free blocks for `segment`; the caller has checked free_count().
  std::vector<int32_t> take(int count, int64_t segment);
  void give_back(int32_t block);
  BlockState& at(int32_t block) { return blocks_.at(block); }
  const BlockState& at(int32_t block) const { return blocks_.at(block); }
  const std::vector<BlockState>& blocks() const { return blocks_; }

 private:
  int block_size_;
  std::vector<BlockState> blocks_;
  std::vector<int32_t> free_;  // a stack: lowest ids are handed out first
};

}  // namespace lazyscope

#pragma once
// Host side of the attention kernels: block tables flattened into KvEntry/KvTile arrays.
#include <span>
#include <vector>

#include "kernels/backend.h"
#include "kernels/cuda/attention.h"

namespace lazyscope::cuda {

static_assert(sizeof(BlockCopy) == sizeof(BlockCopyOp), "BlockCopy and BlockCopyOp must match");

// Host-built description of one or more sequences' block tables, uploaded once per step and
// shared by every layer.
struct AttentionPlan {
  std::vector<KvEntry> entries;
  std::vector<KvTile> tiles;
  std::vector<int32_t> seq_entry_offsets{0};  // [batch + 1]
  std::vector<int32_t> seq_tile_offsets{0};   // [batch + 1]
  std::vector<int32_t> seq_total_keys;        // [batch]
  int max_entries = 0;                        // longest table in entries
};

// Appends one sequence; throws Error on an invalid entry (valid outside 1..block_size, or a
// shift in a plain call) or a block size that does not divide kPrefillTileKeys.
void append_sequence(AttentionPlan& plan, std::span<const BlockRef> table, int block_size, bool lazy);

}  // namespace lazyscope::cuda

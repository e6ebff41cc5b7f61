#pragma once
// Host side of the attention kernels: block tables flattened into KvEntry/KvTile arrays.
#include <span>
#include <vector>

#include "kernels/backend.h"
#include "kernels/cuda/attention.h"

namespace lazyscope::cuda {

static_assert(sizeof(BlockCopy) == sizeof(BlockCopyOp), "BlockCopy and BlockCopyOp must match");

// append_table for an engine block table.
void append_sequence(AttentionPlan& plan, std::span<const BlockRef> table, int block_size, bool lazy);

}  // namespace lazyscope::cuda

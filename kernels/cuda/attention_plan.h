#pragma once
// Host side of the attention kernels: block tables flattened into KvEntry/KvTile arrays.
#include <span>
#include <vector>

#include "kernels/backend.h"
#include "kernels/cuda/attention.h"

namespace lazyscope::cuda {

static_assert(sizeof(BlockCopy) == sizeof(BlockCopyOp), "BlockCopy and BlockCopyOp must match");

// The kernels' entries for an engine block table, written to out[0, table.size()): key_start
// counts the keys before each entry. Returns the table's key count. The one BlockRef -> KvEntry
// conversion of the backend (decode metadata and prefill plans); validate_step checks the table.
int write_kv_entries(std::span<const BlockRef> table, KvEntry* out);

// append_table for an engine block table.
void append_sequence(AttentionPlan& plan, std::span<const BlockRef> table, int block_size, bool lazy);

}  // namespace lazyscope::cuda

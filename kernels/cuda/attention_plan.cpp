#include <algorithm>
#include <string>

#include "kernels/cuda/attention_plan.h"
#include "kernels/cuda/check.h"
#include "base/error.h"

namespace lazyscope::cuda {

int write_kv_entries(std::span<const BlockRef> table, KvEntry* out) {
  int key = 0;
  for (std::size_t i = 0; i < table.size(); ++i) {
    out[i] = KvEntry{table[i].block, table[i].shift, table[i].valid, key};
    key += table[i].valid;
  }
  return key;
}

void append_sequence(AttentionPlan& plan, std::span<const BlockRef> table, int block_size, bool lazy) {
  std::vector<KvEntry> entries(table.size());
  write_kv_entries(table, entries.data());
  append_table(plan, entries.data(), int(entries.size()), block_size, lazy);
}

void append_table(AttentionPlan& plan, const KvEntry* table, int count, int block_size, bool lazy) {
  if (block_size < 1 || block_size > kPrefillTileKeys || kPrefillTileKeys % block_size != 0) {
    throw Error("cuda attention: block size " + std::to_string(block_size) + " must divide " +
                std::to_string(kPrefillTileKeys));
  }
  const int entries_per_tile = kPrefillTileKeys / block_size;
  const int first_entry = int(plan.entries.size());
  int key = 0;
  for (int i = 0; i < count; ++i) {
    const KvEntry& ref = table[i];
    if (ref.valid < 1 || ref.valid > block_size) {
      throw Error("cuda attention: table entry " + std::to_string(i) + " (block " + std::to_string(ref.block) +
                  ") has " + std::to_string(ref.valid) + " valid slots");
    }
    if (!lazy && ref.shift != 0) {
      throw Error("cuda attention: shifted block " + std::to_string(ref.block) + " in a plain attention call");
    }
    plan.entries.push_back(KvEntry{ref.block, ref.shift, ref.valid, key});
    key += ref.valid;
  }
  // Tiles: runs of equal shift cut into groups of entries_per_tile; indices are sequence-local.
  for (int i = 0; i < count;) {
    KvTile tile;
    tile.entry_begin = i;
    tile.shift = table[i].shift;
    tile.key_start = plan.entries[first_entry + i].key_start;
    int j = i;
    while (j < count && j - i < entries_per_tile && table[j].shift == tile.shift) ++j;
    tile.entry_count = j - i;
    plan.tiles.push_back(tile);
    i = j;
  }
  // Distinct shifts of this sequence, in first-seen order, and each tile's index into them.
  const std::size_t shift_base = plan.distinct_shifts.size();
  for (std::size_t t = plan.seq_tile_offsets.back(); t < plan.tiles.size(); ++t) {
    const int shift = plan.tiles[t].shift;
    std::size_t index = shift_base;
    while (index < plan.distinct_shifts.size() && plan.distinct_shifts[index] != shift) ++index;
    if (index == plan.distinct_shifts.size()) plan.distinct_shifts.push_back(shift);
    plan.tile_shift_index.push_back(int32_t(index - shift_base));
  }
  // Each tile's run end: walked backwards, a tile ends where the next tile's shift differs.
  const int first_tile = plan.seq_tile_offsets.back(), tile_count = int(plan.tiles.size()) - first_tile;
  plan.tile_run_end.resize(plan.tiles.size());
  for (int t = tile_count - 1; t >= 0; --t) {
    const bool last_of_run = t + 1 == tile_count ||
                             plan.tile_shift_index[first_tile + t + 1] != plan.tile_shift_index[first_tile + t];
    plan.tile_run_end[first_tile + t] = last_of_run ? t + 1 : plan.tile_run_end[first_tile + t + 1];
  }
  plan.seq_shift_offsets.push_back(int32_t(plan.distinct_shifts.size()));
  plan.seq_entry_offsets.push_back(int32_t(plan.entries.size()));
  plan.seq_tile_offsets.push_back(int32_t(plan.tiles.size()));
  plan.seq_total_keys.push_back(key);
  plan.max_entries = std::max(plan.max_entries, count);
}

int name_query_copies(KvEntry* entries, int count, std::vector<int32_t>& shifts) {
  const std::size_t first = shifts.size();
  int32_t index = 0;
  for (int i = 0; i < count; ++i) {
    if (i == 0 || entries[i].shift != entries[i - 1].shift) {  // documents are runs of one shift
      const auto at = std::find(shifts.begin() + std::ptrdiff_t(first), shifts.end(), entries[i].shift);
      index = int32_t(at - shifts.begin() - std::ptrdiff_t(first));
      if (at == shifts.end()) shifts.push_back(entries[i].shift);
    }
    entries[i].key_start = index;
  }
  return int(shifts.size() - first);
}

void name_query_copies(AttentionPlan& plan) {
  std::vector<int32_t> shifts;
  for (std::size_t s = 0; s + 1 < plan.seq_entry_offsets.size(); ++s) {
    shifts.clear();
    const int first = plan.seq_entry_offsets[s];
    name_query_copies(plan.entries.data() + first, plan.seq_entry_offsets[s + 1] - first, shifts);
  }
}

std::vector<int32_t> lazy_split_ranges(const AttentionPlan& plan, int seq, int splits) {
  const int first = plan.seq_tile_offsets[seq], last = plan.seq_tile_offsets[seq + 1];
  const int total = last - first;
  std::vector<int32_t> ranges;
  for (int begin = 0; begin < total;) {
    int end = begin;
    while (end < total && plan.tile_shift_index[first + end] == plan.tile_shift_index[first + begin]) ++end;
    // Pieces in proportion to the run's share of the tiles, at least one.
    const int length = end - begin;
    const int pieces = std::max(1, std::min(length, int(double(splits) * length / total + 0.5)));
    for (int i = 0; i < pieces; ++i) {
      ranges.push_back(begin + int(int64_t(length) * i / pieces));
      ranges.push_back(begin + int(int64_t(length) * (i + 1) / pieces));
    }
    begin = end;
  }
  return ranges;
}

int device_sm_count() {
  int device = 0;
  LAZYSCOPE_CUDA_CHECK(cudaGetDevice(&device));
  int count = 0;
  LAZYSCOPE_CUDA_CHECK(cudaDeviceGetAttribute(&count, cudaDevAttrMultiProcessorCount, device));
  return count;
}

}  // namespace lazyscope::cuda

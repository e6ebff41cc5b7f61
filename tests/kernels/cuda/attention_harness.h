#pragma once
// Shared pieces of the GPU attention-kernel tests: block tables of documents, the CPU reference
// calls (kernels/cpu/attention) and the device side of a prefill plan.
#include <algorithm>
#include <utility>
#include <vector>

#include "gpu_test_util.h"
#include "kernels/backend.h"
#include "kernels/cpu/attention.h"
#include "kernels/cuda/attention.h"
#include "kernels/rope.h"

namespace lazyscope::cuda::test {

// The sizes of one attention call.
struct AttentionShape {
  int head_dim = 64;
  int num_heads = 8;
  int num_kv_heads = 2;
  int block_size = 16;
};

// Appends a document of `tokens` keys at `shift` to `table`, in blocks next_block, next_block + 1,
// ... (the last one partial); returns the document's entries.
inline std::vector<BlockRef> add_document(std::vector<BlockRef>& table, int& next_block, int tokens, int shift,
                                          int block_size) {
  std::vector<BlockRef> doc;
  for (int t = 0; t < tokens; t += block_size) doc.push_back(BlockRef{next_block++, shift, std::min(block_size, tokens - t)});
  table.insert(table.end(), doc.begin(), doc.end());
  return doc;
}

inline std::vector<float> round_to_bf16(std::vector<float> values) {
  for (float& v : values) v = bf16_to_float(float_to_bf16(v));
  return values;
}

// The CPU reference for positions.size() queries q [n, num_heads, head_dim] against `table`.
inline std::vector<float> cpu_paged_attention(const AttentionShape& s, const std::vector<float>& k_pool,
                                              const std::vector<float>& v_pool, const std::vector<BlockRef>& table,
                                              const std::vector<float>& q, const std::vector<int32_t>& positions,
                                              const std::vector<float>& inv_freq, bool lazy) {
  const int n = int(positions.size());
  std::vector<float> out(std::size_t(n) * s.num_heads * s.head_dim);
  cpu::PagedAttentionParams p;
  p.q = q.data();
  p.q_positions = positions.data();
  p.k_pool = k_pool.data();
  p.v_pool = v_pool.data();
  p.table = table.data();
  p.table_len = int(table.size());
  p.n = n;
  p.num_heads = s.num_heads;
  p.num_kv_heads = s.num_kv_heads;
  p.head_dim = s.head_dim;
  p.block_size = s.block_size;
  p.inv_freq = inv_freq.data();
  p.lazy = lazy;
  p.out = out.data();
  cpu::paged_attention(p, 4);
  return out;
}

// The CPU reference's KV write of positions.size() new tokens (k, v [n, num_kv_heads, head_dim]).
inline void cpu_kv_write(const AttentionShape& s, const std::vector<float>& k, const std::vector<float>& v,
                         const std::vector<int32_t>& positions, const std::vector<int32_t>& slots,
                         const std::vector<float>& inv_freq, std::vector<float>& k_pool, std::vector<float>& v_pool) {
  cpu::KvWriteParams p;
  p.k = k.data();
  p.v = v.data();
  p.positions = positions.data();
  p.slots = slots.data();
  p.n = int(positions.size());
  p.num_kv_heads = s.num_kv_heads;
  p.head_dim = s.head_dim;
  p.block_size = s.block_size;
  p.inv_freq = inv_freq.data();
  p.k_pool = k_pool.data();
  p.v_pool = v_pool.data();
  cpu::kv_write(p);
}

// Queries rotated at their positions and rounded to bf16: what the plain kernels take (RoPE at
// write time).
inline std::vector<float> rotated_queries(std::vector<float> q, const std::vector<int32_t>& positions, int num_heads,
                                          int head_dim, const std::vector<float>& inv_freq) {
  for (std::size_t t = 0; t < positions.size(); ++t) {
    for (int h = 0; h < num_heads; ++h) {
      rope_rotate(q.data() + (t * num_heads + h) * head_dim, head_dim, inv_freq.data(), positions[t]);
    }
  }
  return round_to_bf16(std::move(q));
}

// A one-sequence prefill plan uploaded to the device.
struct DevicePrefillPlan {
  DeviceBuffer entries, tiles, shifts, tile_shift_index, tile_run_end, positions, inv_freq;
  int num_tiles = 0, num_shifts = 0, total_keys = 0;

  DevicePrefillPlan(const AttentionPlan& plan, const std::vector<int32_t>& query_positions,
                    const std::vector<float>& frequencies)
      : entries(upload(plan.entries)),
        tiles(upload(plan.tiles)),
        shifts(upload(plan.distinct_shifts)),
        tile_shift_index(upload(plan.tile_shift_index)),
        tile_run_end(upload(plan.tile_run_end)),
        positions(upload(query_positions)),
        inv_freq(upload(frequencies)),
        num_tiles(int(plan.tiles.size())),
        num_shifts(int(plan.distinct_shifts.size())),
        total_keys(plan.seq_total_keys.at(0)) {}

  // PrefillParams with the plan's pointers and every size filled in; q, the pools, the output,
  // the splits and their workspace (and, lazy, q_rotated and split_ranges) are the test's.
  PrefillParams params(const AttentionShape& s, int n, bool lazy) const {
    PrefillParams p;
    p.q_row_stride = int64_t(s.num_heads) * s.head_dim;
    p.q_positions = positions.as<int32_t>();
    p.entries = entries.as<KvEntry>();
    p.tiles = tiles.as<KvTile>();
    p.num_tiles = num_tiles;
    p.n = n;
    p.prior = total_keys - n;
    p.num_heads = s.num_heads;
    p.num_kv_heads = s.num_kv_heads;
    p.head_dim = s.head_dim;
    p.block_size = s.block_size;
    p.inv_freq = inv_freq.as<float>();
    p.lazy = lazy;
    p.shifts = shifts.as<int32_t>();
    p.tile_shift_index = tile_shift_index.as<int32_t>();
    p.tile_run_end = tile_run_end.as<int32_t>();
    p.num_shifts = num_shifts;
    return p;
  }
};

// Split workspace of a decode or prefill call: rows = queries x heads.
struct SplitWorkspace {
  DeviceBuffer partial_o, partial_ml;
  SplitWorkspace(int rows, int splits, int head_dim)
      : partial_o(split_partial_o_floats(rows, splits, head_dim) * 4),
        partial_ml(split_partial_ml_floats(rows, splits) * 4) {}
};

// A bf16 output buffer of `count` values poisoned with NaN, so an unwritten value fails the comparison.
inline DeviceBuffer poisoned_output(std::size_t count) {
  DeviceBuffer out(count * 2);
  LAZYSCOPE_CUDA_CHECK(cudaMemset(out.as<void>(), 0xff, count * 2));
  return out;
}

}  // namespace lazyscope::cuda::test

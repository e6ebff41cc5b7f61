// Prompt steps (n > 1 new tokens of one sequence): GEMMs through cuBLAS, RoPE-at-write KV store
// (lazy: the query rotated once per distinct shift by the same launch), paged prefill attention.
#include <cstring>
#include <vector>

#include "kernels/cuda/attention_plan.h"
#include "kernels/cuda/check.h"
#include "kernels/cuda/cuda_backend.h"
#include "kernels/cuda/ops.h"

namespace lazyscope::cuda {
namespace {

// Appends `count` items to a byte buffer at a 16-byte boundary; returns their offset.
template <typename T>
std::size_t append_aligned(std::vector<unsigned char>& bytes, const T* items, std::size_t count) {
  std::size_t offset = (bytes.size() + 15) / 16 * 16;
  bytes.resize(offset + count * sizeof(T));
  if (count > 0) std::memcpy(bytes.data() + offset, items, count * sizeof(T));
  return offset;
}

}  // namespace

void CudaBackend::run_prefill(const ForwardStep& step, int total_keys, StepOutput output) {
  const int n = int(step.tokens.size());
  AttentionPlan plan;
  append_sequence(plan, step.table, block_size_, step.lazy_rotation);

  const int H = shape_.hidden_size, I = shape_.intermediate_size, Q = shape_.q_dim(), K = shape_.kv_dim();
  const int D = shape_.head_dim;
  PrefillParams kernel_choice;
  kernel_choice.head_dim = D;
  kernel_choice.kernel = tuning_.prefill_wgmma ? PrefillParams::Kernel::Auto : PrefillParams::Kernel::MmaSync;
  const int splits = prefill_num_splits(n, shape_.num_heads, shape_.num_kv_heads, int(plan.tiles.size()), sm_count_,
                                        kernel_choice);
  // Lazy prefill splits follow the shift runs (see lazy_split_ranges), but for the kernel that
  // splits lazy calls evenly.
  std::vector<int32_t> ranges;
  int num_splits = splits;
  if (step.lazy_rotation) {
    ranges = lazy_split_ranges(plan, 0, splits);
    if (prefill_splits_follow_shift_runs(kernel_choice)) num_splits = int(ranges.size() / 2);
  }
  ensure_workspace(n, n * shape_.num_heads * num_splits, 1);

  // One upload per step: tokens, positions, slots, entries, tiles.
  host_meta_.clear();
  const std::size_t tokens_at = append_aligned(host_meta_, step.tokens.data(), n);
  const std::size_t positions_at = append_aligned(host_meta_, step.positions.data(), n);
  const std::size_t slots_at = append_aligned(host_meta_, step.slots.data(), n);
  const std::size_t entries_at = append_aligned(host_meta_, plan.entries.data(), plan.entries.size());
  const std::size_t tiles_at = append_aligned(host_meta_, plan.tiles.data(), plan.tiles.size());
  const std::size_t shifts_at = append_aligned(host_meta_, plan.distinct_shifts.data(), plan.distinct_shifts.size());
  const std::size_t tile_shift_at =
      append_aligned(host_meta_, plan.tile_shift_index.data(), plan.tile_shift_index.size());
  const std::size_t run_end_at = append_aligned(host_meta_, plan.tile_run_end.data(), plan.tile_run_end.size());
  const std::size_t ranges_at = append_aligned(host_meta_, ranges.data(), ranges.size());
  const int num_shifts = int(plan.distinct_shifts.size());
  if (step.lazy_rotation) {
    q_rotated_.reserve(lazy_query_workspace_elements(n, shape_.num_heads, shape_.head_dim, num_shifts) * 2);
  }
  std::memcpy(stage_meta(host_meta_.size()), host_meta_.data(), host_meta_.size());
  upload_meta(host_meta_.size());
  unsigned char* meta = step_meta_.as<unsigned char>();
  const int32_t* d_tokens = reinterpret_cast<const int32_t*>(meta + tokens_at);
  const int32_t* d_positions = reinterpret_cast<const int32_t*>(meta + positions_at);
  const int32_t* d_slots = reinterpret_cast<const int32_t*>(meta + slots_at);
  const KvEntry* d_entries = reinterpret_cast<const KvEntry*>(meta + entries_at);
  const KvTile* d_tiles = reinterpret_cast<const KvTile*>(meta + tiles_at);
  const int32_t* d_shifts = reinterpret_cast<const int32_t*>(meta + shifts_at);
  const int32_t* d_tile_shift = reinterpret_cast<const int32_t*>(meta + tile_shift_at);
  const int32_t* d_run_end = reinterpret_cast<const int32_t*>(meta + run_end_at);
  const int32_t* d_ranges = reinterpret_cast<const int32_t*>(meta + ranges_at);

  float* x = x_.as<float>();
  bf16_bits* h = h_.as<bf16_bits>();
  bf16_bits* qkv = qkv_.as<bf16_bits>();
  bf16_bits* attn = attn_.as<bf16_bits>();
  const int64_t qkv_stride = Q + 2 * K;
  embed_tokens(d_tokens, n, x);
  for (int l = 0; l < shape_.num_layers; ++l) {
    const LayerWeights& w = layers_[l];
    // The last layer writes every token's K/V, but only the last token's output is read (its
    // logits; none for an encode without output): attention, wo and the MLP run for that row alone.
    const bool last_layer = l + 1 == shape_.num_layers;
    const int rows = last_layer ? (output == StepOutput::None ? 0 : 1) : n;
    const int first = n - rows;
    bf16_bits* k_pool = k_pool_.as<bf16_bits>() + l * layer_pool_elements();
    bf16_bits* v_pool = v_pool_.as<bf16_bits>() + l * layer_pool_elements();
    rmsnorm(x, w.attn_norm.as<float>(), n, H, shape_.rms_norm_eps, h, stream_);
    gemm(h, w.wqkv.as<bf16_bits>(), n, Q + 2 * K, H, qkv, false, false);
    KvWriteParams kw;
    kw.k = qkv + Q;
    kw.v = qkv + Q + K;
    kw.row_stride = qkv_stride;
    // Plain attention wants q rotated at its position (in place); lazy wants it rotated once per
    // distinct shift into q_rotated, done by the same KV-write launch (no separate pre-pass).
    kw.q = qkv;
    kw.q_row_stride = qkv_stride;
    const bool fused_rotation = step.lazy_rotation && rows == n;  // else the attention's pre-pass, for its rows
    if (step.lazy_rotation && !fused_rotation) kw.q = nullptr;  // left raw for the pre-pass
    if (fused_rotation) {
      kw.shifts = d_shifts;
      kw.num_shifts = num_shifts;
      kw.q_rotated = q_rotated_.as<bf16_bits>();
    }
    kw.num_heads = shape_.num_heads;
    kw.positions = d_positions;
    kw.slots = d_slots;
    kw.n = n;
    kw.num_kv_heads = shape_.num_kv_heads;
    kw.head_dim = D;
    kw.block_size = block_size_;
    kw.inv_freq = inv_freq_.as<float>();
    kw.k_pool = k_pool;
    kw.v_pool = v_pool;
    kv_write(kw, stream_);
    if (rows == 0) break;
    PrefillParams ap;
    ap.q = qkv + first * qkv_stride;
    ap.q_row_stride = qkv_stride;
    ap.q_positions = d_positions + first;
    ap.k_pool = k_pool;
    ap.v_pool = v_pool;
    ap.entries = d_entries;
    ap.tiles = d_tiles;
    ap.num_tiles = int(plan.tiles.size());
    ap.n = rows;
    ap.prior = total_keys - rows;
    ap.num_heads = shape_.num_heads;
    ap.num_kv_heads = shape_.num_kv_heads;
    ap.head_dim = D;
    ap.block_size = block_size_;
    ap.inv_freq = inv_freq_.as<float>();
    ap.lazy = step.lazy_rotation;
    ap.shifts = d_shifts;
    ap.tile_shift_index = d_tile_shift;
    ap.tile_run_end = d_run_end;
    ap.num_shifts = num_shifts;
    ap.q_rotated = step.lazy_rotation ? q_rotated_.as<bf16_bits>() : nullptr;
    ap.split_ranges = step.lazy_rotation ? d_ranges : nullptr;
    ap.q_rotated_ready = fused_rotation;  // filled by kv_write above
    ap.kernel = kernel_choice.kernel;
    ap.persistent = tuning_.prefill_persistent;
    ap.out = attn;
    ap.num_splits = num_splits;
    ap.partial_o = partial_o_.as<float>();
    ap.partial_ml = partial_ml_.as<float>();
    prefill_attention(ap, stream_);
    float* x_rows = x + int64_t(first) * H;
    gemm(attn, w.wo.as<bf16_bits>(), rows, H, Q, x_rows, true, owns_residual());  // x += attn @ wo^T
    reduce_residual(x_rows, rows);
    rmsnorm(x_rows, w.mlp_norm.as<float>(), rows, H, shape_.rms_norm_eps, h, stream_);
    gemm(h, w.w_gate_up.as<bf16_bits>(), rows, 2 * I, H, gate_up_.as<bf16_bits>(), false, false);
    swiglu(gate_up_.as<bf16_bits>(), rows, I, act_.as<bf16_bits>(), stream_);
    gemm(act_.as<bf16_bits>(), w.w_down.as<bf16_bits>(), rows, H, I, x_rows, true, owns_residual());  // x += mlp
    reduce_residual(x_rows, rows);
  }
  enqueue_head(x + int64_t(n - 1) * H, 1, output);  // the last new token's logits
}

}  // namespace lazyscope::cuda

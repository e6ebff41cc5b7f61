// One-token steps: a single sequence and a batch of sequences (continuous batching: the GEMMs over
// N rows, one decode-attention launch, each sequence with its own block table and shifts), each
// in a metadata layout fixed by the batch size and replayed from CUDA graphs.
#include <algorithm>
#include <cstring>
#include <span>
#include <string>
#include <vector>

#include "base/error.h"
#include "kernels/cuda/attention_plan.h"
#include "kernels/cuda/check.h"
#include "kernels/cuda/cuda_backend.h"
#include "kernels/cuda/decode_layer.h"
#include "kernels/cuda/ops.h"
#include "kernels/cuda/tool_switches.h"

namespace lazyscope::cuda {
namespace {

// Fixed single-sequence decode metadata layout, so a graph's kernels find every per-step value at
// one address: [0] token, [4] position, [8] slot, [16] entry offsets {0, count}, [24] shift offsets
// {0, shifts}, [32] the shifts (lazy query copies; a region of the graph's shift capacity), then
// the entries.
constexpr std::size_t kDecodeTokenAt = 0, kDecodePositionAt = 4, kDecodeSlotAt = 8, kDecodeOffsetsAt = 16,
                      kDecodeShiftOffsetsAt = 24, kDecodeShiftsAt = 32;

constexpr std::size_t align16(std::size_t bytes) { return (bytes + 15) / 16 * 16; }

// Runs of one shift in a table: at least its distinct shifts.
int shift_runs(std::span<const BlockRef> table) {
  int runs = 0;
  for (std::size_t i = 0; i < table.size(); ++i) runs += i == 0 || table[i].shift != table[i - 1].shift;
  return runs;
}

// Room for `count` values, rounded up to a power of two (>= 16): graphs are keyed by it, so few
// distinct capacities mean few captures.
int shift_capacity(std::size_t count) {
  int capacity = 16;
  while (std::size_t(capacity) < count) capacity *= 2;
  return capacity;
}

}  // namespace

int CudaBackend::decode_splits(int batch, int max_entries) const {
  const int splits = decode_num_splits(batch, shape_.num_kv_heads, max_entries, sm_count_);
  return tuning_.decode_splits_cap > 0 ? std::min(splits, tuning_.decode_splits_cap) : splits;
}

void CudaBackend::ensure_query_copies(int batch, int copies_per_seq) {
  const std::size_t bytes = std::size_t(copies_per_seq) * batch * shape_.q_dim() * sizeof(bf16_bits);
  if (bytes > decode_q_copies_.bytes()) {
    LAZYSCOPE_CUDA_CHECK(cudaStreamSynchronize(stream_));  // earlier steps may still read the old buffer
    invalidate_graphs();
    decode_q_copies_.resize(bytes);
  }
}

void CudaBackend::run_decode(const ForwardStep& step, StepOutput output) {
  const int count = int(step.table.size());
  const int splits = decode_splits(1, count);
  ensure_workspace(1, shape_.num_heads * splits, 1);
  std::vector<int32_t>& shifts = decode_shifts_;
  shifts.clear();
  const bool copies = step.lazy_rotation && tuning_.decode_query_copies;
  // The shift region's capacity, known before the entries (which follow it) are placed.
  const int capacity = copies ? shift_capacity(std::size_t(shift_runs(step.table))) : 0;
  if (copies) ensure_query_copies(1, capacity);
  const std::size_t entries_at = kDecodeShiftsAt + std::size_t(capacity) * sizeof(int32_t);
  const std::size_t bytes = entries_at + std::size_t(count) * sizeof(KvEntry);
  unsigned char* meta = stage_meta(bytes);
  std::memset(meta, 0, kDecodeShiftsAt);
  std::memcpy(meta + kDecodeTokenAt, step.tokens.data(), 4);
  std::memcpy(meta + kDecodePositionAt, step.positions.data(), 4);
  std::memcpy(meta + kDecodeSlotAt, step.slots.data(), 4);
  KvEntry* entries = reinterpret_cast<KvEntry*>(meta + entries_at);
  write_kv_entries(step.table, entries);
  const int num_shifts = copies ? name_query_copies(entries, count, shifts) : 0;
  const int32_t offsets[2] = {0, count}, shift_offsets[2] = {0, num_shifts};
  std::memcpy(meta + kDecodeOffsetsAt, offsets, sizeof(offsets));
  std::memcpy(meta + kDecodeShiftOffsetsAt, shift_offsets, sizeof(shift_offsets));
  if (num_shifts > 0) std::memcpy(meta + kDecodeShiftsAt, shifts.data(), shifts.size() * sizeof(int32_t));
  upload_meta(bytes);
  const unsigned char* device_meta = step_meta_.as<unsigned char>();
  DecodeMeta where;
  where.tokens = reinterpret_cast<const int32_t*>(device_meta + kDecodeTokenAt);
  where.positions = reinterpret_cast<const int32_t*>(device_meta + kDecodePositionAt);
  where.slots = reinterpret_cast<const int32_t*>(device_meta + kDecodeSlotAt);
  where.offsets = reinterpret_cast<const int32_t*>(device_meta + kDecodeOffsetsAt);
  where.entries = reinterpret_cast<const KvEntry*>(device_meta + entries_at);
  where.shift_offsets = reinterpret_cast<const int32_t*>(device_meta + kDecodeShiftOffsetsAt);
  where.shifts = reinterpret_cast<const int32_t*>(device_meta + kDecodeShiftsAt);
  where.shift_capacity = capacity;
  where.copies_per_seq = capacity;

  launch_decode(where, 1, splits, step.lazy_rotation, count, output);
}

void CudaBackend::launch_decode(const DecodeMeta& meta, int batch, int splits, bool lazy, int max_entries,
                                StepOutput output) {
  // At batch 1 every GEMM must take the GEMV path to be captured (widths % 8); at batch > 1
  // cuBLAS is captured with the choices it makes for that shape on the stream.
  if (!tuning_.graphs || tool_switches().no_graphs || (batch == 1 && !gemv_ok_) || eager_next_decode_) {
    eager_next_decode_ = false;
    enqueue_decode(meta, batch, splits, lazy, max_entries, output);
    return;
  }
  const auto key_of_graph = std::make_tuple(batch, splits, lazy, int(output), meta.shift_capacity, meta.copies_per_seq);
  auto found = graphs_.find(key_of_graph);
  if (found == graphs_.end()) {
    // Continuous batching meets many batch sizes: keep the cache bounded (recaptured on demand).
    constexpr std::size_t kMaxGraphs = 64;
    if (graphs_.size() >= kMaxGraphs) invalidate_graphs();
    cudaGraph_t graph = nullptr;
    LAZYSCOPE_CUDA_CHECK(cudaStreamBeginCapture(stream_, cudaStreamCaptureModeThreadLocal));
    try {
      enqueue_decode(meta, batch, splits, lazy, max_entries, output);
    } catch (...) {
      cudaGraph_t partial = nullptr;
      cudaStreamEndCapture(stream_, &partial);
      if (partial != nullptr) cudaGraphDestroy(partial);
      cudaGetLastError();
      throw;
    }
    LAZYSCOPE_CUDA_CHECK(cudaStreamEndCapture(stream_, &graph));
    cudaGraphExec_t exec = nullptr;
    const cudaError_t status = cudaGraphInstantiate(&exec, graph, 0);
    cudaGraphDestroy(graph);
    LAZYSCOPE_CUDA_CHECK(status);
    found = graphs_.emplace(key_of_graph, exec).first;
    ++graph_captures_;
  }
  LAZYSCOPE_CUDA_CHECK(cudaGraphLaunch(found->second, stream_));
  ++graph_replays_;
}

// A batch that holds any lazy step runs lazy attention for all: a plain step's entries are
// unshifted (validate_step), and rotating its query by (position − 0) is plain attention.
void CudaBackend::run_decode_batch(std::span<const ForwardStep> steps, StepOutput output) {
  const int batch = int(steps.size());
  if (batch == 1) {
    run_decode(steps[0], output);
    return;
  }
  bool lazy = false;
  std::size_t total_entries = 0;
  int max_entries = 0;
  for (const ForwardStep& step : steps) {
    lazy = lazy || step.lazy_rotation;
    total_entries += step.table.size();
    max_entries = std::max(max_entries, int(step.table.size()));
  }
  const int splits = decode_splits(batch, max_entries);
  ensure_workspace(batch, batch * shape_.num_heads * splits, batch);
  // Lazy with query copies: every sequence's distinct shifts, concatenated.
  const bool copies = lazy && tuning_.decode_query_copies;
  std::vector<int32_t>& shifts = decode_shifts_;
  shifts.clear();
  std::vector<int32_t> shift_offsets(batch + 1, 0);
  // Room for the shifts before the entries are placed: a sequence has at most one a shift run.
  int total_runs = 0, most_runs = 0;
  for (int i = 0; copies && i < batch; ++i) {
    const int runs = shift_runs(steps[i].table);
    total_runs += runs;
    most_runs = std::max(most_runs, runs);
  }
  const int capacity = copies ? shift_capacity(std::size_t(total_runs)) : 0;
  const int copies_per_seq = copies ? shift_capacity(std::size_t(most_runs)) : 0;
  if (copies) ensure_query_copies(batch, copies_per_seq);
  // [tokens][positions][slots][entry offsets, batch + 1][shift offsets, batch + 1][shifts, capacity]
  // [entries], each at a 16-byte boundary: where each part starts depends on the batch size and the
  // shift capacity alone (a graph's addresses).
  const std::size_t tokens_at = 0;
  const std::size_t positions_at = align16(tokens_at + batch * sizeof(int32_t));
  const std::size_t slots_at = align16(positions_at + batch * sizeof(int32_t));
  const std::size_t offsets_at = align16(slots_at + batch * sizeof(int32_t));
  const std::size_t shift_offsets_at = align16(offsets_at + (batch + 1) * sizeof(int32_t));
  const std::size_t shifts_at = align16(shift_offsets_at + (batch + 1) * sizeof(int32_t));
  const std::size_t entries_at = align16(shifts_at + std::size_t(capacity) * sizeof(int32_t));
  const std::size_t bytes = entries_at + total_entries * sizeof(KvEntry);
  unsigned char* meta = stage_meta(bytes);
  int32_t* tokens = reinterpret_cast<int32_t*>(meta + tokens_at);
  int32_t* positions = reinterpret_cast<int32_t*>(meta + positions_at);
  int32_t* slots = reinterpret_cast<int32_t*>(meta + slots_at);
  int32_t* offsets = reinterpret_cast<int32_t*>(meta + offsets_at);
  KvEntry* entries = reinterpret_cast<KvEntry*>(meta + entries_at);
  int32_t entry = 0;
  for (int i = 0; i < batch; ++i) {
    tokens[i] = steps[i].tokens[0];
    positions[i] = steps[i].positions[0];
    slots[i] = steps[i].slots[0];
    offsets[i] = entry;
    write_kv_entries(steps[i].table, entries + entry);
    if (copies) {
      name_query_copies(entries + entry, int(steps[i].table.size()), shifts);
      shift_offsets[i + 1] = int32_t(shifts.size());
    }
    entry += int32_t(steps[i].table.size());
  }
  offsets[batch] = entry;
  std::memcpy(meta + shift_offsets_at, shift_offsets.data(), shift_offsets.size() * sizeof(int32_t));
  if (!shifts.empty()) std::memcpy(meta + shifts_at, shifts.data(), shifts.size() * sizeof(int32_t));
  upload_meta(bytes);
  const unsigned char* device_meta = step_meta_.as<unsigned char>();
  DecodeMeta where;
  where.tokens = reinterpret_cast<const int32_t*>(device_meta + tokens_at);
  where.positions = reinterpret_cast<const int32_t*>(device_meta + positions_at);
  where.slots = reinterpret_cast<const int32_t*>(device_meta + slots_at);
  where.offsets = reinterpret_cast<const int32_t*>(device_meta + offsets_at);
  where.entries = reinterpret_cast<const KvEntry*>(device_meta + entries_at);
  where.shift_offsets = reinterpret_cast<const int32_t*>(device_meta + shift_offsets_at);
  where.shifts = reinterpret_cast<const int32_t*>(device_meta + shifts_at);
  where.shift_capacity = capacity;
  where.copies_per_seq = copies_per_seq;
  launch_decode(where, batch, splits, lazy, max_entries, output);
}

void CudaBackend::enqueue_decode(const DecodeMeta& meta, int batch, int splits, bool lazy, int max_entries,
                                 StepOutput output) {
  const int H = shape_.hidden_size, I = shape_.intermediate_size, Q = shape_.q_dim(), K = shape_.kv_dim();
  const int D = shape_.head_dim;
  float* x = x_.as<float>();
  bf16_bits* h = h_.as<bf16_bits>();
  bf16_bits* qkv = qkv_.as<bf16_bits>();
  bf16_bits* attn = attn_.as<bf16_bits>();
  const int64_t qkv_stride = Q + 2 * K;
  const bool copies = lazy && meta.copies_per_seq > 0;  // the query rotated once per shift, before attention
  // The folded GEMVs take one input row: a batch runs the separate ops and cuBLAS GEMMs.
  const bool fused = tuning_.fused_decode && gemv_ok_ && batch == 1;
  // Batch 1: after layer 0's wqkv GEMV, each layer's persistent kernel also computes the next
  // layer's q / K / V, so only attention launches between them.
  const bool layer_kernel = fused && decode_layer_ok_;
  auto qkv_output = [&](int l) {
    QkvRopeOutput qo;
    qo.q = qkv;
    qo.k_pool = k_pool_.as<bf16_bits>() + l * layer_pool_elements();
    qo.v_pool = v_pool_.as<bf16_bits>() + l * layer_pool_elements();
    qo.positions = meta.positions;
    qo.slots = meta.slots;
    qo.inv_freq = inv_freq_.as<float>();
    qo.q_dim = Q;
    qo.kv_dim = K;
    qo.head_dim = D;
    qo.num_kv_heads = shape_.num_kv_heads;
    qo.block_size = block_size_;
    qo.rotate_q = !lazy;
    if (copies) {
      qo.q_rotated = decode_q_copies_.as<bf16_bits>();
      qo.shifts = meta.shifts;
      qo.shift_offsets = meta.shift_offsets;
    }
    return qo;
  };
  embed_tokens(meta.tokens, batch, x);
  for (int l = 0; l < shape_.num_layers; ++l) {
    const LayerWeights& w = layers_[l];
    bf16_bits* k_pool = k_pool_.as<bf16_bits>() + l * layer_pool_elements();
    bf16_bits* v_pool = v_pool_.as<bf16_bits>() + l * layer_pool_elements();
    bool kv_written = layer_kernel && l > 0;  // by the previous layer's kernel
    if (!kv_written && fused && tuning_.fused_kv_write) {
      kv_written = gemv_rmsnorm_qkv_rope(x, w.attn_norm.as<float>(), shape_.rms_norm_eps, w.wqkv.as<bf16_bits>(), H,
                                         qkv_output(l), stream_, gemv_);
    }
    if (!kv_written && fused) {
      gemv_rmsnorm_bf16(x, w.attn_norm.as<float>(), shape_.rms_norm_eps, w.wqkv.as<bf16_bits>(), Q + 2 * K, H, qkv,
                        false, false, stream_, gemv_, h);
    } else if (!kv_written) {
      rmsnorm(x, w.attn_norm.as<float>(), batch, H, shape_.rms_norm_eps, h, stream_);
      gemm(h, w.wqkv.as<bf16_bits>(), batch, Q + 2 * K, H, qkv, false, false);
    }
    if (!kv_written) {
      KvWriteParams kw;
      kw.k = qkv + Q;
      kw.v = qkv + Q + K;
      kw.row_stride = qkv_stride;
      kw.q = lazy && !copies ? nullptr : qkv;  // plain attention wants q rotated at its position
      kw.q_row_stride = qkv_stride;
      if (copies) {
        kw.q_rotated = decode_q_copies_.as<bf16_bits>();
        kw.shifts = meta.shifts;
        kw.token_shift_offsets = meta.shift_offsets;
        kw.num_shifts = meta.copies_per_seq;
      }
      kw.num_heads = shape_.num_heads;
      kw.positions = meta.positions;
      kw.slots = meta.slots;
      kw.n = batch;
      kw.num_kv_heads = shape_.num_kv_heads;
      kw.head_dim = D;
      kw.block_size = block_size_;
      kw.inv_freq = inv_freq_.as<float>();
      kw.k_pool = k_pool;
      kw.v_pool = v_pool;
      kv_write(kw, stream_);
    }
    DecodeParams ap;
    ap.q = qkv;
    ap.q_row_stride = qkv_stride;
    ap.q_positions = meta.positions;
    ap.k_pool = k_pool;
    ap.v_pool = v_pool;
    ap.entries = meta.entries;
    ap.seq_entry_offsets = meta.offsets;
    ap.batch = batch;
    ap.max_entries = max_entries;  // host-side sizing only: the kernels read the tables from the offsets
    ap.num_heads = shape_.num_heads;
    ap.num_kv_heads = shape_.num_kv_heads;
    ap.head_dim = D;
    ap.block_size = block_size_;
    ap.inv_freq = inv_freq_.as<float>();
    ap.lazy = lazy;
    if (copies) ap.q_rotated = decode_q_copies_.as<bf16_bits>();
    ap.out = attn;
    ap.num_splits = splits;
    ap.partial_o = partial_o_.as<float>();
    ap.partial_ml = partial_ml_.as<float>();
    // The kernel before writes only this step's new keys, each in its sequence's last entry.
    ap.history_before_wait = tuning_.decode_kv_before_wait;
    // Past layer 0 the layer kernel before this attention prefetched these weights already.
    const bool layer_prefetched = layer_kernel && l > 0 && tuning_.decode_layer_l2_prefetch_kib > 0;
    if (batch == 1 && tuning_.attention_l2_prefetch_mib > 0 && !layer_prefetched) {
      // What the wo and gate_up GEMVs will read next, up to the budget, while this kernel waits on latency.
      std::size_t budget = std::size_t(tuning_.attention_l2_prefetch_mib) << 20;
      ap.l2_prefetch[0] = w.wo.as<bf16_bits>();
      ap.l2_prefetch_bytes[0] = std::min(budget, w.wo.bytes());
      budget -= ap.l2_prefetch_bytes[0];
      ap.l2_prefetch[1] = w.w_gate_up.as<bf16_bits>();
      ap.l2_prefetch_bytes[1] = std::min(budget, w.w_gate_up.bytes());
    }
    decode_attention(ap, stream_);
    if (layer_kernel) {
      DecodeLayerParams lp;
      lp.attn = attn;
      lp.x = x;
      lp.wo = w.wo.as<bf16_bits>();
      lp.mlp_norm = w.mlp_norm.as<float>();
      lp.w_gate_up = w.w_gate_up.as<bf16_bits>();
      lp.w_down = w.w_down.as<bf16_bits>();
      lp.act = act_.as<bf16_bits>();
      if (l + 1 < shape_.num_layers) {
        lp.next_attn_norm = layers_[l + 1].attn_norm.as<float>();
        lp.next_wqkv = layers_[l + 1].wqkv.as<bf16_bits>();
        lp.next_qkv = qkv_output(l + 1);
        lp.next_wo = layers_[l + 1].wo.as<bf16_bits>();
        lp.next_gate_up = layers_[l + 1].w_gate_up.as<bf16_bits>();
        lp.l2_prefetch_bytes = tuning_.decode_layer_l2_prefetch_kib * 1024;
      }
      if (tuning_.decode_layer_dynamic_gate_up) lp.gate_up_claims = layer_sync_.as<unsigned>() + 2;
      lp.hidden = H;
      lp.inter = I;
      lp.q_dim = Q;
      lp.eps = shape_.rms_norm_eps;
      lp.grid_sync = layer_sync_.as<unsigned long long>();
      DecodeLayerLaunch launch;
      launch.stages = tuning_.decode_layer_stages;
      launch.programmatic = tuning_.programmatic_gemv;
      decode_layer(lp, launch, stream_);
      continue;
    }
    gemm(attn, w.wo.as<bf16_bits>(), batch, H, Q, x, true, owns_residual());  // x += attn @ wo^T
    reduce_residual(x, batch);
    if (fused && tuning_.swiglu_in_gate_up &&
        gemv_rmsnorm_gate_up_swiglu(x, w.mlp_norm.as<float>(), shape_.rms_norm_eps, w.w_gate_up.as<bf16_bits>(), I,
                                    H, act_.as<bf16_bits>(), stream_, gemv_)) {
      gemv_bf16(act_.as<bf16_bits>(), w.w_down.as<bf16_bits>(), H, I, x, true, owns_residual(), stream_,
                gemv_);  // x += mlp
      reduce_residual(x, batch);
      continue;
    }
    if (fused) {
      gemv_rmsnorm_bf16(x, w.mlp_norm.as<float>(), shape_.rms_norm_eps, w.w_gate_up.as<bf16_bits>(), 2 * I, H,
                        gate_up_.as<bf16_bits>(), false, false, stream_, gemv_, h);
      gemv_swiglu_bf16(gate_up_.as<bf16_bits>(), w.w_down.as<bf16_bits>(), H, I, x, true, owns_residual(), stream_,
                       gemv_, act_.as<bf16_bits>());  // x += mlp
      reduce_residual(x, batch);
      continue;
    }
    rmsnorm(x, w.mlp_norm.as<float>(), batch, H, shape_.rms_norm_eps, h, stream_);
    gemm(h, w.w_gate_up.as<bf16_bits>(), batch, 2 * I, H, gate_up_.as<bf16_bits>(), false, false);
    swiglu(gate_up_.as<bf16_bits>(), batch, I, act_.as<bf16_bits>(), stream_);
    gemm(act_.as<bf16_bits>(), w.w_down.as<bf16_bits>(), batch, H, I, x, true, owns_residual());  // x += mlp
    reduce_residual(x, batch);
  }
  enqueue_head(x, batch, output);
}

}  // namespace lazyscope::cuda

#pragma once
// CUDA paged attention (lazy and plain), RoPE-at-write KV store and materialize.
// Kept C++17-clean (no kernels/backend.h): nvcc compiles the .cu files in C++17 mode.
// Launchers take a params struct of raw device pointers and sizes (FlashInfer style); the
// pool layout per layer is the CPU reference's: [num_blocks][num_kv_heads][block_size][head_dim],
// in bfloat16. Semantics match kernels/cpu/attention.h exactly.
#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <vector>

#include "kernels/cuda/bf16_host.h"

namespace lazyscope::cuda {

// One block-table entry as the kernels read it: a single 16-byte load carries everything.
struct alignas(16) KvEntry {
  int32_t block = 0;
  int32_t shift = 0;
  int32_t valid = 0;
  int32_t key_start = 0;  // flattened index of the entry's first key in its sequence (decode with
                          // query copies: the index of its shift's copy, DecodeParams::q_rotated)
};

// Prefill KV tile: consecutive entries sharing one shift, at most kPrefillTileKeys columns
// (entry j of the tile owns columns [j * block_size, (j + 1) * block_size)).
struct alignas(16) KvTile {
  int32_t entry_begin = 0;
  int32_t entry_count = 0;
  int32_t shift = 0;
  int32_t key_start = 0;
};

inline constexpr int kPrefillTileKeys = 64;

// Host-built description of one or more sequences' block tables, uploaded once per step and
// shared by every layer.
struct AttentionPlan {
  std::vector<KvEntry> entries;
  std::vector<KvTile> tiles;
  std::vector<int32_t> seq_entry_offsets{0};  // [batch + 1]
  std::vector<int32_t> seq_tile_offsets{0};   // [batch + 1]
  std::vector<int32_t> seq_total_keys;        // [batch]
  int max_entries = 0;                        // longest table in entries
  // Lazy prefill: each sequence's distinct shifts, and each tile's index into them.
  std::vector<int32_t> distinct_shifts;
  std::vector<int32_t> seq_shift_offsets{0};  // [batch + 1]
  std::vector<int32_t> tile_shift_index;      // parallel to tiles, sequence-local
  std::vector<int32_t> tile_run_end;          // parallel to tiles: the first tile after its shift run
};

// Appends one sequence given as (block, shift, valid) entries (key_start is filled in); throws
// Error on an invalid entry (valid outside 1..block_size, or a shift in a plain call) or a block
// size that does not divide kPrefillTileKeys.
void append_table(AttentionPlan& plan, const KvEntry* table, int count, int block_size, bool lazy);

// Decode with query copies (DecodeParams::q_rotated): sets the key_start of one sequence's entries
// [0, count) to the index of the entry's shift among the sequence's distinct shifts in first-seen
// order, appending those shifts to `shifts`; returns how many it appended.
int name_query_copies(KvEntry* entries, int count, std::vector<int32_t>& shifts);
// The same for every sequence of a plan (its distinct_shifts list them in the same order).
void name_query_copies(AttentionPlan& plan);

// Decode: one query per sequence; the query is the last key of its table, so every key is seen.
struct DecodeParams {
  const bf16_bits* q = nullptr;          // [batch] rows of q_row_stride; heads contiguous
  int64_t q_row_stride = 0;              // elements between sequences' queries
  const int32_t* q_positions = nullptr;  // [batch], used by the lazy variant
  const bf16_bits* k_pool = nullptr;     // one layer
  const bf16_bits* v_pool = nullptr;
  const KvEntry* entries = nullptr;
  const int32_t* seq_entry_offsets = nullptr;  // [batch + 1]
  int batch = 0;
  int max_entries = 0;
  int num_heads = 0;
  int num_kv_heads = 0;
  int head_dim = 0;                      // 16, 32, 64 or 128
  int block_size = 0;
  const float* inv_freq = nullptr;       // [head_dim / 2], device
  bool lazy = false;                     // q is raw and rotated by (m − δ) per shift run
  // Lazy, optional: the query already rotated by (m − δ) for every distinct shift of its sequence
  // (kv_write with token_shift_offsets, or the wqkv GEMV's epilogue), so the kernel rotates nothing.
  // Sequence s's copy j is the num_heads × head_dim row at q_rotated + (j * batch + s) * num_heads *
  // head_dim, and each entry's key_start holds instead the index j of its shift's copy.
  const bf16_bits* q_rotated = nullptr;
  bf16_bits* out = nullptr;              // [batch, num_heads, head_dim]
  int num_splits = 1;                    // > 1 needs the workspace below
  float* partial_o = nullptr;            // [batch * num_heads, num_splits, head_dim]
  float* partial_ml = nullptr;           // [batch * num_heads, num_splits, 2]
  // Optional, Hopper and newer: bytes later kernels will read (the next GEMVs' weights), bulk-
  // prefetched into L2 by the CTAs as they start, before they wait for the previous kernel: at
  // batch 1 this kernel is latency-bound and leaves DRAM idle. 16-byte aligned; sizes rounded down
  // to 16. Changes no result.
  const void* l2_prefetch[2] = {nullptr, nullptr};
  std::size_t l2_prefetch_bytes[2] = {0, 0};
  // The caller's promise that the kernel before this one in the stream writes no key of any
  // sequence's table outside its last entry (this step's new token, in a decode step), nor the
  // tables, positions or frequencies. Then, launched programmatically with a grid of one wave, the
  // CTAs copy those keys (and, lazy, their angle inputs) before they wait for that kernel, which at
  // batch 1 still streams its weights. Changes no result.
  bool history_before_wait = false;
};

int decode_num_splits(int batch, int num_kv_heads, int max_entries, int sm_count);
void decode_attention(const DecodeParams& p, cudaStream_t stream);
// The machine-code version (major * 10 + minor) of the decode kernel as the driver loaded it on
// the current device: the SASS it picked from the fat binary, or the device's own when it JIT-compiled PTX.
int decode_kernel_binary_version();

// Prefill: n new tokens of one sequence against every key of its table, causal among the new.
struct PrefillParams {
  const bf16_bits* q = nullptr;          // [n] rows of q_row_stride; heads contiguous
  int64_t q_row_stride = 0;
  const int32_t* q_positions = nullptr;  // [n]
  const bf16_bits* k_pool = nullptr;
  const bf16_bits* v_pool = nullptr;
  const KvEntry* entries = nullptr;      // this sequence's entries (plan.entries + offset)
  const KvTile* tiles = nullptr;         // this sequence's tiles; entry_begin indexes `entries`
  int num_tiles = 0;
  int n = 0;
  int prior = 0;                         // keys before the first new token
  int num_heads = 0;
  int num_kv_heads = 0;
  int head_dim = 0;
  int block_size = 0;
  const float* inv_freq = nullptr;
  bool lazy = false;
  // Lazy: the query rotated once per distinct shift by a pre-pass into q_rotated
  // [num_shifts][n][num_heads * head_dim]; tiles pick theirs through tile_shift_index.
  const int32_t* shifts = nullptr;            // [num_shifts], device
  const int32_t* tile_shift_index = nullptr;  // [num_tiles], device
  const int32_t* tile_run_end = nullptr;      // [num_tiles], device (AttentionPlan::tile_run_end); read
                                              // by the warp-specialised kernel, whose ranges cross runs
  int num_shifts = 0;
  bf16_bits* q_rotated = nullptr;             // workspace, lazy_query_workspace_elements()
  const int32_t* split_ranges = nullptr;      // lazy: [num_splits][2] tile ranges inside one shift run
                                              // (not read where prefill_splits_follow_shift_runs is false)
  bool q_rotated_ready = false;               // lazy: kv_write already filled q_rotated (no pre-pass)
  bf16_bits* out = nullptr;              // [n, num_heads, head_dim]
  int rows_per_warp = 32;                // mma.sync: 32 (default) or 16 rows of the MMA tile per warp
  // The kernel: Auto takes the warp-specialised wgmma kernel where the device and the build have
  // it (compute capability 9.0, sm_90a code, head_dim 64 or 128), else mma.sync; MmaSync forces
  // mma.sync; Wgmma, where Auto would take wgmma, the earlier wgmma kernel without warp
  // specialisation (two CTAs an SM) — tests and benchmarks compare them.
  enum class Kernel { Auto, MmaSync, Wgmma } kernel = Kernel::Auto;
  int num_splits = 1;
  // The warp-specialised kernel on calls without splits (plain, or lazy with a single shift): a
  // grid of at most one CTA an SM whose CTAs walk several row tiles each, the next tile's first
  // loads landing under this one's last steps; false: a CTA a row tile. Off: its first GPU run
  // hung wherever a CTA walked a second row tile (mended since, not yet rerun on a GPU).
  // persistent_ctas caps that grid (0: the SM count; tests give a few CTAs many tiles).
  bool persistent = false;
  int persistent_ctas = 0;
  float* partial_o = nullptr;            // [n * num_heads, num_splits, head_dim]
  float* partial_ml = nullptr;
};

inline std::size_t lazy_query_workspace_elements(int n, int num_heads, int head_dim, int num_shifts) {
  return std::size_t(n) * num_heads * head_dim * num_shifts;
}
// Lazy prefill split ranges for sequence `seq`: about `splits` pieces, none crossing a change of
// shift; flattened [begin, end) pairs of sequence-local tile indices (num_splits = size / 2).
std::vector<int32_t> lazy_split_ranges(const AttentionPlan& plan, int seq, int splits);
// KV splits of a prompt step for the kernel `kernel` would take (its head_dim and kernel fields).
int prefill_num_splits(int n, int num_heads, int num_kv_heads, int num_tiles, int sm_count,
                       const PrefillParams& kernel);
void prefill_attention(const PrefillParams& p, cudaStream_t stream);
// Whether prefill_attention takes a wgmma kernel for this head_dim on the current device.
bool prefill_uses_wgmma(const PrefillParams& p);
// The kernel prefill_attention takes for p here: "wgmma, warp-specialised", "wgmma" or "mma.sync".
const char* prefill_kernel_name(const PrefillParams& p);
// Whether lazy splits must follow shift runs (num_splits = the ranges of lazy_split_ranges): true
// but for the warp-specialised kernel, whose CTAs reload the query at a shift change and so split
// lazy calls evenly, as plain ones.
bool prefill_splits_follow_shift_runs(const PrefillParams& p);
// The wgmma kernel itself (attention_prefill_sm90a.cu; only in builds with sm_90a code).
void prefill_attention_wgmma(const PrefillParams& p, cudaStream_t stream);

// Floats of split workspace the two kernels need for `rows` = queries × heads.
inline std::size_t split_partial_o_floats(int rows, int splits, int head_dim) {
  return std::size_t(rows) * splits * head_dim;
}
inline std::size_t split_partial_ml_floats(int rows, int splits) { return std::size_t(rows) * splits * 2; }

struct KvWriteParams {
  const bf16_bits* k = nullptr;          // [n] rows of row_stride; kv heads contiguous
  const bf16_bits* v = nullptr;
  int64_t row_stride = 0;
  bf16_bits* q = nullptr;                // optional: rotated in place by `positions` (plain mode)
  int64_t q_row_stride = 0;
  // Lazy prefill (optional, instead of rotating q in place): q is left raw and written rotated by
  // (position − shifts[s]) for every distinct shift into q_rotated [num_shifts][n][num_heads * head_dim],
  // the layout PrefillParams::q_rotated reads; the attention call then sets q_rotated_ready.
  const int32_t* shifts = nullptr;       // [num_shifts], device
  int num_shifts = 0;
  bf16_bits* q_rotated = nullptr;
  // Lazy decode (optional): token t has its own shifts, shifts[token_shift_offsets[t] ..
  // token_shift_offsets[t + 1]) ([n + 1], device), its copy j at q_rotated row (j * n + t); num_shifts
  // is then the most any token has (the layout DecodeParams::q_rotated reads).
  const int32_t* token_shift_offsets = nullptr;
  int num_heads = 0;
  const int32_t* positions = nullptr;    // [n]
  const int32_t* slots = nullptr;        // [n] block * block_size + offset
  int n = 0;
  int num_kv_heads = 0;
  int head_dim = 0;
  int block_size = 0;
  const float* inv_freq = nullptr;
  bf16_bits* k_pool = nullptr;
  bf16_bits* v_pool = nullptr;
};

// Rotates the new keys to their positions and stores K/V into the pool (RoPE-at-write).
void kv_write(const KvWriteParams& p, cudaStream_t stream);

// Same layout as lazyscope::BlockCopy (checked where the two meet).
struct BlockCopyOp {
  int32_t src = 0;
  int32_t dst = 0;
  int32_t shift = 0;
  int32_t valid = 0;
};

struct MaterializeParams {
  const BlockCopyOp* copies = nullptr;   // device array
  int num_copies = 0;
  int num_layers = 1;
  int64_t layer_stride = 0;              // elements between layers' pools
  int num_kv_heads = 0;
  int head_dim = 0;
  int block_size = 0;
  const float* inv_freq = nullptr;
  bf16_bits* k_pool = nullptr;
  bf16_bits* v_pool = nullptr;
};

// Copies blocks (every layer) rotating keys by each copy's shift; copies must not overlap.
void materialize(const MaterializeParams& p, cudaStream_t stream);

int device_sm_count();

}  // namespace lazyscope::cuda

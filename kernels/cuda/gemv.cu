// One-token GEMMs (GEMV) of the decode step: plain, with RMSNorm or SwiGLU folded into the input
// staging, and the wqkv GEMV that also rotates and stores K/V (kv_write folded into its epilogue).
#include <cuda_bf16.h>

#include <algorithm>
#include <string>

#include "base/error.h"
#include "kernels/cuda/check.h"
#include "kernels/cuda/device_arch.h"
#include "kernels/cuda/device_util.cuh"
#include "kernels/cuda/gemv.h"
#include "kernels/cuda/ops.h"
#include "kernels/cuda/qkv_epilogue.cuh"
#include "kernels/cuda/tool_switches.h"

namespace lazyscope::cuda {
namespace {

// GEMV: a CTA of kGemvWarps warps owns kGemvRowsPerCta rows over one column split; each warp owns
// kGemvRows of them. A lane streams 16-byte pieces: kGemvUnroll pieces per row per step, and the
// next step's loads are issued before this step's FMAs, so up to 2 * kGemvRows * kGemvUnroll
// loads stay in flight per lane. Split-K (only matrices with very few rows, see gemv_splits_for)
// writes fp32 partials; the last CTA of a row block to arrive sums them in split order
// (deterministic) and writes the output.
constexpr int kGemvRows = 2, kGemvWarps = 8, kGemvUnroll = 4;
constexpr int kGemvRowsPerCta = kGemvRows * kGemvWarps;
constexpr int kGemvStepPieces = 32 * kGemvUnroll;  // pieces a warp covers per step
constexpr int kGemvMaxSplits = 16;

__device__ __forceinline__ void gemv_store(void* out, int row, float value, bool out_fp32, bool accumulate) {
  if (out_fp32) {
    float* o = static_cast<float*>(out);
    o[row] = accumulate ? o[row] + value : value;
  } else {
    __nv_bfloat16* o = static_cast<__nv_bfloat16*>(out);
    o[row] = __float2bfloat16(accumulate ? __bfloat162float(o[row]) + value : value);
  }
}

// What a GEMV CTA multiplies by: a bf16 vector, or one it builds in shared memory for its column
// range from the residual (RMSNorm) or from [gate | up] (SwiGLU), exactly as rmsnorm_kernel and
// swiglu_kernel round them, so the norm/activation launches disappear from the decode step.
enum GemvInputMode : int { kInputBf16 = 0, kInputRmsNorm = 1, kInputSwiGlu = 2 };

struct GemvInput {
  const __nv_bfloat16* x = nullptr;    // kInputBf16: [cols]; kInputSwiGlu: gate_up [2 * cols]
  const float* x_f32 = nullptr;        // kInputRmsNorm: the fp32 residual row [cols]
  const float* norm_weight = nullptr;  // kInputRmsNorm: [cols]
  float eps = 0.0f;
};

// Fills stage[0, end - begin) with the input pieces [begin, end); every thread of the CTA calls it.
// Each loop issues the loads of kStageBatch of a thread's pieces before it uses any of them, so a
// CTA's staging costs a round trip to L2 a batch rather than a piece (a Llama-3.2-1B down CTA's
// 1,024 SwiGLU pieces are one batch a thread). Each value and the norm's sum are formed by the
// same arithmetic in the same order as one piece at a time.
constexpr int kStageBatch = 4;

template <int MODE>
__device__ __forceinline__ void gemv_stage_input(const GemvInput& in, int cols, int begin, int end, uint4* stage,
                                                 float* scratch) {
  const int stride = blockDim.x;
  if constexpr (MODE == kInputRmsNorm) {
    const float4* xf = reinterpret_cast<const float4*>(in.x_f32);
    const float4* wf = reinterpret_cast<const float4*>(in.norm_weight);
    const float4 zero = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    float sum = 0.0f;
    for (int first = threadIdx.x; first < cols / 4; first += kStageBatch * stride) {
      float4 v[kStageBatch];
#pragma unroll
      for (int b = 0; b < kStageBatch; ++b) v[b] = first + b * stride < cols / 4 ? xf[first + b * stride] : zero;
#pragma unroll
      for (int b = 0; b < kStageBatch; ++b) {
        if (first + b * stride < cols / 4) sum += v[b].x * v[b].x + v[b].y * v[b].y + v[b].z * v[b].z + v[b].w * v[b].w;
      }
    }
    for (int offset = 16; offset > 0; offset /= 2) sum += __shfl_xor_sync(0xffffffffu, sum, offset);
    if (threadIdx.x % 32 == 0) scratch[threadIdx.x / 32] = sum;
    __syncthreads();
    float total = 0.0f;
    for (int w = 0; w < int(blockDim.x / 32); ++w) total += scratch[w];
    const float inv = rsqrtf(total / float(cols) + in.eps);
    for (int first = begin + threadIdx.x; first < end; first += kStageBatch * stride) {
      float4 a[kStageBatch], b[kStageBatch], ga[kStageBatch], gb[kStageBatch];
#pragma unroll
      for (int k = 0; k < kStageBatch; ++k) {
        const int p = first + k * stride;
        const bool ok = p < end;
        a[k] = ok ? xf[2 * p] : zero;
        b[k] = ok ? xf[2 * p + 1] : zero;
        ga[k] = ok ? wf[2 * p] : zero;
        gb[k] = ok ? wf[2 * p + 1] : zero;
      }
#pragma unroll
      for (int k = 0; k < kStageBatch; ++k) {
        const int p = first + k * stride;
        if (p >= end) break;
        uint4 packed;
        packed.x = detail::pack_bf16x2(a[k].x * inv * ga[k].x, a[k].y * inv * ga[k].y);
        packed.y = detail::pack_bf16x2(a[k].z * inv * ga[k].z, a[k].w * inv * ga[k].w);
        packed.z = detail::pack_bf16x2(b[k].x * inv * gb[k].x, b[k].y * inv * gb[k].y);
        packed.w = detail::pack_bf16x2(b[k].z * inv * gb[k].z, b[k].w * inv * gb[k].w);
        stage[p - begin] = packed;
      }
    }
  } else if constexpr (MODE == kInputSwiGlu) {
    const uint4* gate_up = reinterpret_cast<const uint4*>(in.x);
    const int pieces = cols / 8;
    const uint4 zero = make_uint4(0, 0, 0, 0);
    for (int first = begin + threadIdx.x; first < end; first += kStageBatch * stride) {
      uint4 gate_piece[kStageBatch], up_piece[kStageBatch];
#pragma unroll
      for (int k = 0; k < kStageBatch; ++k) {
        const int p = first + k * stride;
        gate_piece[k] = p < end ? gate_up[p] : zero;
        up_piece[k] = p < end ? gate_up[pieces + p] : zero;
      }
#pragma unroll
      for (int k = 0; k < kStageBatch; ++k) {
        const int p = first + k * stride;
        if (p >= end) break;
        float gate[8], up[8];
        detail::unpack8(gate_piece[k], gate);
        detail::unpack8(up_piece[k], up);
        float act[8];
#pragma unroll
        for (int j = 0; j < 8; ++j) act[j] = detail::silu_times(gate[j], up[j]);
        stage[p - begin] = make_uint4(detail::pack_bf16x2(act[0], act[1]), detail::pack_bf16x2(act[2], act[3]),
                                      detail::pack_bf16x2(act[4], act[5]), detail::pack_bf16x2(act[6], act[7]));
      }
    }
  }
}

// What a warp stores. kEpilogueStore: its rows' sums, into `out`. The other two give a warp a
// pair of rows whose sums it combines (rows past the end read the last row and store nothing):
// - kEpilogueQkv, the wqkv GEMV: a RoPE pair (dims i and i + D/2 of one q or k head), which it
//   rotates and stores itself, V rows straight to the pool; kv_write's arithmetic on the
//   bf16-rounded projections (qkv_epilogue.cuh), so the kv_write launch disappears;
// - kEpilogueSwiGlu, the gate_up GEMV: gate row i and up row inter + i, stored as act[i] =
//   silu(gate) * up with swiglu's arithmetic and roundings, so the down GEMV reads a plain bf16
//   input instead of forming SwiGLU in its staging.
enum GemvEpilogue : int { kEpilogueStore = 0, kEpilogueQkv = 1, kEpilogueSwiGlu = 2 };

template <int EPI>
__device__ __forceinline__ void pair_rows(int block, int warp, int rows, const QkvRopeOutput& o, int pair[2]) {
  if constexpr (EPI == kEpilogueSwiGlu) {
    pair[0] = block * kGemvWarps + warp;
    pair[1] = rows / 2 + pair[0];
    return;
  }
  const int rope_blocks = (o.q_dim + o.kv_dim) / 16;
  if (block < rope_blocks) {
    const int per_head = o.head_dim / 16;  // 16-row blocks a head: 8 pairs each
    const int head = block / per_head, pair_block = block % per_head;
    pair[0] = head * o.head_dim + pair_block * 8 + warp;
    pair[1] = pair[0] + o.head_dim / 2;
  } else {
    pair[0] = block * 16 + 2 * warp;
    pair[1] = pair[0] + 1;
  }
}

// act[i] from the fp32 sums of gate row i and up row inter + i (i < inter = rows / 2).
__device__ __forceinline__ void swiglu_epilogue(void* act, int i, int rows, const float sum[2]) {
  if (i >= rows / 2) return;
  const float gate = __bfloat162float(__float2bfloat16(sum[0])), up = __bfloat162float(__float2bfloat16(sum[1]));
  static_cast<__nv_bfloat16*>(act)[i] = __float2bfloat16(detail::silu_times(gate, up));
}

template <int EPI>
__device__ __forceinline__ void pair_epilogue(void* out, int rows, const QkvRopeOutput& qkv, const int pair[2],
                                              const float sum[2]) {
  if constexpr (EPI == kEpilogueSwiGlu) {
    swiglu_epilogue(out, pair[0], rows, sum);
  } else {
    detail::qkv_epilogue(qkv, pair, sum);
  }
}

// ROWS rows per warp, 8 / ROWS pieces per row per step (the same 8 loads a lane per step).
template <int MODE, int ROWS, int EPI = kEpilogueStore>
__global__ void __launch_bounds__(kGemvWarps * 32, 2)
    gemv_kernel(GemvInput in, const __nv_bfloat16* w, int rows, int cols, void* out, bool out_fp32,
                bool accumulate, int pieces_per_split, float* partial, unsigned* counters, QkvRopeOutput qkv,
                int prefetch_steps) {
  constexpr bool kPairs = EPI != kEpilogueStore;
  static_assert(!kPairs || ROWS == 2, "a pair epilogue pairs a warp's two rows");
  constexpr int UNROLL = 8 / ROWS, STEP = 32 * UNROLL;
  extern __shared__ uint4 x_stage[];  // MODE != kInputBf16: this split's input pieces
  __shared__ float norm_scratch[kGemvWarps];
  __shared__ bool is_last;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int split = blockIdx.y, splits = gridDim.y;
  int row_of[ROWS];
  if constexpr (kPairs) {
    pair_rows<EPI>(blockIdx.x, warp, rows, qkv, row_of);
  } else {
#pragma unroll
    for (int r = 0; r < ROWS; ++r) row_of[r] = blockIdx.x * (ROWS * kGemvWarps) + warp * ROWS + r;
  }
  const int pieces = cols / 8;
  const int begin = split * pieces_per_split;
  const int end = min(pieces, begin + pieces_per_split);
  const uint4* x_vec = reinterpret_cast<const uint4*>(in.x);
  const uint4* w_rows[ROWS];
#pragma unroll
  for (int r = 0; r < ROWS; ++r) {
    // Rows past the end re-read the last row (in bounds) and are never stored.
    w_rows[r] = reinterpret_cast<const uint4*>(w + int64_t(min(row_of[r], rows - 1)) * cols);
  }
  const uint4 zero = make_uint4(0, 0, 0, 0);
  auto load_w = [&](int base, uint4 (&wv)[ROWS][UNROLL]) {
#pragma unroll
    for (int u = 0; u < UNROLL; ++u) {
      const int piece = base + 32 * u;
#pragma unroll
      for (int r = 0; r < ROWS; ++r) wv[r][u] = piece < end ? __ldcs(w_rows[r] + piece) : zero;
    }
  };
  auto load_x = [&](int base, uint4 (&xv)[UNROLL]) {
#pragma unroll
    for (int u = 0; u < UNROLL; ++u) {
      const int piece = base + 32 * u;
      if constexpr (MODE == kInputBf16) {
        xv[u] = piece < end ? __ldg(x_vec + piece) : zero;
      } else {
        xv[u] = piece < end ? x_stage[piece - begin] : zero;
      }
    }
  };
  uint4 x_cur[UNROLL], w_cur[ROWS][UNROLL];
  load_w(begin + lane, w_cur);  // the first weight loads fly while the input is staged
#if __CUDA_ARCH__ >= 900
  if (prefetch_steps > 0 && lane < ROWS) {
    // One bulk L2 prefetch a row for the next steps' pieces: more bytes in flight than registers hold.
    const int from = begin + STEP, to = min(end, begin + (1 + prefetch_steps) * STEP);
#pragma unroll
    for (int r = 0; r < ROWS; ++r) {
      if (r == lane && to > from) {
        asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;\n" ::"l"(w_rows[r] + from),
                     "r"(unsigned(to - from) * 16u)
                     : "memory");
      }
    }
  }
#endif
  // Programmatic launch (GemvContext::programmatic): the weights do not depend on the
  // previous kernel, so they are already in flight; wait for its results (x, the workspace) here,
  // and let the next GEMV start its own weight loads as our CTAs drain. No-ops otherwise.
#if __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;\n" ::: "memory");
  asm volatile("griddepcontrol.launch_dependents;\n" :::);
#endif
  if constexpr (MODE != kInputBf16) {
    gemv_stage_input<MODE>(in, cols, begin, end, x_stage, norm_scratch);
    __syncthreads();
  }
  load_x(begin + lane, x_cur);
  float sum[ROWS] = {};
  for (int base = begin + lane; base < end; base += STEP) {
    uint4 x_next[UNROLL], w_next[ROWS][UNROLL];
    load_w(base + STEP, w_next);
    load_x(base + STEP, x_next);
#pragma unroll
    for (int u = 0; u < UNROLL; ++u) {
      const __nv_bfloat162* xp = reinterpret_cast<const __nv_bfloat162*>(&x_cur[u]);
#pragma unroll
      for (int r = 0; r < ROWS; ++r) {
        const __nv_bfloat162* wp = reinterpret_cast<const __nv_bfloat162*>(&w_cur[r][u]);
#pragma unroll
        for (int j = 0; j < 4; ++j) {
          const float2 a = __bfloat1622float2(xp[j]), b = __bfloat1622float2(wp[j]);
          sum[r] = fmaf(a.x, b.x, fmaf(a.y, b.y, sum[r]));
        }
      }
    }
#pragma unroll
    for (int u = 0; u < UNROLL; ++u) {
      x_cur[u] = x_next[u];
#pragma unroll
      for (int r = 0; r < ROWS; ++r) w_cur[r][u] = w_next[r][u];
    }
  }
#pragma unroll
  for (int r = 0; r < ROWS; ++r) {
    for (int offset = 16; offset > 0; offset /= 2) sum[r] += __shfl_xor_sync(0xffffffffu, sum[r], offset);
  }
  if (splits == 1) {
    if (lane == 0) {
      if constexpr (kPairs) {
        pair_epilogue<EPI>(out, rows, qkv, row_of, sum);
      } else {
#pragma unroll
        for (int r = 0; r < ROWS; ++r) {
          if (row_of[r] < rows) gemv_store(out, row_of[r], sum[r], out_fp32, accumulate);
        }
      }
    }
    return;
  }
  // A SwiGLU pair past the end names rows that valid pairs own: it leaves their partials alone.
  const bool owns_rows = EPI != kEpilogueSwiGlu || row_of[0] < rows / 2;
  if (lane == 0 && owns_rows) {
#pragma unroll
    for (int r = 0; r < ROWS; ++r) {
      if (row_of[r] < rows) partial[int64_t(split) * rows + row_of[r]] = sum[r];
    }
  }
  // Threadfence-reduction: publish the partials, count arrivals; the last CTA reduces.
  __threadfence();
  __syncthreads();
  if (threadIdx.x == 0) is_last = atomicAdd(&counters[blockIdx.x], 1u) == unsigned(splits - 1);
  __syncthreads();
  if (!is_last) return;
  __threadfence();
  if constexpr (kPairs) {
    if (threadIdx.x < kGemvWarps) {  // thread t finishes warp t's pair
      int pair[2];
      pair_rows<EPI>(blockIdx.x, threadIdx.x, rows, qkv, pair);
      float total[2] = {0.0f, 0.0f};
      // A SwiGLU pair past the end wrote no partials and stores nothing (swiglu_epilogue).
      const bool valid = EPI != kEpilogueSwiGlu || pair[0] < rows / 2;
      for (int s = 0; s < splits && valid; ++s) {
        total[0] += __ldcg(partial + int64_t(s) * rows + pair[0]);
        total[1] += __ldcg(partial + int64_t(s) * rows + pair[1]);
      }
      pair_epilogue<EPI>(out, rows, qkv, pair, total);
    }
    if (threadIdx.x == 0) counters[blockIdx.x] = 0;
    return;
  }
  const int cta_row0 = blockIdx.x * (ROWS * kGemvWarps);
  for (int i = threadIdx.x; i < (ROWS * kGemvWarps); i += blockDim.x) {
    const int row = cta_row0 + i;
    if (row >= rows) break;
    float total = 0.0f;
    for (int s = 0; s < splits; ++s) total += __ldcg(partial + int64_t(s) * rows + row);
    gemv_store(out, row, total, out_fp32, accumulate);
  }
  if (threadIdx.x == 0) counters[blockIdx.x] = 0;  // ready for the next call (and graph replay)
}

// Column splits for a one-token GEMM. Measured on the H200 (run 1 sweep): one split wins for every
// decode matrix of the 1B and 8B models, even 128 row blocks on 132 SMs (long-lived warps keep
// their two-step pipeline full; split-K adds short CTAs and the last-CTA reduction to the tail).
// So split only matrices with very few rows (under a quarter of the SMs busy), each split >= 4 steps.
int gemv_splits_for(int rows, int cols, int sm_count) {
  const int row_blocks = (rows + kGemvRowsPerCta - 1) / kGemvRowsPerCta;
  const int pieces = cols / 8;
  int splits = 1;
  while (splits < kGemvMaxSplits && row_blocks * splits * 4 < sm_count &&
         pieces / (2 * splits) >= 4 * kGemvStepPieces) {
    splits *= 2;
  }
  return splits;
}

}  // namespace

int gemv_splits_to_fill(int rows, int cols, int sm_count, int ctas_per_sm) {
  const int row_blocks = (rows + kGemvRowsPerCta - 1) / kGemvRowsPerCta;
  const int pieces = cols / 8;
  int splits = 1;
  while (splits < kGemvMaxSplits && row_blocks * splits < ctas_per_sm * sm_count && pieces / (2 * splits) >= 8) {
    splits *= 2;
  }
  return splits;
}

int gemv_num_splits(int rows, int cols) { return gemv_splits_for(rows, cols, detail::cached_sm_count()); }

GemvWorkspaceSize gemv_workspace_size_for_splits(int rows, int splits) {
  if (splits <= 1) return {};
  return GemvWorkspaceSize{std::size_t(splits) * std::size_t(rows), (rows + kGemvRowsPerCta - 1) / kGemvRowsPerCta};
}

GemvWorkspaceSize gemv_workspace_size(int rows, int cols) {
  return gemv_workspace_size_for_splits(rows, gemv_num_splits(rows, cols));
}

namespace {

constexpr std::size_t kMaxStageBytes = 48 * 1024;  // default dynamic shared memory limit

// Launches the GEMV for `input`; returns false (nothing launched) when a staged input would not fit.
// splits 0: the default for the shape (gemv_num_splits). ROWS 2 is the production variant; the
// workspace rule (one counter per 16 rows) also covers ROWS 4.
template <int MODE, int ROWS = kGemvRows, int EPI = kEpilogueStore>
bool launch_gemv(const GemvInput& input, const bf16_bits* w, int rows, int cols, void* out, bool out_fp32,
                 bool accumulate, cudaStream_t stream, const GemvContext& context, int splits = 0,
                 const QkvRopeOutput& qkv = QkvRopeOutput{}) {
  static_assert(ROWS >= kGemvRows, "counters are sized for 16-row blocks");
  if (cols % 8 != 0) throw Error("cuda gemv: cols " + std::to_string(cols) + " is not a multiple of 8");
  if (rows <= 0 || cols <= 0) return true;
  const int row_blocks = (rows + ROWS * kGemvWarps - 1) / (ROWS * kGemvWarps);
  if (splits <= 0) {
    splits = context.split_ctas_per_sm > 0
                 ? gemv_splits_to_fill(rows, cols, detail::cached_sm_count(), context.split_ctas_per_sm)
                 : gemv_num_splits(rows, cols);
  }
  splits = std::max(1, std::min({splits, kGemvMaxSplits, cols / 8}));
  const GemvWorkspaceSize need = gemv_workspace_size_for_splits(rows, splits);
  const GemvWorkspace& workspace = context.workspace;
  if (workspace.partial == nullptr || workspace.counters == nullptr || workspace.partial_floats < need.partial_floats ||
      workspace.num_counters < need.num_counters) {
    splits = 1;  // no room for partials: one pass over the columns
  }
  const int pieces = cols / 8;
  const int pieces_per_split = (pieces + splits - 1) / splits;
  const std::size_t stage_bytes = MODE == kInputBf16 ? 0 : std::size_t(pieces_per_split) * sizeof(uint4);
  if (stage_bytes > kMaxStageBytes) return false;
  const __nv_bfloat16* weights = reinterpret_cast<const __nv_bfloat16*>(w);
  float* partial = splits > 1 ? workspace.partial : nullptr;
  unsigned* counters = splits > 1 ? workspace.counters : nullptr;
  const KernelPath& path = current_kernel_path();  // pre-Hopper: no bulk prefetch, no PDL
  const int prefetch_steps = path.bulk_prefetch ? std::max(0, std::min(context.prefetch_steps, 64)) : 0;
  if (!context.programmatic || tool_switches().no_programmatic_launch || !path.programmatic_launch) {
    gemv_kernel<MODE, ROWS, EPI><<<dim3(row_blocks, splits), kGemvWarps * 32, stage_bytes, stream>>>(
        input, weights, rows, cols, out, out_fp32, accumulate, pieces_per_split, partial, counters, qkv,
        prefetch_steps);
    LAZYSCOPE_CUDA_LAUNCH_CHECK();
    return true;
  }
  cudaLaunchConfig_t config = {};
  config.gridDim = dim3(row_blocks, splits);
  config.blockDim = dim3(kGemvWarps * 32);
  config.dynamicSmemBytes = stage_bytes;
  config.stream = stream;
  cudaLaunchAttribute attribute[1];
  attribute[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attribute[0].val.programmaticStreamSerializationAllowed = 1;
  config.attrs = attribute;
  config.numAttrs = 1;
  LAZYSCOPE_CUDA_CHECK(cudaLaunchKernelEx(&config, gemv_kernel<MODE, ROWS, EPI>, input, weights, rows, cols, out,
                                          out_fp32, accumulate, pieces_per_split, partial, counters, qkv,
                                          prefetch_steps));
  return true;
}

}  // namespace

void gemv_bf16(const bf16_bits* x, const bf16_bits* w, int rows, int cols, void* out, bool out_fp32, bool accumulate,
               cudaStream_t stream, const GemvContext& context) {
  GemvInput input;
  input.x = reinterpret_cast<const __nv_bfloat16*>(x);
  launch_gemv<kInputBf16>(input, w, rows, cols, out, out_fp32, accumulate, stream, context);
}

void gemv_bf16_splits(const bf16_bits* x, const bf16_bits* w, int rows, int cols, void* out, bool out_fp32,
                      bool accumulate, cudaStream_t stream, const GemvContext& context, int splits,
                      int rows_per_warp) {
  GemvInput input;
  input.x = reinterpret_cast<const __nv_bfloat16*>(x);
  if (rows_per_warp == 4) {
    launch_gemv<kInputBf16, 4>(input, w, rows, cols, out, out_fp32, accumulate, stream, context, splits);
  } else {
    launch_gemv<kInputBf16>(input, w, rows, cols, out, out_fp32, accumulate, stream, context, splits);
  }
}

void gemv_rmsnorm_bf16(const float* x, const float* norm_weight, float eps, const bf16_bits* w, int rows, int cols,
                       void* out, bool out_fp32, bool accumulate, cudaStream_t stream, const GemvContext& context,
                       bf16_bits* scratch) {
  GemvInput input;
  input.x_f32 = x;
  input.norm_weight = norm_weight;
  input.eps = eps;
  if (launch_gemv<kInputRmsNorm>(input, w, rows, cols, out, out_fp32, accumulate, stream, context)) return;
  rmsnorm(x, norm_weight, 1, cols, eps, scratch, stream);
  gemv_bf16(scratch, w, rows, cols, out, out_fp32, accumulate, stream, context);
}

bool gemv_rmsnorm_qkv_rope(const float* x, const float* norm_weight, float eps, const bf16_bits* wqkv, int cols,
                           const QkvRopeOutput& output, cudaStream_t stream, const GemvContext& context) {
  if (output.head_dim % 16 != 0 || output.q_dim % output.head_dim != 0 || output.kv_dim % output.head_dim != 0) {
    return false;
  }
  GemvInput input;
  input.x_f32 = x;
  input.norm_weight = norm_weight;
  input.eps = eps;
  return launch_gemv<kInputRmsNorm, kGemvRows, kEpilogueQkv>(input, wqkv, output.q_dim + 2 * output.kv_dim, cols,
                                                              output.q, false, false, stream, context, 0, output);
}

bool gemv_rmsnorm_gate_up_swiglu(const float* x, const float* norm_weight, float eps, const bf16_bits* w_gate_up,
                                 int inter, int cols, bf16_bits* act, cudaStream_t stream, const GemvContext& context) {
  GemvInput input;
  input.x_f32 = x;
  input.norm_weight = norm_weight;
  input.eps = eps;
  return launch_gemv<kInputRmsNorm, kGemvRows, kEpilogueSwiGlu>(input, w_gate_up, 2 * inter, cols, act, false, false,
                                                                 stream, context);
}

void gemv_swiglu_bf16(const bf16_bits* gate_up, const bf16_bits* w, int rows, int cols, void* out, bool out_fp32,
                      bool accumulate, cudaStream_t stream, const GemvContext& context, bf16_bits* scratch) {
  GemvInput input;
  input.x = reinterpret_cast<const __nv_bfloat16*>(gate_up);
  if (launch_gemv<kInputSwiGlu>(input, w, rows, cols, out, out_fp32, accumulate, stream, context)) return;
  swiglu(gate_up, 1, cols, scratch, stream);
  gemv_bf16(scratch, w, rows, cols, out, out_fp32, accumulate, stream, context);
}

}  // namespace lazyscope::cuda

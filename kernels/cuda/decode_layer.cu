// The batch-1 decode layer kernel (decode_layer.h): one persistent CTA an SM, 8 consumer warps and
// a producer warp.
//
// What a CTA multiplies is fixed by the shape alone: in phase wo its share of wo's rows, in phase
// gate_up the same share of the gate rows and of the up rows beside them (so it forms silu(gate) *
// up itself), in phase down a share of down's rows, in phase wqkv a share of the RoPE pairs (dims i
// and i + D/2 of one head). None of those weights depends on an activation, so one producer thread
// streams them, phase after phase, through a ring of 32 KB shared-memory stages (cp.async.bulk,
// completing on an mbarrier) from the kernel's first instruction to its last. Only the consumers
// wait at the grid barriers between phases (the residual, then silu(gate) * up, then the residual
// again must be whole), and the ring keeps filling while they do. A consumer warp takes whole
// segments of a stage (a row, or an equal piece of a row longer than 2,048 columns): one dot
// product with the phase's input, staged in shared memory, into a per-segment sum. The epilogue
// adds a row's segments in order, so the result never depends on timing.
//
// Two options (DecodeLayerParams): gate_up rows claimed at run time from a counter (the stage then
// names its first pair in stage_pair[], -1 ending the phase), and an L2 prefetch of the next
// layer's first weights once the producer has issued its last copy. Where the time goes, and why
// the kernel is opt-in, is in bench/cuda/NOTES.md (session 12).
#include <cuda_bf16.h>

#include <algorithm>
#include <string>

#include "base/error.h"
#include "kernels/cuda/check.h"
#include "kernels/cuda/decode_layer.h"
#include "kernels/cuda/device_arch.h"
#include "kernels/cuda/device_util.cuh"
#include "kernels/cuda/qkv_epilogue.cuh"
#include "kernels/cuda/tool_switches.h"

namespace lazyscope::cuda {
namespace {

constexpr int kConsumerWarps = 8;
constexpr int kConsumers = kConsumerWarps * 32;
constexpr int kLayerThreads = kConsumers + 32;
constexpr int kStageElements = 16384;  // 32 KB of bf16 weights a stage
constexpr int kSegmentMax = 2048;      // the most columns one warp's dot product covers
constexpr int kMaxRuns = 8;            // wqkv: a pair of runs for each head a share touches
[[maybe_unused]] constexpr int kPhases = 4;  // used by the sm_90 code only
constexpr int kMaxStages = 8;
constexpr int kNormPieces = 4;                          // pieces of 8 a consumer thread normalises
constexpr int kNormWidth = 8 * kConsumers * kNormPieces;  // the widest hidden size

enum Phase : int { kPhaseWo = 0, kPhaseGateUp = 1, kPhaseDown = 2, kPhaseQkv = 3 };

__host__ __device__ constexpr int segments_per_row(int cols) { return (cols + kSegmentMax - 1) / kSegmentMax; }
// (gate, up) row pairs a dynamic gate_up claim takes: as many as one stage holds, at most 64 segments
// (used by the sm_90 code only, as plan_phase).
[[maybe_unused]] __host__ __device__ inline int pairs_per_claim(int hidden) {
  const int by_stage = kStageElements / (2 * hidden), by_segments = 32 / segments_per_row(hidden);
  return by_stage < by_segments ? (by_stage > 0 ? by_stage : 1) : (by_segments > 0 ? by_segments : 1);
}
__host__ __device__ inline int share_begin(int units, int cta, int ctas) {
  return int((long long)units * cta / ctas);
}

// A CTA's share of one phase: runs of consecutive weight rows (contiguous bytes), in walk order.
struct PhasePlan {
  const __nv_bfloat16* w;
  int cols, seg_len, segs_per_row, segs_per_stage, num_runs;
  int run_row[kMaxRuns], run_rows[kMaxRuns];
};

[[maybe_unused]] __device__ void plan_phase(PhasePlan& plan, int phase, const DecodeLayerParams& p) {
  int units = 0;
  if (phase == kPhaseWo) {
    plan.w = reinterpret_cast<const __nv_bfloat16*>(p.wo);
    plan.cols = p.q_dim;
    units = p.hidden;
  } else if (phase == kPhaseGateUp) {
    plan.w = reinterpret_cast<const __nv_bfloat16*>(p.w_gate_up);
    plan.cols = p.hidden;
    units = p.inter;
  } else if (phase == kPhaseDown) {
    plan.w = reinterpret_cast<const __nv_bfloat16*>(p.w_down);
    plan.cols = p.inter;
    units = p.hidden;
  } else {
    plan.w = reinterpret_cast<const __nv_bfloat16*>(p.next_wqkv);
    plan.cols = p.hidden;
    units = (p.next_qkv.q_dim + 2 * p.next_qkv.kv_dim) / 2;
  }
  plan.segs_per_row = segments_per_row(plan.cols);
  plan.seg_len = plan.cols / plan.segs_per_row;
  plan.segs_per_stage = max(1, kStageElements / plan.seg_len);
  plan.num_runs = 0;
  const int u0 = share_begin(units, blockIdx.x, gridDim.x), u1 = share_begin(units, blockIdx.x + 1, gridDim.x);
  auto add = [&](int row, int rows) {
    plan.run_row[plan.num_runs] = row;
    plan.run_rows[plan.num_runs] = rows;
    ++plan.num_runs;
  };
  if (u1 <= u0) return;
  if (phase == kPhaseWo || phase == kPhaseDown) {
    add(u0, u1 - u0);
  } else if (phase == kPhaseGateUp) {
    add(u0, u1 - u0);
    add(p.inter + u0, u1 - u0);
  } else {  // the host checked that a share touches at most kMaxRuns / 2 heads
    const int D = p.next_qkv.head_dim, half = D / 2;
    for (int u = u0; u < u1 && plan.num_runs + 2 <= kMaxRuns;) {
      const int head = u / half, i = u % half, n = min(u1 - u, half - i);
      add(head * D + i, n);
      add(head * D + half + i, n);
      u += n;
    }
  }
}

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900

using detail::bulk_load;
using detail::mbar_arrive;
using detail::mbar_arrive_expect_tx;
using detail::mbar_init;
using detail::mbar_wait;
using detail::prefetch_l2;

__device__ __forceinline__ void consumers_sync() { asm volatile("bar.sync 1, %0;\n" ::"n"(kConsumers) : "memory"); }
__device__ __forceinline__ unsigned long long load_acquire(const unsigned long long* p) {
  unsigned long long v;
  asm volatile("ld.acquire.gpu.global.u64 %0, [%1];\n" : "=l"(v) : "l"(p) : "memory");
  return v;
}

// Every consumer of every CTA arrives, and none leaves before all have. The counter only grows, by
// the grid size at each barrier (every CTA arrives once at each), so a CTA's arrival tells it the
// count that completes this barrier: no reset, no last-arriver step. The release add publishes the
// CTA's stores (seen through the named barrier); the acquire load makes the others' visible.
__device__ void grid_barrier(unsigned long long* counter) {
  consumers_sync();
  if (threadIdx.x == 0) {
    unsigned long long arrived;
    asm volatile("atom.add.release.gpu.global.u64 %0, [%1], 1;\n" : "=l"(arrived) : "l"(counter) : "memory");
    const unsigned long long done = (arrived / gridDim.x + 1) * gridDim.x;
    while (load_acquire(counter) < done) {
    }
  }
  consumers_sync();
}

__device__ __forceinline__ float bf16_lo(uint32_t pair) { return __uint_as_float(pair << 16); }
__device__ __forceinline__ float bf16_hi(uint32_t pair) { return __uint_as_float(pair & 0xffff0000u); }

// One warp: sum over `pieces` 16-byte pieces of bf16 weights w · the fp32 input x (two float4 a
// piece), in every lane. Four pieces a lane at a time, their loads first, into four sums: the
// consumers must keep up with DRAM with two warps a scheduler, so each needs the parallelism.
__device__ __forceinline__ void fma_piece(const uint4& w, const float4& a, const float4& b, float& sum) {
  sum = fmaf(bf16_lo(w.x), a.x, sum);
  sum = fmaf(bf16_hi(w.x), a.y, sum);
  sum = fmaf(bf16_lo(w.y), a.z, sum);
  sum = fmaf(bf16_hi(w.y), a.w, sum);
  sum = fmaf(bf16_lo(w.z), b.x, sum);
  sum = fmaf(bf16_hi(w.z), b.y, sum);
  sum = fmaf(bf16_lo(w.w), b.z, sum);
  sum = fmaf(bf16_hi(w.w), b.w, sum);
}

__device__ __forceinline__ float dot_segment(const uint4* w, const float4* x, int pieces, int lane) {
  float acc[4] = {0.0f, 0.0f, 0.0f, 0.0f};
  int q = lane;
  for (; q + 96 < pieces; q += 128) {
    uint4 wv[4];
    float4 xa[4], xb[4];
#pragma unroll
    for (int u = 0; u < 4; ++u) wv[u] = w[q + 32 * u];
#pragma unroll
    for (int u = 0; u < 4; ++u) {
      xa[u] = x[2 * (q + 32 * u)];
      xb[u] = x[2 * (q + 32 * u) + 1];
    }
#pragma unroll
    for (int u = 0; u < 4; ++u) fma_piece(wv[u], xa[u], xb[u], acc[u]);
  }
  for (; q < pieces; q += 32) fma_piece(w[q], x[2 * q], x[2 * q + 1], acc[0]);
  float sum = (acc[0] + acc[1]) + (acc[2] + acc[3]);
  for (int offset = 16; offset > 0; offset /= 2) sum += __shfl_xor_sync(0xffffffffu, sum, offset);
  return sum;
}

// The phase's input in shared memory as fp32: a bf16 vector another kernel or CTA wrote (through L2).
__device__ void stage_bf16(const bf16_bits* src, int n, float4* dst) {
  const uint4* from = reinterpret_cast<const uint4*>(src);
  for (int i = threadIdx.x; i < n / 8; i += kConsumers) {
    const uint4 v = __ldcg(from + i);
    dst[2 * i] = make_float4(bf16_lo(v.x), bf16_hi(v.x), bf16_lo(v.y), bf16_hi(v.y));
    dst[2 * i + 1] = make_float4(bf16_lo(v.z), bf16_hi(v.z), bf16_lo(v.w), bf16_hi(v.w));
  }
}

// rmsnorm(x) * g rounded to bf16 as the GEMVs round it. Each consumer thread holds the pieces of 8
// it normalises (hidden <= kNormWidth), so x crosses from L2 once; the norm weights, which no
// kernel writes, are loaded before the grid barrier.
__device__ __forceinline__ void load_norm_weight(const float* g, int n, float4 (&gv)[2 * kNormPieces]) {
  const float4* gf = reinterpret_cast<const float4*>(g);
#pragma unroll
  for (int j = 0; j < kNormPieces; ++j) {
    const int piece = threadIdx.x + j * kConsumers;
    if (piece < n / 8) {
      gv[2 * j] = __ldg(gf + 2 * piece);
      gv[2 * j + 1] = __ldg(gf + 2 * piece + 1);
    }
  }
}

__device__ void stage_rmsnorm(const float* x, const float4 (&gv)[2 * kNormPieces], int n, float eps, float4* dst,
                              float* scratch) {
  const float4* xf = reinterpret_cast<const float4*>(x);
  float4 xv[2 * kNormPieces];
  float sum = 0.0f;
#pragma unroll
  for (int j = 0; j < kNormPieces; ++j) {
    const int piece = threadIdx.x + j * kConsumers;
    if (piece < n / 8) {
      xv[2 * j] = __ldcg(xf + 2 * piece);
      xv[2 * j + 1] = __ldcg(xf + 2 * piece + 1);
    }
  }
#pragma unroll
  for (int j = 0; j < kNormPieces; ++j) {
    if (threadIdx.x + j * kConsumers < n / 8) {
      const float4 a = xv[2 * j], b = xv[2 * j + 1];
      sum += a.x * a.x + a.y * a.y + a.z * a.z + a.w * a.w;
      sum += b.x * b.x + b.y * b.y + b.z * b.z + b.w * b.w;
    }
  }
  for (int offset = 16; offset > 0; offset /= 2) sum += __shfl_xor_sync(0xffffffffu, sum, offset);
  if (threadIdx.x % 32 == 0) scratch[threadIdx.x / 32] = sum;
  consumers_sync();
  float total = 0.0f;
  for (int w = 0; w < kConsumerWarps; ++w) total += scratch[w];
  const float inv = rsqrtf(total / float(n) + eps);
#pragma unroll
  for (int j = 0; j < kNormPieces; ++j) {
    const int piece = threadIdx.x + j * kConsumers;
    if (piece < n / 8) {
      const float4 a = xv[2 * j], b = xv[2 * j + 1], ga = gv[2 * j], gb = gv[2 * j + 1];
      auto rounded = [](float v) { return __bfloat162float(__float2bfloat16(v)); };
      dst[2 * piece] = make_float4(rounded(a.x * inv * ga.x), rounded(a.y * inv * ga.y), rounded(a.z * inv * ga.z),
                                   rounded(a.w * inv * ga.w));
      dst[2 * piece + 1] = make_float4(rounded(b.x * inv * gb.x), rounded(b.y * inv * gb.y),
                                       rounded(b.z * inv * gb.z), rounded(b.w * inv * gb.w));
    }
  }
}

// The next ring stage, and the parity its mbarriers complete with on this pass.
__device__ __forceinline__ void advance(int& stage, int& round, int stages) {
  if (++stage == stages) {
    stage = 0;
    round ^= 1;
  }
}

// The producer thread: every stage of every phase, in the consumers' order, then the L2 prefetch.
__device__ void produce(const PhasePlan* plans, int phases, __nv_bfloat16* ring, uint64_t* full, uint64_t* empty,
                        int* stage_pair, int stages, const DecodeLayerParams& p) {
  int stage = 0, round = 0;
  for (int k = 0; k < phases; ++k) {
    const PhasePlan& plan = plans[k];
    if (k == kPhaseGateUp && p.gate_up_claims != nullptr) {
      const int per = pairs_per_claim(p.hidden);
      const __nv_bfloat16* w = reinterpret_cast<const __nv_bfloat16*>(p.w_gate_up);
      int claim = int(atomicAdd(p.gate_up_claims, 1u));  // the next one is asked for while a stage frees
      for (;;) {
        mbar_wait(&empty[stage], round ^ 1);
        const int first = claim * per;
        if (first >= p.inter) {
          stage_pair[stage] = -1;
          mbar_arrive(&full[stage]);  // no bytes: the phase's end
          advance(stage, round, stages);
          break;
        }
        const int n = min(per, p.inter - first);
        const uint32_t bytes = uint32_t(n) * uint32_t(p.hidden) * 2u;
        stage_pair[stage] = first;
        mbar_arrive_expect_tx(&full[stage], 2 * bytes);
        bulk_load(ring + stage * kStageElements, w + (long long)first * p.hidden, bytes, &full[stage]);
        bulk_load(ring + stage * kStageElements + n * p.hidden, w + (long long)(p.inter + first) * p.hidden, bytes,
                  &full[stage]);
        claim = int(atomicAdd(p.gate_up_claims, 1u));
        advance(stage, round, stages);
      }
      continue;
    }
    for (int r = 0; r < plan.num_runs; ++r) {
      const __nv_bfloat16* src = plan.w + (long long)plan.run_row[r] * plan.cols;
      const int total = plan.run_rows[r] * plan.segs_per_row;
      for (int s = 0; s < total; s += plan.segs_per_stage) {
        const uint32_t bytes = uint32_t(min(plan.segs_per_stage, total - s)) * plan.seg_len * 2u;
        mbar_wait(&empty[stage], round ^ 1);
        mbar_arrive_expect_tx(&full[stage], bytes);
        bulk_load(ring + stage * kStageElements, src + (long long)s * plan.seg_len, bytes, &full[stage]);
        advance(stage, round, stages);
      }
    }
  }
  if (p.next_wo == nullptr || p.l2_prefetch_bytes <= 0) return;
  long long budget = p.l2_prefetch_bytes;
  const int r0 = share_begin(p.hidden, blockIdx.x, gridDim.x), r1 = share_begin(p.hidden, blockIdx.x + 1, gridDim.x);
  const long long wo_bytes = min(budget, (long long)(r1 - r0) * p.q_dim * 2);
  prefetch_l2(reinterpret_cast<const __nv_bfloat16*>(p.next_wo) + (long long)r0 * p.q_dim, wo_bytes);
  budget -= wo_bytes;
  if (p.next_gate_up == nullptr || budget < 4ll * p.hidden) return;
  // gate_up rows in the order the next launch reads them: from row 0 up when claimed at run time,
  // else from the start of this CTA's share.
  const int rows = int(budget / (4ll * p.hidden));
  int first = p.gate_up_claims != nullptr ? int(blockIdx.x) * rows : share_begin(p.inter, blockIdx.x, gridDim.x);
  const int end = p.gate_up_claims != nullptr ? p.inter : share_begin(p.inter, blockIdx.x + 1, gridDim.x);
  const int n = min(rows, end - first);
  if (n <= 0) return;
  const __nv_bfloat16* w = reinterpret_cast<const __nv_bfloat16*>(p.next_gate_up);
  prefetch_l2(w + (long long)first * p.hidden, (long long)n * p.hidden * 2);
  prefetch_l2(w + (long long)(p.inter + first) * p.hidden, (long long)n * p.hidden * 2);
}

__device__ __forceinline__ float row_sum(const float* partial, int first, int count) {
  float v = 0.0f;
  for (int c = 0; c < count; ++c) v += partial[first + c];
  return v;
}

// A phase's stores from its segment sums (partial, in walk order).
__device__ void epilogue(int phase, const PhasePlan& plan, const float* partial, const DecodeLayerParams& p) {
  const int spr = plan.segs_per_row;
  if (plan.num_runs == 0) return;
  if (phase == kPhaseWo || phase == kPhaseDown) {
    for (int i = threadIdx.x; i < plan.run_rows[0]; i += kConsumers) {
      float* xr = p.x + plan.run_row[0] + i;
      *xr = __ldcg(xr) + row_sum(partial, i * spr, spr);
    }
  } else if (phase == kPhaseGateUp) {
    const int n = plan.run_rows[0];
    __nv_bfloat16* act = reinterpret_cast<__nv_bfloat16*>(p.act);
    for (int i = threadIdx.x; i < n; i += kConsumers) {
      // gate_up rounded to bf16 as the GEMV stores it, then swiglu's arithmetic and rounding.
      const float gate = __bfloat162float(__float2bfloat16(row_sum(partial, i * spr, spr)));
      const float up = __bfloat162float(__float2bfloat16(row_sum(partial, (n + i) * spr, spr)));
      act[plan.run_row[0] + i] = __float2bfloat16(detail::silu_times(gate, up));
    }
  } else {
    int base = 0;
    for (int r = 0; r < plan.num_runs; r += 2) {
      const int n = plan.run_rows[r];
      for (int i = threadIdx.x; i < n; i += kConsumers) {
        const int rows[2] = {plan.run_row[r] + i, plan.run_row[r + 1] + i};
        const float values[2] = {row_sum(partial, (base + i) * spr, spr), row_sum(partial, (base + n + i) * spr, spr)};
        detail::qkv_epilogue(p.next_qkv, rows, values);
      }
      base += 2 * n;
    }
  }
}

#endif  // __CUDA_ARCH__ >= 900

__global__ void __launch_bounds__(kLayerThreads, 1)
    decode_layer_kernel(DecodeLayerParams p, int stages, int input_elements) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  extern __shared__ __align__(128) unsigned char smem[];
  __shared__ __align__(8) uint64_t full[kMaxStages], empty[kMaxStages];
  __shared__ PhasePlan plans[kPhases];
  __shared__ float scratch[kConsumerWarps];
  __shared__ int stage_pair[kMaxStages];
  __nv_bfloat16* ring = reinterpret_cast<__nv_bfloat16*>(smem);
  float4* input = reinterpret_cast<float4*>(ring + stages * kStageElements);  // the phase's input, fp32
  float* partial = reinterpret_cast<float*>(input) + input_elements;
  const int phases = p.next_wqkv != nullptr ? kPhases : kPhaseDown + 1;
  if (threadIdx.x < phases) plan_phase(plans[threadIdx.x], threadIdx.x, p);
  if (threadIdx.x == kConsumers) {
    for (int s = 0; s < stages; ++s) {
      mbar_init(&full[s], 1);                // the producer's expect_tx; the bytes complete it
      mbar_init(&empty[s], kConsumers);      // every consumer thread, done reading the stage
    }
    asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
  }
  __syncthreads();
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  if (warp == kConsumerWarps) {
    if (lane == 0) produce(plans, phases, ring, full, empty, stage_pair, stages, p);
    return;
  }
  int stage = 0, round = 0;
  for (int k = 0; k < phases; ++k) {
    const PhasePlan& plan = plans[k];
    if (k == kPhaseWo) {
      // Programmatic launch: the attention kernel before this one may still run; its output is
      // wo's input. (The weight stream above never waits.)
      asm volatile("griddepcontrol.wait;\n" ::: "memory");
      stage_bf16(p.attn, p.q_dim, input);
    } else {
      float4 norm[2 * kNormPieces];
      if (k != kPhaseDown) load_norm_weight(k == kPhaseGateUp ? p.mlp_norm : p.next_attn_norm, p.hidden, norm);
      grid_barrier(p.grid_sync);
      if (k == kPhaseDown && p.gate_up_claims != nullptr && blockIdx.x == 0 && threadIdx.x == 0) {
        // Every producer made its last gate_up claim before its consumers reached this barrier.
        *p.gate_up_claims = 0u;
      }
      if (k == kPhaseDown) {
        stage_bf16(p.act, p.inter, input);
      } else {
        if (k == kPhaseQkv) asm volatile("griddepcontrol.launch_dependents;\n" :::);
        stage_rmsnorm(p.x, norm, p.hidden, p.eps, input, scratch);
      }
    }
    consumers_sync();
    const int pieces = plan.seg_len / 8;
    if (k == kPhaseGateUp && p.gate_up_claims != nullptr) {
      // Claimed pairs: each stage holds n gate rows, then their n up rows; its act values are
      // stored as soon as its segment sums are in (partial, one slot of 64 a stage).
      for (;;) {
        mbar_wait(&full[stage], round);
        const int first = stage_pair[stage];
        const __nv_bfloat16* chunk = ring + stage * kStageElements;
        float* sums = partial + stage * 64;
        const int n = first < 0 ? 0 : min(pairs_per_claim(p.hidden), p.inter - first);
        for (int j = warp; j < 2 * n * plan.segs_per_row; j += kConsumerWarps) {
          const float sum = dot_segment(reinterpret_cast<const uint4*>(chunk + j * plan.seg_len),
                                        input + (j % plan.segs_per_row) * 2 * pieces, pieces, lane);
          if (lane == 0) sums[j] = sum;
        }
        mbar_arrive(&empty[stage]);  // this thread's reads of the stage are done
        advance(stage, round, stages);
        if (first < 0) break;
        consumers_sync();
        const int spr = plan.segs_per_row;
        __nv_bfloat16* act = reinterpret_cast<__nv_bfloat16*>(p.act);
        for (int i = threadIdx.x; i < n; i += kConsumers) {
          const float gate = __bfloat162float(__float2bfloat16(row_sum(sums, i * spr, spr)));
          const float up = __bfloat162float(__float2bfloat16(row_sum(sums, (n + i) * spr, spr)));
          act[first + i] = __float2bfloat16(detail::silu_times(gate, up));
        }
      }
      continue;
    }
    int seg_base = 0;
    for (int r = 0; r < plan.num_runs; ++r) {
      const int total = plan.run_rows[r] * plan.segs_per_row;
      for (int s = 0; s < total; s += plan.segs_per_stage) {
        const int n = min(plan.segs_per_stage, total - s);
        mbar_wait(&full[stage], round);
        const __nv_bfloat16* chunk = ring + stage * kStageElements;
        for (int j = warp; j < n; j += kConsumerWarps) {
          const int seg = s + j;
          const float sum = dot_segment(reinterpret_cast<const uint4*>(chunk + j * plan.seg_len),
                                        input + (seg % plan.segs_per_row) * 2 * pieces, pieces, lane);
          if (lane == 0) partial[seg_base + seg] = sum;
        }
        mbar_arrive(&empty[stage]);  // this thread's reads of the stage are done
        advance(stage, round, stages);
      }
      seg_base += total;
    }
    consumers_sync();
    epilogue(k, plan, partial, p);
  }
#endif
}

struct Geometry {
  int input_elements = 0;  // the widest phase input (staged as fp32)
  int partial_floats = 0;  // the most segments a CTA's share of one phase holds
  std::size_t smem = 0;
};

Geometry geometry(int hidden, int inter, int q_dim, int kv_dim, int stages, int ctas) {
  auto ceil_div = [](int a, int b) { return (a + b - 1) / b; };
  Geometry g;
  g.input_elements = ceil_div(std::max({q_dim, hidden, inter}), 64) * 64;
  g.partial_floats = std::max({stages * 64, ceil_div(hidden, ctas) * segments_per_row(q_dim),
                               2 * ceil_div(inter, ctas) * segments_per_row(hidden),
                               ceil_div(hidden, ctas) * segments_per_row(inter),
                               2 * ceil_div((q_dim + 2 * kv_dim) / 2, ctas) * segments_per_row(hidden)});
  g.smem = std::size_t(stages) * kStageElements * 2 + std::size_t(g.input_elements) * 4 +
           std::size_t(g.partial_floats) * 4;
  return g;
}

int layer_ctas() { return detail::cached_sm_count(); }

}  // namespace

std::string decode_layer_unsupported(int hidden, int inter, int q_dim, int kv_dim, int head_dim, int stages) {
  if (!current_kernel_path().bulk_prefetch) {
    return "the decode layer kernel needs compute capability 9.0 or newer and code built for it (bulk copies)";
  }
  if (stages < 2 || stages > kMaxStages) {
    return "decode layer stages " + std::to_string(stages) + " is out of range (2.." + std::to_string(kMaxStages) + ")";
  }
  for (const int cols : {q_dim, hidden, inter}) {
    if (cols <= 0 || cols % (8 * segments_per_row(cols)) != 0) {
      return "width " + std::to_string(cols) + " is not a multiple of 8 in equal pieces of at most " +
             std::to_string(kSegmentMax) + " columns";
    }
  }
  if (hidden > kNormWidth) {
    return "hidden " + std::to_string(hidden) + " is wider than the layer kernel's RMSNorm staging (" +
           std::to_string(kNormWidth) + ")";
  }
  if (head_dim % 16 != 0 || q_dim % head_dim != 0 || kv_dim % head_dim != 0) {
    return "head_dim " + std::to_string(head_dim) + " is not a multiple of 16 dividing the q and kv widths";
  }
  const int ctas = layer_ctas(), half = head_dim / 2;
  const int share = ((q_dim + 2 * kv_dim) / 2 + ctas - 1) / ctas;  // RoPE pairs a CTA takes at most
  if ((share + half - 2) / half + 1 > kMaxRuns / 2) {
    return "a CTA's share of wqkv spans more than " + std::to_string(kMaxRuns / 2) + " heads";
  }
  const Geometry g = geometry(hidden, inter, q_dim, kv_dim, stages, ctas);
  int device = 0, optin = 0;
  LAZYSCOPE_CUDA_CHECK(cudaGetDevice(&device));
  LAZYSCOPE_CUDA_CHECK(cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, device));
  cudaFuncAttributes attributes = {};
  LAZYSCOPE_CUDA_CHECK(cudaFuncGetAttributes(&attributes, decode_layer_kernel));
  if (g.smem + attributes.sharedSizeBytes > std::size_t(optin)) {
    return "the decode layer kernel needs " + std::to_string((g.smem + attributes.sharedSizeBytes) / 1024) +
           " KB of shared memory a CTA; the device has " + std::to_string(optin / 1024);
  }
  return "";
}

void decode_layer(const DecodeLayerParams& p, const DecodeLayerLaunch& launch, cudaStream_t stream) {
  if (launch.stages < 2 || launch.stages > kMaxStages) {
    throw Error("cuda decode layer: stages " + std::to_string(launch.stages) + " is out of range (2.." +
                std::to_string(kMaxStages) + ")");
  }
  const int ctas = layer_ctas();
  const Geometry g = geometry(p.hidden, p.inter, p.q_dim, p.next_qkv.kv_dim, launch.stages, ctas);
  static std::size_t configured = 0;  // the dynamic shared memory the kernel is allowed so far
  if (g.smem > configured) {
    LAZYSCOPE_CUDA_CHECK(
        cudaFuncSetAttribute(decode_layer_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(g.smem)));
    configured = g.smem;
  }
  cudaLaunchConfig_t config = {};
  config.gridDim = dim3(ctas);
  config.blockDim = dim3(kLayerThreads);
  config.dynamicSmemBytes = g.smem;
  config.stream = stream;
  cudaLaunchAttribute attributes[2];
  attributes[0].id = cudaLaunchAttributeCooperative;
  attributes[0].val.cooperative = 1;
  attributes[1].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attributes[1].val.programmaticStreamSerializationAllowed = 1;
  config.attrs = attributes;
  const bool programmatic =
      launch.programmatic && !tool_switches().no_programmatic_launch && current_kernel_path().programmatic_launch;
  config.numAttrs = programmatic ? 2 : 1;
  LAZYSCOPE_CUDA_CHECK(cudaLaunchKernelEx(&config, decode_layer_kernel, p, launch.stages, g.input_elements));
}

}  // namespace lazyscope::cuda

// Lazy and plain paged prefill attention on tensor cores (bf16 in, fp32 accumulation): the kernel
// (attention_prefill_kernel.cuh) as mma.sync m16n8k16 for every arch, and on Hopper as wgmma
// (attention_prefill_sm90a.cu) where the build holds sm_90a code; the lazy query pre-pass, the
// split merge and the launches.
#include <algorithm>
#include <cstdint>
#include <string>

#include "kernels/cuda/attention.h"
#include "kernels/cuda/attention_prefill_kernel.cuh"
#include "kernels/cuda/check.h"
#include "kernels/cuda/device_arch.h"
#include "kernels/cuda/device_util.cuh"
#include "base/error.h"

namespace lazyscope::cuda {
namespace {

using namespace detail;

// Lazy pre-pass: q_rotated[s][t] = R(m_t − δ_s) q_t for every distinct shift; one CTA per
// (token, shift) computes the D/2 angles once for all heads.
__global__ void rotate_queries_kernel(PrefillParams p) {
  extern __shared__ float trig[];  // [half] cos, [half] sin
  const int token = blockIdx.x, run = blockIdx.y;
  const int D = p.head_dim, half = D / 2, chunks = half / 8;
  const long long position = static_cast<long long>(p.q_positions[token]) - p.shifts[run];
  for (int i = threadIdx.x; i < half; i += blockDim.x) rope_cos_sin(position, p.inv_freq[i], &trig[i], &trig[half + i]);
  __syncthreads();
  const bf16_bits* q = p.q + token * p.q_row_stride;
  bf16_bits* out = p.q_rotated + (int64_t(run) * p.n + token) * p.num_heads * D;
  // One item = 8 pairs (i, i + D/2) of one head: two 16-byte loads and two 16-byte stores.
  for (int idx = threadIdx.x; idx < p.num_heads * chunks; idx += blockDim.x) {
    const int head = idx / chunks, dim = (idx % chunks) * 8;
    float a[8], b[8];
    unpack8(*reinterpret_cast<const uint4*>(q + head * D + dim), a);
    unpack8(*reinterpret_cast<const uint4*>(q + head * D + dim + half), b);
    uint4 lo, hi;
    uint32_t* lo_words = reinterpret_cast<uint32_t*>(&lo);
    uint32_t* hi_words = reinterpret_cast<uint32_t*>(&hi);
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const int x = 2 * j, y = 2 * j + 1;
      const float cx = trig[dim + x], sx = trig[half + dim + x], cy = trig[dim + y], sy = trig[half + dim + y];
      lo_words[j] = pack_bf16x2(a[x] * cx - b[x] * sx, a[y] * cy - b[y] * sy);
      hi_words[j] = pack_bf16x2(b[x] * cx + a[x] * sx, b[y] * cy + a[y] * sy);
    }
    *reinterpret_cast<uint4*>(out + head * D + dim) = lo;
    *reinterpret_cast<uint4*>(out + head * D + dim + half) = hi;
  }
}

// Split-KV merge for prefill: D/4 lanes own a row (a float4 each), so a warp reads whole 16-byte
// pieces of every split's partial and keeps several splits' loads in flight.
template <int D>
__global__ void __launch_bounds__(256) prefill_combine_kernel(const float* partial_o, const float* partial_ml,
                                                               int rows, int splits, __nv_bfloat16* out) {
  constexpr int kLanes = D / 4;
  constexpr int kRowsPerWarp = 32 / kLanes;
  const int warp_index = (blockIdx.x * blockDim.x + threadIdx.x) / 32, lane = threadIdx.x % 32;
  const int64_t row = int64_t(warp_index) * kRowsPerWarp + lane / kLanes;
  if (row >= rows) return;  // no warp collectives below
  const int dim = (lane % kLanes) * 4;
  const float* ml = partial_ml + row * splits * 2;
  float max_all = -INFINITY;
  for (int s = 0; s < splits; ++s) max_all = fmaxf(max_all, ml[2 * s]);
  const float base = max_all == -INFINITY ? 0.0f : max_all;
  const float* po = partial_o + row * splits * D + dim;
  float sum = 0.0f;
  float4 acc = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
  auto add = [&](int s, const float4& v) {
    const float weight = exp2f(ml[2 * s] - base);  // empty split: max -inf, weight 0
    sum += ml[2 * s + 1] * weight;
    acc.x += v.x * weight;
    acc.y += v.y * weight;
    acc.z += v.z * weight;
    acc.w += v.w * weight;
  };
  int s = 0;
  for (; s + 4 <= splits; s += 4) {  // four 16-byte loads in flight before any use
    float4 v[4];
#pragma unroll
    for (int i = 0; i < 4; ++i) v[i] = *reinterpret_cast<const float4*>(po + int64_t(s + i) * D);
#pragma unroll
    for (int i = 0; i < 4; ++i) add(s + i, v[i]);
  }
  for (; s < splits; ++s) add(s, *reinterpret_cast<const float4*>(po + int64_t(s) * D));
  const float inv_sum = sum > 0.0f ? 1.0f / sum : 0.0f;
  uint2 packed;
  packed.x = pack_bf16x2(acc.x * inv_sum, acc.y * inv_sum);
  packed.y = pack_bf16x2(acc.z * inv_sum, acc.w * inv_sum);
  *reinterpret_cast<uint2*>(out + row * D + dim) = packed;
}

template <int D>
void launch_prefill_combine(const PrefillParams& p, cudaStream_t stream) {
  const int rows = p.n * p.num_heads;
  constexpr int kRowsPerCta = 8 * (32 / (D / 4));  // 8 warps
  prefill_combine_kernel<D><<<(rows + kRowsPerCta - 1) / kRowsPerCta, 256, 0, stream>>>(
      p.partial_o, p.partial_ml, rows, p.num_splits, reinterpret_cast<__nv_bfloat16*>(p.out));
  LAZYSCOPE_CUDA_LAUNCH_CHECK();
}

template <int D, int MT, bool LAZY>
void launch_prefill(const PrefillParams& p, cudaStream_t stream) {
  constexpr int kSmem = smem_bytes<D, MT>();
  static bool configured = false;  // one attribute call per instantiation
  if (!configured) {
    LAZYSCOPE_CUDA_CHECK(
        cudaFuncSetAttribute(prefill_kernel<D, MT, LAZY>, cudaFuncAttributeMaxDynamicSharedMemorySize, kSmem));
    configured = true;
  }
  const int rows = p.n * (p.num_heads / p.num_kv_heads);
  constexpr int kRows = rows_per_cta<MT>();
  dim3 grid((rows + kRows - 1) / kRows, p.num_kv_heads, p.num_splits);
  prefill_kernel<D, MT, LAZY><<<grid, kWarps * 32, kSmem, stream>>>(p);
  LAZYSCOPE_CUDA_LAUNCH_CHECK();
}

template <int D, int MT>
void dispatch_lazy(const PrefillParams& p, cudaStream_t stream) {
  if (p.lazy) {
    launch_prefill<D, MT, true>(p, stream);
  } else {
    launch_prefill<D, MT, false>(p, stream);
  }
}

template <int D>
void dispatch_prefill(const PrefillParams& p, cudaStream_t stream) {
  if (prefill_uses_wgmma(p)) {
#ifdef LAZYSCOPE_HAVE_WGMMA
    prefill_attention_wgmma(p, stream);
#endif
  } else if (p.rows_per_warp == 16) {
    dispatch_lazy<D, 1>(p, stream);
  } else {
    dispatch_lazy<D, 2>(p, stream);
  }
  if (p.num_splits > 1) launch_prefill_combine<D>(p, stream);
}

}  // namespace

bool prefill_uses_wgmma(const PrefillParams& p) {
#ifdef LAZYSCOPE_HAVE_WGMMA
  return p.kernel != PrefillParams::Kernel::MmaSync && (p.head_dim == 64 || p.head_dim == 128) &&
         current_kernel_path().wgmma;
#else
  (void)p;
  return false;
#endif
}

const char* prefill_kernel_name(const PrefillParams& p) {
  if (!prefill_uses_wgmma(p)) return "mma.sync";
  return p.kernel == PrefillParams::Kernel::Wgmma ? "wgmma" : "wgmma, warp-specialised";
}

bool prefill_splits_follow_shift_runs(const PrefillParams& p) {
  return !prefill_uses_wgmma(p) || p.kernel == PrefillParams::Kernel::Wgmma;
}

int prefill_num_splits(int n, int num_heads, int num_kv_heads, int num_tiles, int sm_count,
                       const PrefillParams& kernel) {
  const int rows = n * (num_heads / num_kv_heads);
  constexpr int kRows = rows_per_cta<2>();  // 128: mma.sync's CTA and the warp-specialised kernel's
  const int ctas = ((rows + kRows - 1) / kRows) * num_kv_heads;
  if (prefill_uses_wgmma(kernel) && kernel.kernel != PrefillParams::Kernel::Wgmma) {
    // The warp-specialised kernel runs one CTA an SM: at most one wave of CTAs (a second, shorter
    // wave pays another prologue and pipeline fill for the same keys), each at least 8 tiles long.
    int splits = std::max(1, sm_count / ctas);
    splits = std::min(splits, std::max(1, num_tiles / 8));
    return std::min(splits, 16);
  }
  int splits = (2 * sm_count + ctas - 1) / ctas;
  splits = std::min(splits, std::max(1, num_tiles / 4));  // keep at least 4 tiles per split
  return std::max(1, std::min(splits, 16));
}

void prefill_attention(const PrefillParams& p, cudaStream_t stream) {
  if (p.n == 0) return;
  if (p.num_kv_heads <= 0 || p.num_heads % p.num_kv_heads != 0) {
    throw Error("cuda prefill attention: num_heads must be a multiple of num_kv_heads");
  }
  if (p.persistent_ctas < 0) {
    throw Error("cuda prefill attention: persistent_ctas " + std::to_string(p.persistent_ctas) +
                " (valid: 0 for one CTA an SM, or a grid cap >= 1)");
  }
  if (p.num_splits > 1 && (p.partial_o == nullptr || p.partial_ml == nullptr)) {
    throw Error("cuda prefill attention: split workspace missing");
  }
  // Entries and tile descriptors are copied into shared memory 16 bytes at a time.
  if (reinterpret_cast<std::uintptr_t>(p.entries) % 16 != 0 || reinterpret_cast<std::uintptr_t>(p.tiles) % 16 != 0) {
    throw Error("cuda prefill attention: entries and tiles must be 16-byte aligned device arrays");
  }
  if (p.lazy) {
    if (p.q_rotated == nullptr || p.shifts == nullptr || p.tile_shift_index == nullptr || p.num_shifts < 1 ||
        p.split_ranges == nullptr) {
      throw Error("cuda prefill attention: lazy call without shifts or rotated-query workspace");
    }
    if (!prefill_splits_follow_shift_runs(p) && p.tile_run_end == nullptr) {
      throw Error("cuda prefill attention: lazy call without tile_run_end (the warp-specialised kernel reads it)");
    }
    if (!p.q_rotated_ready) {  // else kv_write already wrote the per-shift copies
      rotate_queries_kernel<<<dim3(p.n, p.num_shifts), 256, p.head_dim * sizeof(float), stream>>>(p);
      LAZYSCOPE_CUDA_LAUNCH_CHECK();
    }
  }
  if (p.head_dim == 128) {
    dispatch_prefill<128>(p, stream);
  } else if (p.head_dim == 64) {
    dispatch_prefill<64>(p, stream);
  } else if (p.head_dim == 32) {
    dispatch_prefill<32>(p, stream);
  } else if (p.head_dim == 16) {
    dispatch_prefill<16>(p, stream);
  } else {
    throw Error("cuda prefill attention: head_dim " + std::to_string(p.head_dim) + " (supported: 16, 32, 64, 128)");
  }
}

}  // namespace lazyscope::cuda

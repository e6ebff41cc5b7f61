// The wgmma builds of the prefill attention kernel, compiled for sm_90a alone as an object of
// their own (kernels/CMakeLists.txt), so a Hopper GPU loads exactly this code for them:
// the warp-specialised kernel (attention_prefill_ws.cuh, the default) and the shared body's
// two-CTA wgmma build (attention_prefill_kernel.cuh). attention_prefill.cu launches them on
// compute capability 9.0 when the build holds them.
#include <algorithm>

#include <cuda.h>
#include <cudaTypedefs.h>

#include "kernels/cuda/attention_prefill_kernel.cuh"
#include "kernels/cuda/attention_prefill_ws.cuh"
#include "kernels/cuda/check.h"

namespace lazyscope::cuda {
namespace {

// One attribute call per kernel instantiation.
template <typename Kernel>
void allow_smem(Kernel kernel, int bytes, bool& configured) {
  if (!configured) {
    LAZYSCOPE_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes));
    configured = true;
  }
}

template <int D, bool LAZY>
void launch_wgmma(const PrefillParams& p, cudaStream_t stream) {
  constexpr int kSmem = smem_bytes<D, 1, true>();
  static bool configured = false;
  allow_smem(prefill_kernel_wgmma<D, LAZY>, kSmem, configured);
  const int rows = p.n * (p.num_heads / p.num_kv_heads);
  constexpr int kRows = rows_per_cta<1, true>();
  dim3 grid((rows + kRows - 1) / kRows, p.num_kv_heads, p.num_splits);
  prefill_kernel_wgmma<D, LAZY><<<grid, kernel_warps<true>() * 32, kSmem, stream>>>(p);
  LAZYSCOPE_CUDA_LAUNCH_CHECK();
}

// The driver's tensor-map encoder, looked up once through the runtime (no link to libcuda).
PFN_cuTensorMapEncodeTiled_v12000 tensor_map_encoder() {
  static PFN_cuTensorMapEncodeTiled_v12000 encode = [] {
    void* function = nullptr;
    cudaDriverEntryPointQueryResult found{};
    if (cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &function, 12000, cudaEnableDefault, &found) !=
            cudaSuccess ||
        found != cudaDriverEntryPointSuccess) {
      (void)cudaGetLastError();
      function = nullptr;
    }
    return reinterpret_cast<PFN_cuTensorMapEncodeTiled_v12000>(function);
  }();
  return encode;
}

// Lazy: q_rotated [shift][token][head][dim] as a 4-D tensor whose box is one 64-dim half of a
// CTA's 128 query rows (128 / G tokens x the G heads of its KV head), 128-byte swizzled like the
// query buffers; tokens past n read as zeros. False (the kernel then copies the query with
// cp.async) where G does not divide 128 or the driver has no encoder.
bool ws_query_map(const PrefillParams& p, CUtensorMap* map) {
  const int group = p.num_heads / p.num_kv_heads;
  PFN_cuTensorMapEncodeTiled_v12000 encode = tensor_map_encoder();
  if (!p.lazy || p.q_rotated == nullptr || kWsRows % group != 0 || encode == nullptr) return false;
  const cuuint64_t row_bytes = cuuint64_t(p.num_heads) * p.head_dim * 2;
  const cuuint64_t dims[4] = {cuuint64_t(p.head_dim), cuuint64_t(p.num_heads), cuuint64_t(p.n),
                              cuuint64_t(p.num_shifts)};
  const cuuint64_t strides[3] = {cuuint64_t(p.head_dim) * 2, row_bytes, row_bytes * cuuint64_t(p.n)};
  const cuuint32_t box[4] = {64, cuuint32_t(group), cuuint32_t(kWsRows / group), 1};
  const cuuint32_t element_strides[4] = {1, 1, 1, 1};
  return encode(map, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 4, p.q_rotated, dims, strides, box, element_strides,
                CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_L2_128B,
                CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE) == CUDA_SUCCESS;
}

template <int D, bool LAZY, bool QMAP, bool PERSIST>
void launch_ws(const PrefillParams& p, const CUtensorMap& q_map, cudaStream_t stream) {
  constexpr int kSmem = ws_smem_bytes<D, LAZY || PERSIST>();
  static bool configured = false;
  allow_smem(prefill_kernel_ws<D, LAZY, QMAP, PERSIST>, kSmem, configured);
  const int row_tiles = (p.n * (p.num_heads / p.num_kv_heads) + kWsRows - 1) / kWsRows;
  dim3 grid(row_tiles, p.num_kv_heads, p.num_splits);
  if constexpr (PERSIST) {
    const int ctas = p.persistent_ctas > 0 ? p.persistent_ctas : detail::cached_sm_count();
    grid = dim3(std::min(row_tiles * p.num_kv_heads, ctas));
  }
  prefill_kernel_ws<D, LAZY, QMAP, PERSIST><<<grid, kWsThreads, kSmem, stream>>>(p, q_map);
  LAZYSCOPE_CUDA_LAUNCH_CHECK();
}

template <int D>
void launch_ws(const PrefillParams& p, cudaStream_t stream) {
  CUtensorMap q_map{};
  const bool persistent = p.persistent && p.num_splits == 1;
  if (!p.lazy) {
    if (persistent) {
      launch_ws<D, false, false, true>(p, q_map, stream);
    } else {
      launch_ws<D, false, false, false>(p, q_map, stream);
    }
  } else if (persistent && p.num_shifts == 1) {
    // Every tile at one shift (a prompt with no cached document): plain attention of the one rotated
    // copy of the query, so the plain kernel's persistent walk.
    PrefillParams plain = p;
    plain.lazy = false;
    plain.q = p.q_rotated;
    plain.q_row_stride = int64_t(p.num_heads) * p.head_dim;
    launch_ws<D, false, false, true>(plain, q_map, stream);
  } else if (ws_query_map(p, &q_map)) {
    launch_ws<D, true, true, false>(p, q_map, stream);
  } else {
    launch_ws<D, true, false, false>(p, q_map, stream);
  }
}

template <int D>
void launch(const PrefillParams& p, cudaStream_t stream) {
  if (p.kernel == PrefillParams::Kernel::Wgmma) {
    p.lazy ? launch_wgmma<D, true>(p, stream) : launch_wgmma<D, false>(p, stream);
  } else {
    launch_ws<D>(p, stream);
  }
}

}  // namespace

void prefill_attention_wgmma(const PrefillParams& p, cudaStream_t stream) {
  if (p.head_dim == 128) {
    launch<128>(p, stream);
  } else {
    launch<64>(p, stream);
  }
}

}  // namespace lazyscope::cuda

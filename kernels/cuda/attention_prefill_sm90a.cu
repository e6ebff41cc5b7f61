// The wgmma builds of the prefill attention kernel, compiled for sm_90a alone as an object of
// their own (kernels/CMakeLists.txt), so a Hopper GPU loads exactly this code for them:
// the warp-specialised kernel (attention_prefill_ws.cuh, the default) and the shared body's
// two-CTA wgmma build (attention_prefill_kernel.cuh). attention_prefill.cu launches them on
// compute capability 9.0 when the build holds them.
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

template <int D, bool LAZY>
void launch_ws(const PrefillParams& p, cudaStream_t stream) {
  constexpr int kSmem = ws_smem_bytes<D, LAZY>();
  static bool configured = false;
  allow_smem(prefill_kernel_ws<D, LAZY>, kSmem, configured);
  const int rows = p.n * (p.num_heads / p.num_kv_heads);
  dim3 grid((rows + kWsRows - 1) / kWsRows, p.num_kv_heads, p.num_splits);
  prefill_kernel_ws<D, LAZY><<<grid, kWsThreads, kSmem, stream>>>(p);
  LAZYSCOPE_CUDA_LAUNCH_CHECK();
}

template <int D>
void launch(const PrefillParams& p, cudaStream_t stream) {
  if (p.kernel == PrefillParams::Kernel::Wgmma) {
    p.lazy ? launch_wgmma<D, true>(p, stream) : launch_wgmma<D, false>(p, stream);
  } else {
    p.lazy ? launch_ws<D, true>(p, stream) : launch_ws<D, false>(p, stream);
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

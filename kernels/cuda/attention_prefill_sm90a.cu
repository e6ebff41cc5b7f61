// The wgmma build of the prefill attention kernel (attention_prefill_kernel.cuh), compiled for
// sm_90a alone as an object of its own (kernels/CMakeLists.txt), so a Hopper GPU loads exactly
// this code for it; attention_prefill.cu launches it on compute capability 9.0 when the build holds it.
#include "kernels/cuda/attention_prefill_kernel.cuh"
#include "kernels/cuda/check.h"

namespace lazyscope::cuda {
namespace {

template <int D, bool LAZY>
void launch_wgmma(const PrefillParams& p, cudaStream_t stream) {
  constexpr int kSmem = smem_bytes<D, 1, true>();
  static bool configured = false;  // one attribute call per instantiation
  if (!configured) {
    LAZYSCOPE_CUDA_CHECK(
        cudaFuncSetAttribute(prefill_kernel_wgmma<D, LAZY>, cudaFuncAttributeMaxDynamicSharedMemorySize, kSmem));
    configured = true;
  }
  const int rows = p.n * (p.num_heads / p.num_kv_heads);
  constexpr int kRows = rows_per_cta<1, true>();
  dim3 grid((rows + kRows - 1) / kRows, p.num_kv_heads, p.num_splits);
  prefill_kernel_wgmma<D, LAZY><<<grid, kernel_warps<true>() * 32, kSmem, stream>>>(p);
  LAZYSCOPE_CUDA_LAUNCH_CHECK();
}

}  // namespace

void prefill_attention_wgmma(const PrefillParams& p, cudaStream_t stream) {
  if (p.head_dim == 128) {
    p.lazy ? launch_wgmma<128, true>(p, stream) : launch_wgmma<128, false>(p, stream);
  } else {
    p.lazy ? launch_wgmma<64, true>(p, stream) : launch_wgmma<64, false>(p, stream);
  }
}

}  // namespace lazyscope::cuda

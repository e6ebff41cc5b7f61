#pragma once
// Timing helpers shared by the CUDA benchmark programs: events, medians, copy bandwidth.
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstdio>
#include <functional>
#include <vector>

#include "kernels/cuda/check.h"

namespace lazyscope::bench {

// Median over `repeats` timed runs (each `inner` back-to-back calls), in milliseconds per call.
inline double median_ms(const std::function<void()>& body, int repeats = 15, int inner = 5, int warmup = 3) {
  cudaEvent_t start, stop;
  LAZYSCOPE_CUDA_CHECK(cudaEventCreate(&start));
  LAZYSCOPE_CUDA_CHECK(cudaEventCreate(&stop));
  for (int i = 0; i < warmup; ++i) body();
  LAZYSCOPE_CUDA_CHECK(cudaDeviceSynchronize());
  std::vector<double> times;
  for (int r = 0; r < repeats; ++r) {
    LAZYSCOPE_CUDA_CHECK(cudaEventRecord(start, nullptr));
    for (int i = 0; i < inner; ++i) body();
    LAZYSCOPE_CUDA_CHECK(cudaEventRecord(stop, nullptr));
    LAZYSCOPE_CUDA_CHECK(cudaEventSynchronize(stop));
    float ms = 0.0f;
    LAZYSCOPE_CUDA_CHECK(cudaEventElapsedTime(&ms, start, stop));
    times.push_back(double(ms) / inner);
  }
  LAZYSCOPE_CUDA_CHECK(cudaEventDestroy(start));
  LAZYSCOPE_CUDA_CHECK(cudaEventDestroy(stop));
  std::sort(times.begin(), times.end());
  return times[times.size() / 2];
}

// Device-to-device copy bandwidth, bytes read + written, in GB/s.
inline double copy_bandwidth_gbs(std::size_t bytes = std::size_t(2) << 30) {
  void *a = nullptr, *b = nullptr;
  LAZYSCOPE_CUDA_CHECK(cudaMalloc(&a, bytes));
  LAZYSCOPE_CUDA_CHECK(cudaMalloc(&b, bytes));
  LAZYSCOPE_CUDA_CHECK(cudaMemset(a, 1, bytes));
  const double ms = median_ms([&] { LAZYSCOPE_CUDA_CHECK(cudaMemcpyAsync(b, a, bytes, cudaMemcpyDeviceToDevice, nullptr)); },
                              10, 3, 2);
  LAZYSCOPE_CUDA_CHECK(cudaFree(a));
  LAZYSCOPE_CUDA_CHECK(cudaFree(b));
  return 2.0 * double(bytes) / (ms * 1e-3) / 1e9;
}

}  // namespace lazyscope::bench

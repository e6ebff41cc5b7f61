#pragma once
// Helpers for the GPU kernel tests: skip without a GPU, bf16 upload/download, error norms.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "kernels/cuda/bf16_host.h"
#include "kernels/cuda/check.h"
#include "kernels/cuda/device_buffer.h"
#include "kernels/cuda/tool_switches.h"
#include "kernels/cuda_entry.h"

#define LAZYSCOPE_REQUIRE_GPU()                                                              \
  do {                                                                                       \
    if (::lazyscope::cuda::device_count() == 0) {                                            \
      GTEST_SKIP() << "no CUDA GPU or driver visible: this GPU test needs one (skipped, not passed)"; \
    }                                                                                        \
  } while (0)

namespace lazyscope::cuda::test {

// Random values already representable in bf16, so CPU and GPU see identical inputs.
inline std::vector<float> random_bf16_values(std::size_t count, std::mt19937& rng, float scale = 1.0f) {
  std::normal_distribution<float> normal(0.0f, scale);
  std::vector<float> out(count);
  for (float& v : out) v = bf16_to_float(float_to_bf16(normal(rng)));
  return out;
}

inline DeviceBuffer upload_as_bf16(const std::vector<float>& values) {
  std::vector<bf16_bits> bits(values.size());
  for (std::size_t i = 0; i < values.size(); ++i) bits[i] = float_to_bf16(values[i]);
  DeviceBuffer buffer(bits.size() * sizeof(bf16_bits) + 16);
  LAZYSCOPE_CUDA_CHECK(cudaMemcpy(buffer.as<void>(), bits.data(), bits.size() * 2, cudaMemcpyHostToDevice));
  return buffer;
}

template <typename T>
DeviceBuffer upload(const std::vector<T>& values) {
  DeviceBuffer buffer(values.size() * sizeof(T) + 16);
  if (!values.empty()) {
    LAZYSCOPE_CUDA_CHECK(cudaMemcpy(buffer.as<void>(), values.data(), values.size() * sizeof(T), cudaMemcpyHostToDevice));
  }
  return buffer;
}

inline std::vector<float> download_bf16(const DeviceBuffer& buffer, std::size_t count) {
  std::vector<bf16_bits> bits(count);
  LAZYSCOPE_CUDA_CHECK(cudaMemcpy(bits.data(), buffer.as<void>(), count * 2, cudaMemcpyDeviceToHost));
  std::vector<float> out(count);
  for (std::size_t i = 0; i < count; ++i) out[i] = bf16_to_float(bits[i]);
  return out;
}

// ‖out − ref‖ / ‖ref‖; NaN anywhere gives infinity.
inline double relative_error(const std::vector<float>& out, const std::vector<float>& ref) {
  double diff = 0.0, norm = 0.0;
  for (std::size_t i = 0; i < ref.size(); ++i) {
    if (!std::isfinite(out[i])) return INFINITY;
    diff += double(out[i] - ref[i]) * double(out[i] - ref[i]);
    norm += double(ref[i]) * double(ref[i]);
  }
  return std::sqrt(diff / std::max(norm, 1e-30));
}

// Whether LAZYSCOPE_CUDA_NO_GRAPHS=1 (the GPU sanitizer runner's last retry) keeps every step off
// CUDA graphs in this process.
inline bool graphs_switched_off() { return tool_switches().no_graphs; }

// A backend that uses graphs replayed at least `at_least` steps from them; with graphs switched
// off it replayed and captured none.
inline testing::AssertionResult graph_use_as_expected(long replays, long captures, long at_least) {
  if (graphs_switched_off()) {
    if (replays == 0 && captures == 0) return testing::AssertionSuccess();
    return testing::AssertionFailure() << "graphs are switched off, yet " << replays << " replays and "
                                       << captures << " captures";
  }
  if (replays >= at_least) return testing::AssertionSuccess();
  return testing::AssertionFailure() << replays << " graph replays, expected at least " << at_least;
}

}  // namespace lazyscope::cuda::test

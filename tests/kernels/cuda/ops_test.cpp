// GPU Llama ops against straightforward CPU arithmetic.
#include <gtest/gtest.h>

#include <random>
#include <vector>

#include "gpu_test_util.h"
#include "kernels/cuda/ops.h"

namespace lazyscope::cuda {
namespace {

using test::random_bf16_values;
using test::relative_error;
using test::upload;
using test::upload_as_bf16;

TEST(GemvTest, MatchesCpuForWideAndNarrowRowsWithAccumulation) {
  LAZYSCOPE_REQUIRE_GPU();
  std::mt19937 rng(5);
  // 4136 columns: the four-piece unrolled loop plus a tail; 8 columns: the tail alone.
  for (int cols : {4136, 8, 1024}) {
    const int rows = 301;
    const std::vector<float> w = random_bf16_values(std::size_t(rows) * cols, rng, 0.05f);
    const std::vector<float> x = random_bf16_values(cols, rng);
    const std::vector<float> base = random_bf16_values(rows, rng);
    std::vector<float> expected(rows);
    for (int r = 0; r < rows; ++r) {
      double sum = 0.0;
      for (int c = 0; c < cols; ++c) sum += double(w[std::size_t(r) * cols + c]) * x[c];
      expected[r] = float(sum) + base[r];
    }
    DeviceBuffer d_w = upload_as_bf16(w), d_x = upload_as_bf16(x), d_out = upload(base);
    gemv_bf16(d_x.as<bf16_bits>(), d_w.as<bf16_bits>(), rows, cols, d_out.as<float>(), true, true, nullptr);
    LAZYSCOPE_CUDA_CHECK(cudaDeviceSynchronize());
    std::vector<float> out(rows);
    LAZYSCOPE_CUDA_CHECK(cudaMemcpy(out.data(), d_out.as<void>(), rows * sizeof(float), cudaMemcpyDeviceToHost));
    EXPECT_LT(relative_error(out, expected), 1e-5) << "cols " << cols;
  }
}

}  // namespace
}  // namespace lazyscope::cuda

// GPU Llama ops against straightforward CPU arithmetic.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "gpu_test_util.h"
#include "kernels/cuda/gemv.h"
#include "kernels/cuda/ops.h"

namespace lazyscope::cuda {
namespace {

using test::random_bf16_values;
using test::relative_error;
using test::upload;
using test::upload_as_bf16;

// A split-K workspace sized for (rows, cols), counters zeroed as the backend does; `context`
// launches with it (default launch choices), `one_pass` without it.
struct TestGemvWorkspace {
  DeviceBuffer partial, counters;
  GemvContext context, one_pass;
  TestGemvWorkspace(int rows, int cols) { size_for(rows, gemv_workspace_size(rows, cols)); }
  void size_for(int rows, const GemvWorkspaceSize& need) {
    partial.resize(std::max<std::size_t>(need.partial_floats, 1) * sizeof(float));
    counters.resize(std::size_t(std::max(need.num_counters, 1)) * sizeof(unsigned));
    LAZYSCOPE_CUDA_CHECK(cudaMemset(counters.as<void>(), 0, counters.bytes()));
    context.workspace =
        GemvWorkspace{partial.as<float>(), need.partial_floats, counters.as<unsigned>(), need.num_counters};
  }
};

std::vector<float> download_f32(const DeviceBuffer& buffer, int count) {
  std::vector<float> out(count);
  LAZYSCOPE_CUDA_CHECK(cudaMemcpy(out.data(), buffer.as<void>(), count * sizeof(float), cudaMemcpyDeviceToHost));
  return out;
}

// Every column count exercises a different path: 4136 the unrolled steps plus a partial one
// (2 splits), 8 a single piece, 1024 exact steps, 16384 eight splits; 301 rows leave a partial
// row block. Each runs one pass (no workspace) and split-K (workspace), fp32 with accumulation.
TEST(GemvTest, MatchesCpuForWideAndNarrowRowsWithAccumulation) {
  LAZYSCOPE_REQUIRE_GPU();
  std::mt19937 rng(5);
  for (int cols : {4136, 8, 1024, 16384}) {
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
    DeviceBuffer d_w = upload_as_bf16(w), d_x = upload_as_bf16(x);
    TestGemvWorkspace workspace(rows, cols);
    for (bool split : {false, true}) {
      DeviceBuffer d_out = upload(base);
      gemv_bf16(d_x.as<bf16_bits>(), d_w.as<bf16_bits>(), rows, cols, d_out.as<float>(), true, true, nullptr,
                split ? workspace.context : workspace.one_pass);
      LAZYSCOPE_CUDA_CHECK(cudaDeviceSynchronize());
      EXPECT_LT(relative_error(download_f32(d_out, rows), expected), 1e-5)
          << "cols " << cols << (split ? ", split-K (" + std::to_string(gemv_num_splits(rows, cols)) + ")" : "");
    }
  }
}

// Split-K leaves its counters at zero: repeated calls (as a graph replays them) give identical
// results, also into a bf16 output with and without accumulation.
TEST(GemvTest, SplitKIsRepeatableAndWritesBf16) {
  LAZYSCOPE_REQUIRE_GPU();
  std::mt19937 rng(9);
  const int rows = 77, cols = 16384;
  ASSERT_GT(gemv_num_splits(rows, cols), 1) << "this shape should split";
  const std::vector<float> w = random_bf16_values(std::size_t(rows) * cols, rng, 0.05f);
  const std::vector<float> x = random_bf16_values(cols, rng);
  const std::vector<float> base = random_bf16_values(rows, rng);
  DeviceBuffer d_w = upload_as_bf16(w), d_x = upload_as_bf16(x);
  TestGemvWorkspace workspace(rows, cols);
  std::vector<float> expected(rows);
  for (int r = 0; r < rows; ++r) {
    double sum = 0.0;
    for (int c = 0; c < cols; ++c) sum += double(w[std::size_t(r) * cols + c]) * x[c];
    expected[r] = float(sum);
  }
  DeviceBuffer d_out(rows * sizeof(float));
  std::vector<float> first;
  for (int call = 0; call < 3; ++call) {
    gemv_bf16(d_x.as<bf16_bits>(), d_w.as<bf16_bits>(), rows, cols, d_out.as<float>(), true, false, nullptr,
              workspace.context);
    LAZYSCOPE_CUDA_CHECK(cudaDeviceSynchronize());
    const std::vector<float> out = download_f32(d_out, rows);
    EXPECT_LT(relative_error(out, expected), 1e-5) << "call " << call;
    if (call == 0) first = out;
    EXPECT_EQ(out, first) << "call " << call << " differs from the first";
  }
  // The L2 prefetch (experimental) and plain launches move no arithmetic: the same bits.
  for (const auto& [prefetch, programmatic] : {std::pair{4, true}, std::pair{0, false}, std::pair{4, false}}) {
    GemvContext variant = workspace.context;
    variant.prefetch_steps = prefetch;
    variant.programmatic = programmatic;
    gemv_bf16(d_x.as<bf16_bits>(), d_w.as<bf16_bits>(), rows, cols, d_out.as<float>(), true, false, nullptr, variant);
    LAZYSCOPE_CUDA_CHECK(cudaDeviceSynchronize());
    EXPECT_EQ(download_f32(d_out, rows), first) << "prefetch " << prefetch << ", programmatic " << programmatic;
  }
  std::vector<unsigned> counters(workspace.context.workspace.num_counters);
  LAZYSCOPE_CUDA_CHECK(cudaMemcpy(counters.data(), workspace.counters.as<void>(), counters.size() * sizeof(unsigned),
                                  cudaMemcpyDeviceToHost));
  for (unsigned c : counters) EXPECT_EQ(c, 0u);
  // Any explicit split count (uneven ranges too) gives the same sums within rounding.
  for (int splits : {1, 3, 5, 16}) {
    TestGemvWorkspace any(rows, 1);
    any.size_for(rows, gemv_workspace_size_for_splits(rows, splits));
    for (int rows_per_warp : {2, 4}) {
      gemv_bf16_splits(d_x.as<bf16_bits>(), d_w.as<bf16_bits>(), rows, cols, d_out.as<float>(), true, false, nullptr,
                       any.context, splits, rows_per_warp);
      LAZYSCOPE_CUDA_CHECK(cudaDeviceSynchronize());
      EXPECT_LT(relative_error(download_f32(d_out, rows), expected), 1e-5)
          << splits << " splits, " << rows_per_warp << " rows a warp";
    }
  }
  // bf16 output: plain, then accumulated onto a bf16 base.
  DeviceBuffer d_bf16 = upload_as_bf16(base);
  gemv_bf16(d_x.as<bf16_bits>(), d_w.as<bf16_bits>(), rows, cols, d_bf16.as<bf16_bits>(), false, true, nullptr,
            workspace.context);
  LAZYSCOPE_CUDA_CHECK(cudaDeviceSynchronize());
  std::vector<float> expected_acc(rows);
  for (int r = 0; r < rows; ++r) expected_acc[r] = expected[r] + base[r];
  EXPECT_LT(relative_error(test::download_bf16(d_bf16, rows), expected_acc), 1e-2);
}

std::vector<float> bf16_round(std::vector<float> values) {
  for (float& v : values) v = bf16_to_float(float_to_bf16(v));
  return values;
}

std::vector<float> reference_gemv(const std::vector<float>& w, const std::vector<float>& x, int rows, int cols) {
  std::vector<float> out(rows);
  for (int r = 0; r < rows; ++r) {
    double sum = 0.0;
    for (int c = 0; c < cols; ++c) sum += double(w[std::size_t(r) * cols + c]) * x[c];
    out[r] = float(sum);
  }
  return out;
}

// The split rule of GemvContext::split_ctas_per_sm, on a 132-SM device (host logic, no GPU): the
// 1B's wo and down (128 row blocks) split in two for one CTA an SM; wqkv (192) only from two; the
// 8B's full grids never; narrow rows stop at 8 pieces a split, tiny grids at 16 splits.
TEST(GemvTest, SplitsToFillTheGrid) {
  EXPECT_EQ(gemv_splits_to_fill(2048, 2048, 132, 1), 2);
  EXPECT_EQ(gemv_splits_to_fill(2048, 8192, 132, 1), 2);
  EXPECT_EQ(gemv_splits_to_fill(2048, 8192, 132, 2), 4);
  EXPECT_EQ(gemv_splits_to_fill(3072, 2048, 132, 1), 1);
  EXPECT_EQ(gemv_splits_to_fill(3072, 2048, 132, 2), 2);
  EXPECT_EQ(gemv_splits_to_fill(4096, 14336, 132, 1), 1);
  EXPECT_EQ(gemv_splits_to_fill(128256, 4096, 132, 8), 1);
  EXPECT_EQ(gemv_splits_to_fill(960, 576, 132, 1), 4);   // 60 row blocks: 2 splits make 120 CTAs, 4 make 240
  EXPECT_EQ(gemv_splits_to_fill(64, 64, 132, 4), 1);     // 8 pieces: no room for two splits of 8
  EXPECT_EQ(gemv_splits_to_fill(16, 65536, 132, 8), 16);
}

// RMSNorm folded into the GEMV input: against bf16(rmsnorm(x) * g) @ w^T on the CPU, with split-K
// (16384 columns), one pass, and a range too wide for shared memory (the separate-op fallback).
TEST(GemvTest, RmsNormInputMatchesCpu) {
  LAZYSCOPE_REQUIRE_GPU();
  std::mt19937 rng(21);
  struct Case { int rows, cols; bool workspace; };
  for (const Case c : {Case{301, 4096, true}, Case{93, 16384, true}, Case{40, 4096, false}, Case{20, 49152, false}}) {
    const std::vector<float> w = random_bf16_values(std::size_t(c.rows) * c.cols, rng, 0.05f);
    const std::vector<float> x = random_bf16_values(c.cols, rng, 3.0f);  // fp32 residual
    std::vector<float> g = random_bf16_values(c.cols, rng, 0.2f);
    for (float& v : g) v += 1.0f;
    const float eps = 1e-5f;
    double ss = 0.0;
    for (float v : x) ss += double(v) * v;
    const float inv = float(1.0 / std::sqrt(ss / c.cols + eps));
    std::vector<float> normed(c.cols);
    for (int i = 0; i < c.cols; ++i) normed[i] = x[i] * inv * g[i];
    const std::vector<float> expected = reference_gemv(w, bf16_round(normed), c.rows, c.cols);
    DeviceBuffer d_w = upload_as_bf16(w), d_x = upload(x), d_g = upload(g), d_out(c.rows * sizeof(float));
    DeviceBuffer scratch(std::size_t(c.cols) * 2);
    TestGemvWorkspace workspace(c.rows, c.cols);
    gemv_rmsnorm_bf16(d_x.as<float>(), d_g.as<float>(), eps, d_w.as<bf16_bits>(), c.rows, c.cols, d_out.as<float>(),
                      true, false, nullptr, c.workspace ? workspace.context : workspace.one_pass, scratch.as<bf16_bits>());
    LAZYSCOPE_CUDA_CHECK(cudaDeviceSynchronize());
    EXPECT_LT(relative_error(download_f32(d_out, c.rows), expected), 5e-3) << c.rows << "x" << c.cols;
  }
}

// SwiGLU folded into the GEMV input, accumulating into an fp32 residual (the down projection).
TEST(GemvTest, SwiGluInputMatchesCpu) {
  LAZYSCOPE_REQUIRE_GPU();
  std::mt19937 rng(22);
  struct Case { int rows, cols; bool workspace; };
  for (const Case c : {Case{301, 14336, true}, Case{64, 1024, true}, Case{20, 49152, false}}) {
    const std::vector<float> w = random_bf16_values(std::size_t(c.rows) * c.cols, rng, 0.05f);
    const std::vector<float> gate_up = random_bf16_values(std::size_t(2) * c.cols, rng, 2.0f);
    const std::vector<float> base = random_bf16_values(c.rows, rng);
    std::vector<float> act(c.cols);
    for (int i = 0; i < c.cols; ++i) {
      const float gate = gate_up[i], up = gate_up[c.cols + i];
      act[i] = gate / (1.0f + std::exp(-gate)) * up;
    }
    std::vector<float> expected = reference_gemv(w, bf16_round(act), c.rows, c.cols);
    for (int r = 0; r < c.rows; ++r) expected[r] += base[r];
    DeviceBuffer d_w = upload_as_bf16(w), d_gu = upload_as_bf16(gate_up), d_out = upload(base);
    DeviceBuffer scratch(std::size_t(c.cols) * 2);
    TestGemvWorkspace workspace(c.rows, c.cols);
    gemv_swiglu_bf16(d_gu.as<bf16_bits>(), d_w.as<bf16_bits>(), c.rows, c.cols, d_out.as<float>(), true, true, nullptr,
                     c.workspace ? workspace.context : workspace.one_pass, scratch.as<bf16_bits>());
    LAZYSCOPE_CUDA_CHECK(cudaDeviceSynchronize());
    EXPECT_LT(relative_error(download_f32(d_out, c.rows), expected), 5e-3) << c.rows << "x" << c.cols;
  }
}

// SwiGLU folded into the gate_up GEMV's epilogue: bit for bit what the RMSNorm-staged GEMV into a
// bf16 gate_up and the separate swiglu launch store, for one pass and for split-K (the last CTA of
// a row block forms the pairs), with pairs past the end of the last row block (inter 301, 5 and
// 91: their rows alias valid pairs' up rows, which they must not overwrite); a range too wide for
// shared memory launches nothing and says so.
TEST(GemvTest, SwiGluEpilogueEqualsGateUpThenSwiGlu) {
  LAZYSCOPE_REQUIRE_GPU();
  std::mt19937 rng(24);
  struct Case { int inter, cols, split_ctas_per_sm; };
  for (const Case c : {Case{301, 4096, 0}, Case{5, 64, 0}, Case{1024, 2048, 4}, Case{91, 8192, 8}}) {
    const int rows = 2 * c.inter;
    const std::vector<float> w = random_bf16_values(std::size_t(rows) * c.cols, rng, 0.05f);
    const std::vector<float> x = random_bf16_values(c.cols, rng, 3.0f);
    std::vector<float> g = random_bf16_values(c.cols, rng, 0.2f);
    for (float& v : g) v += 1.0f;
    DeviceBuffer d_w = upload_as_bf16(w), d_x = upload(x), d_g = upload(g);
    DeviceBuffer gate_up(std::size_t(rows) * 2), separate(std::size_t(c.inter) * 2), folded(std::size_t(c.inter) * 2);
    DeviceBuffer scratch(std::size_t(c.cols) * 2);
    TestGemvWorkspace workspace(rows, c.cols);
    GemvContext context = workspace.one_pass;
    if (c.split_ctas_per_sm > 0) {
      workspace.size_for(rows, gemv_workspace_size_for_splits(rows, 16));
      context = workspace.context;
      context.split_ctas_per_sm = c.split_ctas_per_sm;
    }
    gemv_rmsnorm_bf16(d_x.as<float>(), d_g.as<float>(), 1e-5f, d_w.as<bf16_bits>(), rows, c.cols,
                      gate_up.as<bf16_bits>(), false, false, nullptr, context, scratch.as<bf16_bits>());
    swiglu(gate_up.as<bf16_bits>(), 1, c.inter, separate.as<bf16_bits>(), nullptr);
    ASSERT_TRUE(gemv_rmsnorm_gate_up_swiglu(d_x.as<float>(), d_g.as<float>(), 1e-5f, d_w.as<bf16_bits>(), c.inter,
                                            c.cols, folded.as<bf16_bits>(), nullptr, context));
    LAZYSCOPE_CUDA_CHECK(cudaDeviceSynchronize());
    std::vector<bf16_bits> want(c.inter), got(c.inter);
    LAZYSCOPE_CUDA_CHECK(cudaMemcpy(want.data(), separate.as<void>(), want.size() * 2, cudaMemcpyDeviceToHost));
    LAZYSCOPE_CUDA_CHECK(cudaMemcpy(got.data(), folded.as<void>(), got.size() * 2, cudaMemcpyDeviceToHost));
    int differ = 0;
    for (int i = 0; i < c.inter; ++i) differ += want[i] != got[i];
    EXPECT_EQ(differ, 0) << "inter " << c.inter << ", cols " << c.cols << ", split rule " << c.split_ctas_per_sm;
  }
  DeviceBuffer w(std::size_t(8) * 49152 * 2), x(49152 * 4), g(49152 * 4), act(8);
  EXPECT_FALSE(gemv_rmsnorm_gate_up_swiglu(x.as<float>(), g.as<float>(), 1e-5f, w.as<bf16_bits>(), 4, 49152,
                                           act.as<bf16_bits>(), nullptr, GemvContext{}));
}

// The separate RMSNorm and SwiGLU launches (prompt steps, batched decode) over several rows:
// widths of a multiple of 4 / 8 take the vector kernels, the others the scalar ones; each value
// against the CPU within a bf16 rounding (SwiGLU: the same float arithmetic, so expf apart, equal).
TEST(NormActivationTest, RowsMatchCpuOnVectorAndScalarPaths) {
  LAZYSCOPE_REQUIRE_GPU();
  std::mt19937 rng(23);
  constexpr int kRows = 37;
  for (int cols : {4096, 2052, 4093, 37}) {
    const std::vector<float> x = random_bf16_values(std::size_t(kRows) * cols, rng, 3.0f);
    std::vector<float> g = random_bf16_values(cols, rng, 0.2f);
    for (float& v : g) v += 1.0f;
    const float eps = 1e-5f;
    std::vector<float> expected(x.size());
    for (int r = 0; r < kRows; ++r) {
      double ss = 0.0;
      for (int i = 0; i < cols; ++i) ss += double(x[std::size_t(r) * cols + i]) * x[std::size_t(r) * cols + i];
      const float inv = float(1.0 / std::sqrt(ss / cols + eps));
      for (int i = 0; i < cols; ++i) expected[std::size_t(r) * cols + i] = x[std::size_t(r) * cols + i] * inv * g[i];
    }
    DeviceBuffer d_x = upload(x), d_g = upload(g), d_out(x.size() * 2);
    rmsnorm(d_x.as<float>(), d_g.as<float>(), kRows, cols, eps, d_out.as<bf16_bits>(), nullptr);
    LAZYSCOPE_CUDA_CHECK(cudaDeviceSynchronize());
    EXPECT_LT(relative_error(test::download_bf16(d_out, x.size()), expected), 5e-3) << "rmsnorm, " << cols << " cols";
  }
  for (int inter : {14336, 1032, 1001, 9}) {
    const std::vector<float> gate_up = random_bf16_values(std::size_t(kRows) * 2 * inter, rng, 2.0f);
    std::vector<float> expected(std::size_t(kRows) * inter);
    for (int r = 0; r < kRows; ++r) {
      for (int i = 0; i < inter; ++i) {
        const float gate = gate_up[std::size_t(r) * 2 * inter + i], up = gate_up[std::size_t(r) * 2 * inter + inter + i];
        expected[std::size_t(r) * inter + i] = gate / (1.0f + std::exp(-gate)) * up;
      }
    }
    DeviceBuffer d_gu = upload_as_bf16(gate_up), d_out(expected.size() * 2);
    swiglu(d_gu.as<bf16_bits>(), kRows, inter, d_out.as<bf16_bits>(), nullptr);
    LAZYSCOPE_CUDA_CHECK(cudaDeviceSynchronize());
    EXPECT_LT(relative_error(test::download_bf16(d_out, expected.size()), bf16_round(expected)), 5e-3)
        << "swiglu, " << inter << " columns";
  }
}

int32_t device_argmax(const std::vector<float>& values, DeviceBuffer& scratch) {
  DeviceBuffer d_x = upload(values), d_out(sizeof(int32_t));
  argmax(d_x.as<float>(), int(values.size()), d_out.as<int32_t>(), scratch.as<unsigned long long>(), nullptr);
  int32_t index = -1;
  LAZYSCOPE_CUDA_CHECK(cudaMemcpy(&index, d_out.as<void>(), sizeof(index), cudaMemcpyDeviceToHost));
  return index;
}

// Largest value, first index on ties (across CTAs too), NaN skipped; the scratch stays reusable.
TEST(ArgmaxTest, FirstLargestAcrossBlocksAndRepeatedCalls) {
  LAZYSCOPE_REQUIRE_GPU();
  DeviceBuffer scratch(2 * sizeof(unsigned long long));
  LAZYSCOPE_CUDA_CHECK(cudaMemset(scratch.as<void>(), 0, scratch.bytes()));
  std::mt19937 rng(3);
  std::vector<float> logits = random_bf16_values(128256, rng);
  logits[90001] = 7.5f;
  logits[100000] = 7.5f;  // a tie in a later CTA
  logits[5] = 7.5f;       // ... and an earlier one: the first wins
  EXPECT_EQ(device_argmax(logits, scratch), 5);
  logits[5] = 0.0f;
  EXPECT_EQ(device_argmax(logits, scratch), 90001);
  logits[77] = NAN;
  EXPECT_EQ(device_argmax(logits, scratch), 90001);
  logits[128255] = 9.0f;
  EXPECT_EQ(device_argmax(logits, scratch), 128255);
  EXPECT_EQ(device_argmax({-1.0f}, scratch), 0);
  EXPECT_EQ(device_argmax(std::vector<float>(1000, -INFINITY), scratch), 0);
  std::vector<float> negative(3000, -2.0f);
  negative[2999] = -1.0f;
  EXPECT_EQ(device_argmax(negative, scratch), 2999);
}

// Each row of a batch gets its own argmax (ties and NaN as for one row), from one launch; the
// per-row scratch is left zeroed for the next call.
TEST(ArgmaxTest, RowsOfABatchEachGetTheirOwnArgmax) {
  LAZYSCOPE_REQUIRE_GPU();
  const int rows = 5, n = 50000;
  std::mt19937 rng(4);
  std::vector<float> logits = random_bf16_values(std::size_t(rows) * n, rng);
  const int expected[rows] = {0, 49999, 123, 40000, 17};
  for (int r = 0; r < rows; ++r) logits[std::size_t(r) * n + expected[r]] = 8.0f + r;
  logits[std::size_t(3) * n + 45000] = 3.0f + 8.0f;  // row 3: a tie later in the row
  logits[std::size_t(4) * n + 3] = NAN;
  DeviceBuffer d_x = upload(logits), d_out(rows * sizeof(int32_t)), scratch(2 * rows * sizeof(unsigned long long));
  LAZYSCOPE_CUDA_CHECK(cudaMemset(scratch.as<void>(), 0, scratch.bytes()));
  for (int call = 0; call < 2; ++call) {
    argmax_rows(d_x.as<float>(), rows, n, d_out.as<int32_t>(), scratch.as<unsigned long long>(), nullptr);
    std::vector<int32_t> got(rows, -1);
    LAZYSCOPE_CUDA_CHECK(cudaMemcpy(got.data(), d_out.as<void>(), rows * sizeof(int32_t), cudaMemcpyDeviceToHost));
    for (int r = 0; r < rows; ++r) EXPECT_EQ(got[r], expected[r]) << "row " << r << ", call " << call;
  }
  std::vector<unsigned long long> left(2 * rows, 1);
  LAZYSCOPE_CUDA_CHECK(cudaMemcpy(left.data(), scratch.as<void>(), scratch.bytes(), cudaMemcpyDeviceToHost));
  for (unsigned long long word : left) EXPECT_EQ(word, 0ull);
}

}  // namespace
}  // namespace lazyscope::cuda

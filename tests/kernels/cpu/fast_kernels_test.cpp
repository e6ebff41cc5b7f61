// The fast CPU mode against the exact reference: every weight format's fused matmul at every
// instruction-set level this processor has, the vectorised lazy attention, whole forwards,
// and lazy == materialized greedy tokens.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cmath>
#include <random>

#include "base/error.h"
#include "engine/runtime/equivalence.h"
#include "engine/runtime/session.h"
#include "kernels/cpu/attention.h"
#include "kernels/cpu/cpu_backend.h"
#include "kernels/cpu/cpu_fast_backend.h"
#include "kernels/cpu/fast_attention.h"
#include "kernels/cpu/isa.h"
#include "kernels/cpu/quant_matmul.h"
#include "kernels/random_weights.h"
#include "kernels/rope.h"
#include "kernels/synthetic_shapes.h"

namespace lazyscope {
namespace {

std::vector<float> random_values(std::size_t count, uint32_t seed, float scale = 1.0f) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, scale);
  std::vector<float> v(count);
  for (float& x : v) x = dist(rng);
  return v;
}

std::vector<cpu::Isa> isa_levels() {
  std::vector<cpu::Isa> levels;
  for (int i = 0; i <= int(cpu::detected_isa()); ++i) levels.push_back(cpu::Isa(i));
  return levels;
}

PackedMatrix packed(WeightFormat format, const std::vector<uint8_t>& bytes, int rows, int cols) {
  PackedMatrix m;
  m.format = format;
  m.data = bytes.data();
  m.rows = rows;
  m.cols = cols;
  m.row_bytes = bytes.size() / std::size_t(rows);
  return m;
}

class FastMatmul : public ::testing::TestWithParam<WeightFormat> {};

TEST_P(FastMatmul, MatchesTheDequantizedProductAtEveryIsaLevel) {
  const WeightFormat format = GetParam();
  for (int cols : {96, 128, 576}) {  // 96: an odd number of 32-blocks (the scalar tail)
    const int rows = 37;            // not a multiple of the row tile
    const std::vector<float> w = random_values(std::size_t(rows) * cols, 7, 0.05f);
    const std::vector<uint8_t> bytes = cpu::quantize_weight_rows(format, w.data(), rows, cols);
    const PackedMatrix m = packed(format, bytes, rows, cols);
    std::vector<float> wd(std::size_t(rows) * cols);
    for (int r = 0; r < rows; ++r) dequantize_weight_row(format, m.row(r), wd.data() + std::size_t(r) * cols, cols);
    // The quantizer's round trip: within half a step of the block's range.
    double round_trip = 0.0;
    for (std::size_t i = 0; i < w.size(); ++i) round_trip = std::max(round_trip, double(std::fabs(w[i] - wd[i])));
    EXPECT_LT(round_trip, 0.05 * 0.6) << weight_format_info(format)->name;
    for (int n : {1, 3, 9, 21}) {
      const std::vector<float> x = random_values(std::size_t(n) * cols, 11 + n);
      std::vector<double> expected(std::size_t(n) * rows);
      double largest = 0.0;
      for (int t = 0; t < n; ++t) {
        for (int r = 0; r < rows; ++r) {
          double s = 0.0;
          for (int c = 0; c < cols; ++c) s += double(x[std::size_t(t) * cols + c]) * wd[std::size_t(r) * cols + c];
          expected[std::size_t(t) * rows + r] = s;
          largest = std::max(largest, std::fabs(s));
        }
      }
      cpu::MatmulInput in;
      cpu::reset_input(in, x.data(), n, cols);
      cpu::quantize_input_rows(in, 0, n);
      std::vector<float> scalar_out;
      for (cpu::Isa isa : isa_levels()) {
        std::vector<float> out(std::size_t(n) * rows, NAN);
        cpu::matmul_rows(m, in, 0, rows, out.data(), rows, isa);
        double worst = 0.0;
        for (std::size_t i = 0; i < out.size(); ++i) worst = std::max(worst, std::fabs(out[i] - expected[i]));
        // Q8 activations round each value to 1/254 of its block's largest magnitude.
        const double tolerance = cpu::uses_q8_activations(format) ? 0.02 * largest : 1e-5 * largest;
        EXPECT_LE(worst, tolerance) << weight_format_info(format)->name << " " << cpu::isa_name(isa) << " cols "
                                    << cols << " n " << n;
        if (isa == cpu::Isa::Scalar) {
          scalar_out = out;
        } else {
          // The SIMD kernels do the scalar code's integer arithmetic: float rounding apart only.
          double apart = 0.0;
          for (std::size_t i = 0; i < out.size(); ++i) apart = std::max(apart, double(std::fabs(out[i] - scalar_out[i])));
          EXPECT_LE(apart, 1e-5 * largest) << weight_format_info(format)->name << " " << cpu::isa_name(isa);
        }
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Formats, FastMatmul,
                         ::testing::Values(WeightFormat::Q4_0, WeightFormat::Q4_1, WeightFormat::Q5_0,
                                           WeightFormat::Q5_1, WeightFormat::Q8_0, WeightFormat::F16,
                                           WeightFormat::BF16, WeightFormat::F32),
                         [](const auto& info) { return std::string(weight_format_info(info.param)->name); });

TEST(FastMatmul, ActivationQuantizationIsTheSameAtEveryIsaLevel) {
  const int n = 5, cols = 96;
  std::vector<float> x = random_values(std::size_t(n) * cols, 3);
  for (int j = 0; j < 32; ++j) x[std::size_t(j)] = 0.0f;                   // an all-zero block
  for (int j = 0; j < 32; ++j) x[std::size_t(32 + j)] = float(j - 16) * 0.5f;  // halfway cases
  std::vector<cpu::MatmulInput> inputs;
  for (cpu::Isa isa : isa_levels()) {
    cpu::set_isa_limit(isa);
    cpu::MatmulInput in;
    cpu::reset_input(in, x.data(), n, cols);
    cpu::quantize_input_rows(in, 0, n);
    inputs.push_back(std::move(in));
  }
  cpu::set_isa_limit(cpu::detected_isa());
  for (std::size_t i = 1; i < inputs.size(); ++i) {
    EXPECT_EQ(inputs[i].q, inputs[0].q) << cpu::isa_name(cpu::Isa(i));
    EXPECT_EQ(inputs[i].scale, inputs[0].scale) << cpu::isa_name(cpu::Isa(i));
    EXPECT_EQ(inputs[i].sum_eighth, inputs[0].sum_eighth) << cpu::isa_name(cpu::Isa(i));
  }
}

TEST(FastMatmul, RejectsAMismatchedWidth) {
  const std::vector<float> w = random_values(4 * 64, 1);
  const std::vector<uint8_t> bytes = cpu::quantize_weight_rows(WeightFormat::Q8_0, w.data(), 4, 64);
  const std::vector<float> x = random_values(32, 2);
  cpu::MatmulInput in;
  cpu::reset_input(in, x.data(), 1, 32);
  std::vector<float> out(4);
  EXPECT_THROW(cpu::matmul_rows(packed(WeightFormat::Q8_0, bytes, 4, 64), in, 0, 4, out.data(), 4, cpu::Isa::Scalar),
               Error);
}

TEST(FastAttention, MatchesTheReferenceWithShiftsAtEveryIsaLevel) {
  for (int head_dim : {16, 64, 6}) {
    const int heads = 6, kv_heads = 2, block_size = 4, blocks = 6, n = 3;
    RopeParams rope;
    rope.theta = 10000.0f;
    const std::vector<float> inv_freq = rope_inv_freq(rope, head_dim);
    const std::size_t pool_size = std::size_t(blocks) * kv_heads * block_size * head_dim;
    const std::vector<float> k_pool = random_values(pool_size, 3), v_pool = random_values(pool_size, 4);
    const std::vector<float> q = random_values(std::size_t(n) * heads * head_dim, 5);
    // prefix (shift 0), a document placed at shift 5 over two blocks, a shift-2 document, then the query's block.
    const std::vector<BlockRef> table = {{0, 0, 4}, {3, 5, 4}, {1, 5, 2}, {4, 2, 3}, {5, 0, 3}};
    const std::vector<int32_t> positions = {14, 15, 16};
    cpu::PagedAttentionParams p;
    p.q = q.data();
    p.q_positions = positions.data();
    p.k_pool = k_pool.data();
    p.v_pool = v_pool.data();
    p.table = table.data();
    p.table_len = int(table.size());
    p.n = n;
    p.num_heads = heads;
    p.num_kv_heads = kv_heads;
    p.head_dim = head_dim;
    p.block_size = block_size;
    p.inv_freq = inv_freq.data();
    p.lazy = true;
    std::vector<float> expected(q.size());
    p.out = expected.data();
    cpu::paged_attention(p);
    cpu::RopeTable table_rope;
    table_rope.reset(inv_freq.data(), head_dim);
    int64_t lo, hi;
    cpu::attention_rotation_range(p, &lo, &hi);
    table_rope.cover(lo, hi);
    cpu::ThreadPool pool(2);
    for (cpu::Isa isa : isa_levels()) {
      std::vector<float> out(q.size(), NAN);
      p.out = out.data();
      cpu::fast_paged_attention(p, table_rope, pool, isa);
      double worst = 0.0;
      for (std::size_t i = 0; i < out.size(); ++i) worst = std::max(worst, double(std::fabs(out[i] - expected[i])));
      EXPECT_LE(worst, 2e-5) << cpu::isa_name(isa) << " head_dim " << head_dim;
    }
    p.lazy = false;
    EXPECT_THROW(cpu::fast_paged_attention(p, table_rope, pool, cpu::Isa::Scalar), Error);
  }
}

// One thread's scratch serves calls of different shapes: a wider GQA group after a larger
// head_dim (3 x 64 floats, then 16 x 8) must not write past the group's row buffers
// (AddressSanitizer flagged it in the sanitized suite); the result still matches the reference.
TEST(FastAttention, AThreadsScratchFitsEveryShapeInTurn) {
  cpu::ThreadPool pool(1);  // every call on this thread, with its one scratch
  for (auto [heads, kv_heads, head_dim] : {std::array{6, 2, 64}, std::array{32, 2, 8}, std::array{4, 4, 32}}) {
    const int block_size = 4, blocks = 3, n = 2;
    RopeParams rope;
    const std::vector<float> inv_freq = rope_inv_freq(rope, head_dim);
    const std::size_t pool_size = std::size_t(blocks) * kv_heads * block_size * head_dim;
    const std::vector<float> k_pool = random_values(pool_size, 7), v_pool = random_values(pool_size, 8);
    const std::vector<float> q = random_values(std::size_t(n) * heads * head_dim, 9);
    const std::vector<BlockRef> table = {{0, 0, 4}, {2, 3, 4}, {1, 0, 2}};
    const std::vector<int32_t> positions = {8, 9};
    cpu::PagedAttentionParams p;
    p.q = q.data();
    p.q_positions = positions.data();
    p.k_pool = k_pool.data();
    p.v_pool = v_pool.data();
    p.table = table.data();
    p.table_len = int(table.size());
    p.n = n;
    p.num_heads = heads;
    p.num_kv_heads = kv_heads;
    p.head_dim = head_dim;
    p.block_size = block_size;
    p.inv_freq = inv_freq.data();
    p.lazy = true;
    std::vector<float> expected(q.size());
    p.out = expected.data();
    cpu::paged_attention(p);
    cpu::RopeTable table_rope;
    table_rope.reset(inv_freq.data(), head_dim);
    int64_t lo, hi;
    cpu::attention_rotation_range(p, &lo, &hi);
    table_rope.cover(lo, hi);
    for (cpu::Isa isa : isa_levels()) {
      std::vector<float> out(q.size(), NAN);
      p.out = out.data();
      cpu::fast_paged_attention(p, table_rope, pool, isa);
      double worst = 0.0;
      for (std::size_t i = 0; i < out.size(); ++i) worst = std::max(worst, double(std::fabs(out[i] - expected[i])));
      EXPECT_LE(worst, 2e-5) << cpu::isa_name(isa) << " " << heads << "/" << kv_heads << "/" << head_dim;
    }
  }
}

TEST(ThreadPool, RunsEveryWorkerAndSplitsRanges) {
  cpu::ThreadPool pool(3);
  std::vector<int> hits(1000, 0);
  for (int round = 0; round < 50; ++round) {
    pool.parallel_for(1000, 4, [&](int64_t b, int64_t e) {
      EXPECT_EQ(b % 4, 0);
      for (int64_t i = b; i < e; ++i) ++hits[i];
    });
  }
  for (int h : hits) ASSERT_EQ(h, 50);
  std::vector<int> ran(3, 0);
  pool.run([&](int w) { ran[w] = 1; });
  EXPECT_EQ(ran, std::vector<int>({1, 1, 1}));
}

TEST(ThreadPool, RunsEveryChunkExactlyOnceOverManyJobs) {
  // Thousands of short jobs back to back, of two sizes: every chunk runs once, none is lost or
  // repeated by a worker that wakes late, and run_chunks returns only when all are done.
  cpu::ThreadPool pool(3);
  std::vector<std::atomic<int>> counts(37);
  const int rounds = 3000;
  for (int round = 0; round < rounds; ++round) {
    pool.run_chunks(round % 2 == 0 ? 37 : 5, [&](int c) { counts[std::size_t(c)].fetch_add(1); });
  }
  for (int c = 0; c < 37; ++c) EXPECT_EQ(counts[std::size_t(c)].load(), c < 5 ? rounds : rounds / 2) << "chunk " << c;
  EXPECT_THROW(pool.run_chunks(cpu::ThreadPool::kMaxChunks + 1, [](int) {}), Error);
}

// One forward of the same numbers through both backends: Q4_1 weights dequantized for the exact one.
TEST(CpuFastBackend, ForwardMatchesTheExactBackendOnTheSameWeights) {
  const ModelShape shape = synthetic_shape("small");
  HostWeights host = random_host_weights(shape, 3);
  // Quantize every matrix to Q4_1 and write the dequantized values back for the exact backend.
  std::vector<std::vector<uint8_t>> storage;
  WeightsView view = host.view;
  view.packed_layers.resize(std::size_t(shape.num_layers));
  auto quantize = [&](const float* values, int rows, int cols, WeightFormat format) {
    storage.push_back(cpu::quantize_weight_rows(format, values, rows, cols));
    float* writable = const_cast<float*>(values);
    const PackedMatrix m = packed(format, storage.back(), rows, cols);
    for (int r = 0; r < rows; ++r) dequantize_weight_row(format, m.row(r), writable + std::size_t(r) * cols, cols);
    return m;
  };
  const int H = shape.hidden_size, Q = shape.q_dim(), K = shape.kv_dim(), I = shape.intermediate_size;
  for (int l = 0; l < shape.num_layers; ++l) {
    const LayerWeightsView& f = host.view.layers[l];
    PackedLayerView& p = view.packed_layers[l];
    p.wq = quantize(f.wq, Q, H, WeightFormat::Q4_1);
    p.wk = quantize(f.wk, K, H, WeightFormat::Q4_1);
    p.wv = quantize(f.wv, K, H, WeightFormat::Q5_0);
    p.wo = quantize(f.wo, H, Q, WeightFormat::Q4_0);
    p.w_gate = quantize(f.w_gate, I, H, WeightFormat::Q8_0);
    p.w_up = quantize(f.w_up, I, H, WeightFormat::Q5_1);
    p.w_down = quantize(f.w_down, H, I, WeightFormat::Q4_1);
  }
  view.embed_packed = quantize(host.view.embed, shape.vocab_size, H, WeightFormat::Q8_0);
  view.lm_head_packed = quantize(host.view.lm_head, shape.vocab_size, H, WeightFormat::Q8_0);

  CpuBackend exact(2);
  CpuFastBackend fast(2);
  exact.load(shape, view);
  fast.load(shape, view);
  EXPECT_EQ(fast.layer_format(), WeightFormat::Q4_1);
  for (Backend* b : {static_cast<Backend*>(&exact), static_cast<Backend*>(&fast)}) b->allocate_pool(16, 16);
  // A 20-token prefill into blocks 0-1, then one decode token.
  std::vector<int32_t> tokens(20), positions(20), slots(20);
  for (int i = 0; i < 20; ++i) {
    tokens[i] = 5 + 37 * i % (shape.vocab_size - 5);
    positions[i] = i;
    slots[i] = i;
  }
  const std::vector<BlockRef> table = {{0, 0, 16}, {1, 0, 4}};
  ForwardStep step{tokens, positions, slots, table, false, true};
  std::vector<float> a, b;
  exact.forward(step, &a);
  fast.forward(step, &b);
  ASSERT_EQ(a.size(), b.size());
  double worst = 0.0, largest = 0.0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    worst = std::max(worst, double(std::fabs(a[i] - b[i])));
    largest = std::max(largest, double(std::fabs(a[i])));
  }
  EXPECT_LE(worst, 0.05 * largest) << "max |dlogit| " << worst << " of " << largest;
  EXPECT_GT(worst, 0.0);  // activations really are quantized on the fast side
}

// In fast mode lazy and materialized run the same kernels, but not on the same numbers (lazy
// rotates the query by m - shift against keys rotated at local positions, materialized the query
// by m against re-rotated copies), so on these synthetic weights' flat logits their greedy tokens
// may part where two tokens are within the fast rounding of each other: judged by the engine's
// rule with the fast bound, a cold and a warm (reordered) pair agree or part at a near-tie. (Its
// earlier form asked for identical tokens, which held with the AVX-512 kernels' rounding and
// not with the AVX2 ones'.)
TEST(CpuFastBackend, LazyAndMaterializedAgreeByTheFastRule) {
  SessionOptions options;
  options.synthetic = "small";
  options.backend = BackendKind::Cpu;
  options.cpu_precision = CpuPrecision::Fast;
  options.kv_budget_bytes = 16ull << 20;
  Session session(options);
  EXPECT_NE(session.device().find("fast"), std::string::npos) << session.device();
  std::mt19937 rng(5);
  auto ids = [&](int count) {
    std::vector<int32_t> v(count);
    for (auto& id : v) id = 3 + int32_t(rng() % 2000);
    return v;
  };
  Request r;
  r.prefix_ids = ids(5);
  r.document_ids = {ids(21), ids(16), ids(9)};
  r.order = {2, 0, 1, 0};
  r.query_ids = ids(6);
  r.max_new_tokens = 12;
  RunOptions lazy, materialized;
  lazy.policy = Policy::Lazy;
  materialized.policy = Policy::Materialized;
  auto judge = [](const RunResult& x, const RunResult& y) {
    return compare_greedy_runs(x.step_logits, x.generated_ids, y.step_logits, y.generated_ids,
                               logit_tolerance_for(x.backend, x.cpu_precision));
  };
  const RunResult a = session.submit(r, lazy);
  const RunResult b = session.submit(r, materialized);
  ASSERT_EQ(a.generated_ids.size(), 12u);
  ASSERT_EQ(a.step_logits.size(), 12u);
  const EquivalenceResult cold = judge(a, b);
  EXPECT_NE(cold.verdict, EquivalenceVerdict::Different) << cold.explanation;
  // The warm lazy run (every document from the pool, reordered) still agrees.
  r.order = {1, 0, 2};
  const RunResult c = session.submit(r, lazy);
  const RunResult d = session.submit(r, materialized);
  const EquivalenceResult warm = judge(c, d);
  EXPECT_NE(warm.verdict, EquivalenceVerdict::Different) << warm.explanation;
  EXPECT_GT(warm.steps.size(), 0u);
}

}  // namespace
}  // namespace lazyscope

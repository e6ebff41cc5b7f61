// The CPU side of the lazy-overhead probe: the fp32 reference paged attention (kernels/cpu/attention.h),
// one query per sequence (a decode step), plain tables against lazy tables whose documents each
// carry their own shift. Timed on the host clock.
#include <chrono>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "base/error.h"
#include "kernels/cpu/attention.h"
#include "kernels/overhead_probe.h"
#include "kernels/rope.h"

namespace lazyscope {

void check_probe_shape(const AttentionProbeShape& s) {
  auto need = [](bool ok, const std::string& what) {
    if (!ok) throw Error("overhead probe: " + what);
  };
  need(s.num_heads >= 1 && s.num_heads <= 256, "heads must be between 1 and 256 (got " + std::to_string(s.num_heads) + ")");
  need(s.num_kv_heads >= 1 && s.num_heads % s.num_kv_heads == 0,
       "kv heads must divide heads (" + std::to_string(s.num_heads) + " heads, " + std::to_string(s.num_kv_heads) +
           " kv heads)");
  need(s.head_dim >= 2 && s.head_dim <= 512 && s.head_dim % 2 == 0,
       "head dim must be even, 2..512 (got " + std::to_string(s.head_dim) + ")");
  need(s.block_size >= 1 && s.block_size <= 1024, "--block-size must be 1..1024 (got " + std::to_string(s.block_size) + ")");
  need(s.batch >= 1 && s.batch <= 1024, "--batches must be 1..1024 (got " + std::to_string(s.batch) + ")");
  need(s.context >= 1 && s.context <= (1 << 20), "--contexts must be 1..1048576 keys (got " + std::to_string(s.context) + ")");
  need(s.document_tokens >= 0 && s.document_tokens <= (1 << 20),
       "--document-tokens must be 0..1048576 (got " + std::to_string(s.document_tokens) + ")");
  const int64_t blocks_per_seq = (int64_t(s.context) + s.block_size - 1) / s.block_size;
  const int64_t pool = int64_t(s.batch) * blocks_per_seq * s.num_kv_heads * s.block_size * s.head_dim;
  need(pool * 2 * 4 <= (int64_t(8) << 30), "the K/V pool of batch " + std::to_string(s.batch) + " x " +
                                               std::to_string(s.context) + " keys exceeds 8 GiB (fp32)");
}

namespace {

class CpuAttentionProbe final : public AttentionProbe {
 public:
  CpuAttentionProbe(const AttentionProbeShape& s, int threads) : s_(s), threads_(threads > 0 ? threads : 1) {
    check_probe_shape(s);
    const int blocks_per_seq = (s.context + s.block_size - 1) / s.block_size;
    const int64_t pool = int64_t(s.batch) * blocks_per_seq * s.num_kv_heads * s.block_size * s.head_dim;
    std::mt19937 rng(7);
    std::normal_distribution<float> normal(0.0f, 1.0f);
    k_.resize(size_t(pool));
    v_.resize(size_t(pool));
    for (float& x : k_) x = normal(rng);
    for (float& x : v_) x = normal(rng);
    q_.resize(size_t(s.batch) * s.num_heads * s.head_dim);
    for (float& x : q_) x = normal(rng);
    out_.resize(q_.size());
    RopeParams rope;
    inv_freq_ = rope_inv_freq(rope, s.head_dim);
    const int doc = s.document_tokens > 0 ? s.document_tokens : s.context;
    for (int lazy = 0; lazy < 2; ++lazy) {
      tables_[lazy].resize(size_t(s.batch));
      for (int b = 0; b < s.batch; ++b) {
        for (int i = 0; i < blocks_per_seq; ++i) {
          const int first_key = i * s.block_size;
          const int valid = std::min(s.block_size, s.context - first_key);
          const int shift = lazy ? (first_key / doc) * doc + 3 : 0;
          tables_[lazy][size_t(b)].push_back(BlockRef{b * blocks_per_seq + i, shift, valid});
        }
      }
    }
    position_ = s.context - 1 + 10000;
  }

  double time_us(bool lazy, int calls) override {
    const auto t0 = std::chrono::steady_clock::now();
    for (int c = 0; c < calls; ++c) {
      for (int b = 0; b < s_.batch; ++b) {
        cpu::PagedAttentionParams p;
        p.q = q_.data() + size_t(b) * s_.num_heads * s_.head_dim;
        p.q_positions = &position_;
        p.k_pool = k_.data();
        p.v_pool = v_.data();
        p.table = tables_[lazy][size_t(b)].data();
        p.table_len = int(tables_[lazy][size_t(b)].size());
        p.n = 1;
        p.num_heads = s_.num_heads;
        p.num_kv_heads = s_.num_kv_heads;
        p.head_dim = s_.head_dim;
        p.block_size = s_.block_size;
        p.inv_freq = inv_freq_.data();
        p.lazy = lazy;
        p.out = out_.data() + size_t(b) * s_.num_heads * s_.head_dim;
        cpu::paged_attention(p, threads_);
      }
    }
    return std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count() / calls;
  }

  std::string backend() const override { return "cpu"; }
  std::string device() const override {
    return "CPU, " + std::to_string(threads_) + " thread" + (threads_ == 1 ? "" : "s") + " of " +
           std::to_string(std::thread::hardware_concurrency());
  }
  std::string kernel() const override { return "cpu paged_attention, decode (fp32 reference kernel)"; }

 private:
  AttentionProbeShape s_;
  int threads_;
  std::vector<float> k_, v_, q_, out_, inv_freq_;
  std::vector<std::vector<BlockRef>> tables_[2];
  int32_t position_ = 0;
};

}  // namespace

std::unique_ptr<AttentionProbe> make_cpu_attention_probe(const AttentionProbeShape& shape, int threads) {
  return std::make_unique<CpuAttentionProbe>(shape, threads);
}

}  // namespace lazyscope

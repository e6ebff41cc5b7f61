#include "kernels/cpu/cpu_backend.h"

#include <algorithm>
#include <string>
#include <thread>

#include "kernels/cpu/attention.h"
#include "kernels/cpu/ops.h"
#include "base/error.h"
#include "kernels/random_weights.h"
#include "kernels/rope.h"
#include "kernels/step_validation.h"

namespace lazyscope {

CpuBackend::CpuBackend(int threads)
    : threads_(threads > 0 ? threads : int(std::max(1u, std::thread::hardware_concurrency()))) {
  cpu::set_num_threads(threads_);
}

std::string CpuBackend::device() const {
  return "CPU, " + std::to_string(threads_) + " thread" + (threads_ == 1 ? "" : "s");
}

void CpuBackend::load(const ModelShape& shape, const WeightsView& weights) {
  if (shape.head_dim % 2 != 0) throw Error("head_dim must be even for RoPE");
  if (int(weights.layers.size()) != shape.num_layers) throw Error("weights have the wrong layer count");
  shape_ = shape;
  weights_ = weights;
  inv_freq_ = rope_inv_freq(shape.rope, shape.head_dim);
}

void CpuBackend::load_synthetic(const ModelShape& shape, uint64_t seed) {
  synthetic_ = random_host_weights(shape, seed);
  load(shape, synthetic_.view);
}

void CpuBackend::allocate_pool(int num_blocks, int block_size) {
  num_blocks_ = num_blocks;
  block_size_ = block_size;
  const std::size_t per_layer = std::size_t(num_blocks) * block_size * shape_.kv_dim();
  k_pool_.assign(shape_.num_layers, std::vector<float>(per_layer, 0.0f));
  v_pool_.assign(shape_.num_layers, std::vector<float>(per_layer, 0.0f));
}

void CpuBackend::forward(const ForwardStep& step, std::vector<float>* logits) {
  validate_step(step, StepLimits{shape_.vocab_size, num_blocks_, block_size_});
  const int n = int(step.tokens.size());
  const int H = shape_.hidden_size, Q = shape_.q_dim(), K = shape_.kv_dim(), I = shape_.intermediate_size;
  std::vector<float> x(std::size_t(n) * H), h(std::size_t(n) * H), q(std::size_t(n) * Q),
      k(std::size_t(n) * K), v(std::size_t(n) * K), attn(std::size_t(n) * Q), o(std::size_t(n) * H),
      gate(std::size_t(n) * I), up(std::size_t(n) * I);
  cpu::embedding(step.tokens.data(), n, weights_.embed, H, x.data());
  for (int l = 0; l < shape_.num_layers; ++l) {
    const LayerWeightsView& w = weights_.layers[l];
    cpu::rmsnorm(x.data(), w.attn_norm, n, H, shape_.rms_norm_eps, h.data());
    cpu::matmul_wt(h.data(), w.wq, n, Q, H, q.data());
    cpu::matmul_wt(h.data(), w.wk, n, K, H, k.data());
    cpu::matmul_wt(h.data(), w.wv, n, K, H, v.data());
    cpu::KvWriteParams kw;
    kw.k = k.data();
    kw.v = v.data();
    kw.positions = step.positions.data();
    kw.slots = step.slots.data();
    kw.n = n;
    kw.num_kv_heads = shape_.num_kv_heads;
    kw.head_dim = shape_.head_dim;
    kw.block_size = block_size_;
    kw.inv_freq = inv_freq_.data();
    kw.k_pool = k_pool_[l].data();
    kw.v_pool = v_pool_[l].data();
    cpu::kv_write(kw);
    cpu::PagedAttentionParams ap;
    ap.q = q.data();
    ap.q_positions = step.positions.data();
    ap.k_pool = k_pool_[l].data();
    ap.v_pool = v_pool_[l].data();
    ap.table = step.table.data();
    ap.table_len = int(step.table.size());
    ap.n = n;
    ap.num_heads = shape_.num_heads;
    ap.num_kv_heads = shape_.num_kv_heads;
    ap.head_dim = shape_.head_dim;
    ap.block_size = block_size_;
    ap.inv_freq = inv_freq_.data();
    ap.lazy = step.lazy_rotation;
    ap.out = attn.data();
    cpu::paged_attention(ap, threads_);
    cpu::matmul_wt(attn.data(), w.wo, n, H, Q, o.data());
    cpu::add_inplace(x.data(), o.data(), int64_t(n) * H);
    cpu::rmsnorm(x.data(), w.mlp_norm, n, H, shape_.rms_norm_eps, h.data());
    cpu::matmul_wt(h.data(), w.w_gate, n, I, H, gate.data());
    cpu::matmul_wt(h.data(), w.w_up, n, I, H, up.data());
    cpu::swiglu(gate.data(), up.data(), int64_t(n) * I, gate.data());
    cpu::matmul_wt(gate.data(), w.w_down, n, H, I, o.data());
    cpu::add_inplace(x.data(), o.data(), int64_t(n) * H);
  }
  if (!step.want_logits || logits == nullptr) return;
  const float* last = x.data() + std::size_t(n - 1) * H;
  cpu::rmsnorm(last, weights_.final_norm, 1, H, shape_.rms_norm_eps, h.data());
  logits->resize(shape_.vocab_size);
  cpu::matmul_wt(h.data(), weights_.lm_head, 1, shape_.vocab_size, H, logits->data());
}

void CpuBackend::copy_blocks(std::span<const BlockCopy> copies) {
  for (const BlockCopy& c : copies) {
    if (c.src < 0 || c.src >= num_blocks_ || c.dst < 0 || c.dst >= num_blocks_) {
      throw Error("copy_blocks: block out of the pool");
    }
    for (int l = 0; l < shape_.num_layers; ++l) {
      cpu::materialize(c, shape_.num_kv_heads, shape_.head_dim, block_size_, inv_freq_.data(),
                       k_pool_[l].data(), v_pool_[l].data());
    }
  }
}

}  // namespace lazyscope

#include "kernels/cpu/cpu_fast_backend.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>
#include <thread>

#include "base/error.h"
#include "kernels/random_weights.h"
#include "kernels/rope.h"
#include "kernels/step_validation.h"

namespace lazyscope {
namespace {

bool bf16_exact(const float* values, std::size_t count) {
  for (std::size_t i = 0; i < count; ++i) {
    uint32_t bits;
    std::memcpy(&bits, values + i, 4);
    if ((bits & 0xFFFFu) != 0) return false;
  }
  return true;
}

void rmsnorm_row(const float* x, const float* weight, int cols, float eps, float* out) {
  float sum = 0.0f;
  for (int c = 0; c < cols; ++c) sum += x[c] * x[c];
  const float inv = 1.0f / std::sqrt(sum / float(cols) + eps);
  for (int c = 0; c < cols; ++c) out[c] = weight[c] * (x[c] * inv);
}

}  // namespace

CpuFastBackend::CpuFastBackend(int threads)
    : threads_(threads > 0 ? threads : int(std::max(1u, std::thread::hardware_concurrency()))),
      pool_(std::make_unique<cpu::ThreadPool>(threads_)),
      isa_(cpu::active_isa()) {}

std::string CpuFastBackend::device() const {
  return "CPU fast (" + cpu::isa_name(isa_) + "), " + std::to_string(threads_) + " thread" +
         (threads_ == 1 ? "" : "s");
}

PackedMatrix CpuFastBackend::adopt(const PackedMatrix& packed, const float* fp32, int rows, int cols,
                                   const char* what) {
  if (packed.present()) {
    const WeightFormatInfo* info = weight_format_info(packed.format);
    if (!info) throw Error(std::string("fast CPU backend: ") + what + " has an unknown weight format");
    if (packed.rows != rows || packed.cols != cols) {
      throw Error(std::string("fast CPU backend: ") + what + " is " + std::to_string(packed.rows) + " x " +
                  std::to_string(packed.cols) + ", the model shape implies " + std::to_string(rows) + " x " +
                  std::to_string(cols));
    }
    return packed;
  }
  if (!fp32) throw Error(std::string("fast CPU backend: ") + what + " is missing");
  PackedMatrix m;
  m.rows = rows;
  m.cols = cols;
  if (bf16_exact(fp32, std::size_t(rows) * cols)) {
    // Came from a bf16 checkpoint: half the bytes, the same numbers.
    owned_.push_back(cpu::quantize_weight_rows(WeightFormat::BF16, fp32, rows, cols));
    m.format = WeightFormat::BF16;
    m.data = owned_.back().data();
    m.row_bytes = std::size_t(cols) * 2;
  } else {
    m.format = WeightFormat::F32;
    m.data = reinterpret_cast<const uint8_t*>(fp32);
    m.row_bytes = std::size_t(cols) * 4;
  }
  return m;
}

void CpuFastBackend::load(const ModelShape& shape, const WeightsView& w) {
  if (shape.head_dim % 2 != 0) throw Error("head_dim must be even for RoPE");
  if (int(w.layers.size()) != shape.num_layers) throw Error("weights have the wrong layer count");
  const bool packed = !w.packed_layers.empty();
  if (packed && int(w.packed_layers.size()) != shape.num_layers) throw Error("packed weights have the wrong layer count");
  shape_ = shape;
  const int H = shape.hidden_size, Q = shape.q_dim(), K = shape.kv_dim(), I = shape.intermediate_size;
  layers_.assign(std::size_t(shape.num_layers), Layer{});
  for (int l = 0; l < shape.num_layers; ++l) {
    const LayerWeightsView& f = w.layers[l];
    const PackedLayerView none;
    const PackedLayerView& p = packed ? w.packed_layers[l] : none;
    Layer& layer = layers_[l];
    layer.attn_norm = f.attn_norm;
    layer.mlp_norm = f.mlp_norm;
    if (!layer.attn_norm || !layer.mlp_norm) throw Error("fast CPU backend: a norm weight is missing");
    layer.wq = adopt(p.wq, f.wq, Q, H, "wq");
    layer.wk = adopt(p.wk, f.wk, K, H, "wk");
    layer.wv = adopt(p.wv, f.wv, K, H, "wv");
    layer.wo = adopt(p.wo, f.wo, H, Q, "wo");
    layer.w_gate = adopt(p.w_gate, f.w_gate, I, H, "w_gate");
    layer.w_up = adopt(p.w_up, f.w_up, I, H, "w_up");
    layer.w_down = adopt(p.w_down, f.w_down, H, I, "w_down");
  }
  final_norm_ = w.final_norm;
  if (!final_norm_) throw Error("fast CPU backend: the final norm weight is missing");
  embed_ = adopt(w.embed_packed, w.embed, shape.vocab_size, H, "embedding");
  lm_head_ = w.lm_head == w.embed && !w.lm_head_packed.present() ? embed_
                                                                 : adopt(w.lm_head_packed, w.lm_head, shape.vocab_size, H, "lm_head");
  const std::vector<float> inv_freq = rope_inv_freq(shape.rope, shape.head_dim);
  rope_.reset(inv_freq.data(), shape.head_dim);
  rope_.cover(0, 4096);
  capacity_ = 0;
}

void CpuFastBackend::load_synthetic(const ModelShape& shape, uint64_t seed) {
  HostWeights host = random_host_weights(shape, seed);
  const int H = shape.hidden_size, Q = shape.q_dim(), K = shape.kv_dim(), I = shape.intermediate_size;
  owned_.clear();
  auto pack = [&](const float* values, int rows, int cols, WeightFormat format) {
    if (cols % 32 != 0) format = WeightFormat::F32;
    owned_.push_back(cpu::quantize_weight_rows(format, values, rows, cols));
    PackedMatrix m;
    m.format = format;
    m.data = owned_.back().data();
    m.rows = rows;
    m.cols = cols;
    m.row_bytes = owned_.back().size() / std::size_t(rows);
    return m;
  };
  // Norms are the only fp32 weights kept: copy them out of the random storage.
  synthetic_norms_.clear();
  synthetic_norms_.reserve(std::size_t(2 * shape.num_layers + 1) * H);
  auto keep = [&](const float* norm) {
    const std::size_t at = synthetic_norms_.size();
    synthetic_norms_.insert(synthetic_norms_.end(), norm, norm + H);
    return at;
  };
  WeightsView view;
  std::vector<std::size_t> norm_at;
  view.packed_layers.resize(std::size_t(shape.num_layers));
  view.layers.resize(std::size_t(shape.num_layers));
  for (int l = 0; l < shape.num_layers; ++l) {
    const LayerWeightsView& f = host.view.layers[l];
    PackedLayerView& p = view.packed_layers[l];
    p.wq = pack(f.wq, Q, H, WeightFormat::Q4_1);
    p.wk = pack(f.wk, K, H, WeightFormat::Q4_1);
    p.wv = pack(f.wv, K, H, WeightFormat::Q4_1);
    p.wo = pack(f.wo, H, Q, WeightFormat::Q4_1);
    p.w_gate = pack(f.w_gate, I, H, WeightFormat::Q4_1);
    p.w_up = pack(f.w_up, I, H, WeightFormat::Q4_1);
    p.w_down = pack(f.w_down, H, I, WeightFormat::Q4_1);
    norm_at.push_back(keep(f.attn_norm));
    norm_at.push_back(keep(f.mlp_norm));
  }
  norm_at.push_back(keep(host.view.final_norm));
  for (int l = 0; l < shape.num_layers; ++l) {
    view.layers[l].attn_norm = synthetic_norms_.data() + norm_at[2 * l];
    view.layers[l].mlp_norm = synthetic_norms_.data() + norm_at[2 * l + 1];
  }
  view.final_norm = synthetic_norms_.data() + norm_at.back();
  view.embed_packed = pack(host.view.embed, shape.vocab_size, H, WeightFormat::Q8_0);
  view.lm_head_packed = host.view.lm_head == host.view.embed
                            ? view.embed_packed
                            : pack(host.view.lm_head, shape.vocab_size, H, WeightFormat::Q8_0);
  load(shape, view);
}

void CpuFastBackend::allocate_pool(int num_blocks, int block_size) {
  num_blocks_ = num_blocks;
  block_size_ = block_size;
  const std::size_t per_layer = std::size_t(num_blocks) * block_size * shape_.kv_dim();
  k_pool_.assign(shape_.num_layers, std::vector<float>(per_layer, 0.0f));
  v_pool_.assign(shape_.num_layers, std::vector<float>(per_layer, 0.0f));
}

void CpuFastBackend::ensure_buffers(int n) {
  if (n <= capacity_) return;
  const std::size_t H = shape_.hidden_size, Q = shape_.q_dim(), K = shape_.kv_dim(), I = shape_.intermediate_size;
  const std::size_t c = std::size_t(n);
  x_.resize(c * H);
  h_.resize(c * H);
  q_.resize(c * Q);
  k_.resize(c * K);
  v_.resize(c * K);
  attn_.resize(c * Q);
  o_.resize(c * H);
  gate_.resize(c * I);
  up_.resize(c * I);
  capacity_ = n;
}

void CpuFastBackend::run_matmuls(std::initializer_list<Job> jobs) {
  // The jobs' row tiles laid end to end, cut into a few chunks per thread: a thread that the
  // machine runs late finds the others took its share. Tiles of matmul_row_unit rows, so a row's
  // kernel (and its result) does not depend on where a chunk starts.
  int tiles = 0;
  for (const Job& job : jobs) {
    const int unit = cpu::matmul_row_unit(*job.in);
    tiles += (job.w->rows + unit - 1) / unit;
  }
  const int chunks = std::min(tiles, pool_->threads() == 1 ? 1 : kChunksPerThread * pool_->threads());
  const cpu::Isa isa = isa_;
  pool_->run_chunks(chunks, [&](int chunk) {
    const int begin = int(int64_t(tiles) * chunk / chunks), end = int(int64_t(tiles) * (chunk + 1) / chunks);
    int first = 0;  // the first tile of the current job
    for (const Job& job : jobs) {
      const int rows = job.w->rows, unit = cpu::matmul_row_unit(*job.in), count = (rows + unit - 1) / unit;
      const int lo = std::max(begin, first) - first, hi = std::min(end, first + count) - first;
      if (lo < hi) cpu::matmul_rows(*job.w, *job.in, lo * unit, std::min(rows, hi * unit), job.out, rows, isa);
      first += count;
    }
  });
}

void CpuFastBackend::rmsnorm_quantize(const float* x, const float* weight, int n, float* out, cpu::MatmulInput& in) {
  const int H = shape_.hidden_size;
  cpu::reset_input(in, out, n, H);
  pool_->parallel_for(n, 1, [&](int64_t begin, int64_t end) {
    for (int64_t t = begin; t < end; ++t) rmsnorm_row(x + t * H, weight, H, shape_.rms_norm_eps, out + t * H);
    cpu::quantize_input_rows(in, int(begin), int(end));
  });
}

void CpuFastBackend::forward(const ForwardStep& step, std::vector<float>* logits) {
  validate_step(step, StepLimits{shape_.vocab_size, num_blocks_, block_size_});
  const int n = int(step.tokens.size());
  ensure_buffers(n);
  const int H = shape_.hidden_size, Q = shape_.q_dim(), I = shape_.intermediate_size;
  for (int i = 0; i < n; ++i) {
    dequantize_weight_row(embed_.format, embed_.row(step.tokens[i]), x_.data() + std::size_t(i) * H, H);
  }
  cpu::PagedAttentionParams ap;
  ap.q = q_.data();
  ap.q_positions = step.positions.data();
  ap.table = step.table.data();
  ap.table_len = int(step.table.size());
  ap.n = n;
  ap.num_heads = shape_.num_heads;
  ap.num_kv_heads = shape_.num_kv_heads;
  ap.head_dim = shape_.head_dim;
  ap.block_size = block_size_;
  ap.lazy = step.lazy_rotation;
  ap.out = attn_.data();
  int64_t lo = 0, hi = 0;
  cpu::attention_rotation_range(ap, &lo, &hi);
  for (int32_t pos : step.positions) {
    lo = std::min<int64_t>(lo, pos);
    hi = std::max<int64_t>(hi, pos);
  }
  rope_.cover(lo, hi);
  for (int l = 0; l < shape_.num_layers; ++l) {
    const Layer& w = layers_[l];
    rmsnorm_quantize(x_.data(), w.attn_norm, n, h_.data(), in_h_);
    run_matmuls({{&w.wq, &in_h_, q_.data()}, {&w.wk, &in_h_, k_.data()}, {&w.wv, &in_h_, v_.data()}});
    cpu::KvWriteParams kw;
    kw.k = k_.data();
    kw.v = v_.data();
    kw.positions = step.positions.data();
    kw.slots = step.slots.data();
    kw.n = n;
    kw.num_kv_heads = shape_.num_kv_heads;
    kw.head_dim = shape_.head_dim;
    kw.block_size = block_size_;
    kw.k_pool = k_pool_[l].data();
    kw.v_pool = v_pool_[l].data();
    cpu::fast_kv_write(kw, rope_);
    ap.k_pool = k_pool_[l].data();
    ap.v_pool = v_pool_[l].data();
    cpu::fast_paged_attention(ap, rope_, *pool_, isa_);
    cpu::reset_input(in_attn_, attn_.data(), n, Q);
    pool_->parallel_for(n, 1, [&](int64_t b, int64_t e) { cpu::quantize_input_rows(in_attn_, int(b), int(e)); });
    run_matmuls({{&w.wo, &in_attn_, o_.data()}});
    for (std::size_t i = 0; i < std::size_t(n) * H; ++i) x_[i] += o_[i];
    rmsnorm_quantize(x_.data(), w.mlp_norm, n, h_.data(), in_h_);
    run_matmuls({{&w.w_gate, &in_h_, gate_.data()}, {&w.w_up, &in_h_, up_.data()}});
    cpu::reset_input(in_act_, gate_.data(), n, I);
    pool_->parallel_for(n, 1, [&](int64_t b, int64_t e) {
      for (int64_t i = b * I; i < e * I; ++i) {
        const float g = gate_[i];
        gate_[i] = g / (1.0f + std::exp(-g)) * up_[i];
      }
      cpu::quantize_input_rows(in_act_, int(b), int(e));
    });
    run_matmuls({{&w.w_down, &in_act_, o_.data()}});
    for (std::size_t i = 0; i < std::size_t(n) * H; ++i) x_[i] += o_[i];
  }
  if (!step.want_logits || logits == nullptr) return;
  rmsnorm_quantize(x_.data() + std::size_t(n - 1) * H, final_norm_, 1, h_.data(), in_h_);
  logits->resize(std::size_t(shape_.vocab_size));
  run_matmuls({{&lm_head_, &in_h_, logits->data()}});
}

void CpuFastBackend::copy_blocks(std::span<const BlockCopy> copies) {
  const int D = shape_.head_dim, heads = shape_.num_kv_heads;
  for (const BlockCopy& c : copies) {
    if (c.src < 0 || c.src >= num_blocks_ || c.dst < 0 || c.dst >= num_blocks_) {
      throw Error("copy_blocks: block out of the pool");
    }
    if (c.valid < 0 || c.valid > block_size_) throw Error("copy_blocks: valid count out of the block");
    rope_.cover(std::min(0, c.shift), std::max(0, c.shift));
    for (int l = 0; l < shape_.num_layers; ++l) {
      float* kp = k_pool_[l].data();
      float* vp = v_pool_[l].data();
      for (int h = 0; h < heads; ++h) {
        for (int s = 0; s < c.valid; ++s) {
          const int64_t src = ((int64_t(c.src) * heads + h) * block_size_ + s) * D;
          const int64_t dst = ((int64_t(c.dst) * heads + h) * block_size_ + s) * D;
          std::copy(kp + src, kp + src + D, kp + dst);
          rope_.rotate(kp + dst, c.shift);
          std::copy(vp + src, vp + src + D, vp + dst);
        }
      }
    }
  }
}

}  // namespace lazyscope

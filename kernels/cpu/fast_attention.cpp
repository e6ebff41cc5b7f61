#include "kernels/cpu/fast_attention.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "base/error.h"

#if defined(__x86_64__)
// GCC 12 flags the self-initialised _mm512_undefined_* inside its own AVX-512 headers.
#if !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#endif
#include <immintrin.h>
#define LAZYSCOPE_X86 1
#define LZ_AVX512 __attribute__((target("avx512f,avx512bw,avx512dq,avx512vl,avx2,fma")))
#define LZ_AVX2 __attribute__((target("avx2,fma")))
#endif

namespace lazyscope::cpu {
namespace {

int64_t pool_offset(int block, int head, int slot, int num_kv_heads, int block_size, int head_dim) {
  return ((int64_t(block) * num_kv_heads + head) * block_size + slot) * head_dim;
}

// Portable helpers (any head_dim, any processor).
struct ScalarOps {
  static float dot(const float* a, const float* b, int n) {
    float s = 0.0f;
    for (int i = 0; i < n; ++i) s += a[i] * b[i];
    return s;
  }
  static void axpy(float* y, float a, const float* x, int n) {
    for (int i = 0; i < n; ++i) y[i] += a * x[i];
  }
  static void scale(float* y, float a, int n) {
    for (int i = 0; i < n; ++i) y[i] *= a;
  }
  // p[i] = exp(s[i] - max), returns the sum.
  static float exp_shifted(const float* s, float* p, int n, float max) {
    float sum = 0.0f;
    for (int i = 0; i < n; ++i) sum += (p[i] = std::exp(s[i] - max));
    return sum;
  }
};

#ifdef LAZYSCOPE_X86
// head_dim a multiple of 16.
struct Avx512Ops {
  LZ_AVX512 static float dot(const float* a, const float* b, int n) {
    __m512 acc = _mm512_mul_ps(_mm512_loadu_ps(a), _mm512_loadu_ps(b));
    for (int i = 16; i < n; i += 16) acc = _mm512_fmadd_ps(_mm512_loadu_ps(a + i), _mm512_loadu_ps(b + i), acc);
    return _mm512_reduce_add_ps(acc);
  }
  LZ_AVX512 static void axpy(float* y, float a, const float* x, int n) {
    const __m512 va = _mm512_set1_ps(a);
    for (int i = 0; i < n; i += 16) {
      _mm512_storeu_ps(y + i, _mm512_fmadd_ps(va, _mm512_loadu_ps(x + i), _mm512_loadu_ps(y + i)));
    }
  }
  LZ_AVX512 static void scale(float* y, float a, int n) {
    const __m512 va = _mm512_set1_ps(a);
    for (int i = 0; i < n; i += 16) _mm512_storeu_ps(y + i, _mm512_mul_ps(va, _mm512_loadu_ps(y + i)));
  }
  // exp(x) for x <= 0: 2^k * e^r, |r| <= ln2 / 2, degree-6 polynomial (rel. error ~2e-7).
  LZ_AVX512 static __m512 exp_nonpositive(__m512 x) {
    x = _mm512_max_ps(x, _mm512_set1_ps(-87.0f));
    const __m512 k = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(1.44269504088896341f)),
                                          _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m512 r = _mm512_fnmadd_ps(k, _mm512_set1_ps(0.693359375f), x);
    r = _mm512_fnmadd_ps(k, _mm512_set1_ps(-2.12194440e-4f), r);
    __m512 p = _mm512_set1_ps(1.0f / 720.0f);
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 120.0f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 24.0f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 6.0f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(0.5f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
    return _mm512_scalef_ps(p, k);
  }
  LZ_AVX512 static float exp_shifted(const float* s, float* p, int n, float max) {
    const __m512 vmax = _mm512_set1_ps(max);
    __m512 sum = _mm512_setzero_ps();
    for (int i = 0; i < n; i += 16) {
      const __mmask16 mask = n - i >= 16 ? __mmask16(0xFFFF) : __mmask16((1u << (n - i)) - 1u);
      const __m512 e = exp_nonpositive(_mm512_sub_ps(_mm512_maskz_loadu_ps(mask, s + i), vmax));
      _mm512_mask_storeu_ps(p + i, mask, e);
      sum = _mm512_mask_add_ps(sum, mask, sum, e);
    }
    return _mm512_reduce_add_ps(sum);
  }
};

// head_dim a multiple of 8.
struct Avx2Ops {
  LZ_AVX2 static float hsum(__m256 v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
  }
  LZ_AVX2 static float dot(const float* a, const float* b, int n) {
    __m256 acc = _mm256_mul_ps(_mm256_loadu_ps(a), _mm256_loadu_ps(b));
    for (int i = 8; i < n; i += 8) acc = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i), acc);
    return hsum(acc);
  }
  LZ_AVX2 static void axpy(float* y, float a, const float* x, int n) {
    const __m256 va = _mm256_set1_ps(a);
    for (int i = 0; i < n; i += 8) {
      _mm256_storeu_ps(y + i, _mm256_fmadd_ps(va, _mm256_loadu_ps(x + i), _mm256_loadu_ps(y + i)));
    }
  }
  LZ_AVX2 static void scale(float* y, float a, int n) {
    const __m256 va = _mm256_set1_ps(a);
    for (int i = 0; i < n; i += 8) _mm256_storeu_ps(y + i, _mm256_mul_ps(va, _mm256_loadu_ps(y + i)));
  }
  static float exp_shifted(const float* s, float* p, int n, float max) {
    return ScalarOps::exp_shifted(s, p, n, max);
  }
};
#endif

struct Scratch {
  std::vector<float> qrot, acc, scores, probs, row_max, row_sum;
};

// One (token, KV head): every query head of the group against the visible keys. The query group
// is rotated once per run of blocks with one shift, by (m - shift); each block is folded into
// each head's online softmax. `Block` computes a block's scores and adds its weighted values
// (the generic loops, or the register-held versions for the common head dims).
template <class Ops, class Block>
[[gnu::always_inline]] inline void attend_group(const PagedAttentionParams& p, const RopeTable& rope, int token,
                                                int kv_head, int visible, Scratch& s) {
  const int D = Block::head_dim(p), G = p.num_heads / p.num_kv_heads;
  const float scale = 1.0f / std::sqrt(float(D));
  const int64_t m = p.q_positions[token];
  const float* q_raw = p.q + (int64_t(token) * p.num_heads + int64_t(kv_head) * G) * D;
  float* qrot = s.qrot.data();
  float* acc = s.acc.data();
  std::fill_n(acc, G * D, 0.0f);
  for (int g = 0; g < G; ++g) {
    s.row_max[g] = -INFINITY;
    s.row_sum[g] = 0.0f;
  }
  int seen = 0;
  int shift = 0;
  bool rotated = false;
  for (int b = 0; b < p.table_len && seen < visible; ++b) {
    const BlockRef& ref = p.table[b];
    if (!rotated || ref.shift != shift) {
      // A run of blocks with one shift: the query rotated once by (m - shift).
      shift = ref.shift;
      rotated = true;
      std::copy(q_raw, q_raw + G * D, qrot);
      for (int g = 0; g < G; ++g) {
        rope.rotate(qrot + g * D, m - shift);
        Ops::scale(qrot + g * D, scale, D);
      }
    }
    const int take = std::min(ref.valid, visible - seen);
    const float* k = p.k_pool + pool_offset(ref.block, kv_head, 0, p.num_kv_heads, p.block_size, D);
    const float* v = p.v_pool + pool_offset(ref.block, kv_head, 0, p.num_kv_heads, p.block_size, D);
    for (int g = 0; g < G; ++g) {
      float* sc = s.scores.data();
      Block::scores(qrot + g * D, k, take, D, sc);
      float block_max = -INFINITY;
      for (int j = 0; j < take; ++j) block_max = std::max(block_max, sc[j]);
      float* out = acc + g * D;
      if (block_max > s.row_max[g]) {
        const float correction = std::exp(s.row_max[g] - block_max);
        s.row_sum[g] *= correction;
        Ops::scale(out, correction, D);
        s.row_max[g] = block_max;
      }
      float* pr = s.probs.data();
      s.row_sum[g] += Ops::exp_shifted(sc, pr, take, s.row_max[g]);
      Block::add_values(out, pr, v, take, D);
    }
    seen += take;
  }
  for (int g = 0; g < G; ++g) {
    float* out = p.out + (int64_t(token) * p.num_heads + int64_t(kv_head) * G + g) * D;
    const float inv = 1.0f / s.row_sum[g];
    for (int d = 0; d < D; ++d) out[d] = acc[g * D + d] * inv;
  }
}

// Any head_dim: one dot product per key, one axpy per value.
template <class Ops>
struct LoopBlock {
  static int head_dim(const PagedAttentionParams& p) { return p.head_dim; }
  [[gnu::always_inline]] static inline void scores(const float* q, const float* k, int take, int D, float* sc) {
    for (int j = 0; j < take; ++j) sc[j] = Ops::dot(q, k + int64_t(j) * D, D);
  }
  [[gnu::always_inline]] static inline void add_values(float* out, const float* pr, const float* v, int take, int D) {
    for (int j = 0; j < take; ++j) Ops::axpy(out, pr[j], v + int64_t(j) * D, D);
  }
};

void attend_scalar(const PagedAttentionParams& p, const RopeTable& rope, int token, int kv_head, int visible,
                   Scratch& s) {
  attend_group<ScalarOps, LoopBlock<ScalarOps>>(p, rope, token, kv_head, visible, s);
}
#ifdef LAZYSCOPE_X86
LZ_AVX512 void attend_avx512(const PagedAttentionParams& p, const RopeTable& rope, int token, int kv_head,
                             int visible, Scratch& s) {
  attend_group<Avx512Ops, LoopBlock<Avx512Ops>>(p, rope, token, kv_head, visible, s);
}

// Four keys' q.k at once: the four products' lanes summed by one transpose-and-add tree.
LZ_AVX512 inline __m128 sum4(__m512 a, __m512 b, __m512 c, __m512 d) {
  const __m512 ab = _mm512_add_ps(_mm512_unpacklo_ps(a, b), _mm512_unpackhi_ps(a, b));
  const __m512 cd = _mm512_add_ps(_mm512_unpacklo_ps(c, d), _mm512_unpackhi_ps(c, d));
  const __m512 abcd = _mm512_add_ps(_mm512_shuffle_ps(ab, cd, _MM_SHUFFLE(1, 0, 1, 0)),
                                    _mm512_shuffle_ps(ab, cd, _MM_SHUFFLE(3, 2, 3, 2)));
  const __m256 h = _mm256_add_ps(_mm512_castps512_ps256(abcd), _mm512_extractf32x8_ps(abcd, 1));
  return _mm_add_ps(_mm256_castps256_ps128(h), _mm256_extractf128_ps(h, 1));
}

// head_dim = 16 V (V <= 8): the query and a head's output stay in registers over a block's
// keys (the loop version reloads and stores the output for every key).
template <int V>
struct RegisterBlock {
  static constexpr int kHeadDim = 16 * V;
  static int head_dim(const PagedAttentionParams&) { return kHeadDim; }
  LZ_AVX512 static inline void scores(const float* qg, const float* k, int take, int,
                                                             float* sc) {
    constexpr int D = kHeadDim;
    __m512 q[V];
    for (int c = 0; c < V; ++c) q[c] = _mm512_loadu_ps(qg + 16 * c);
    int j = 0;
    for (; j + 4 <= take; j += 4) {
      const float* k0 = k + int64_t(j) * D;
      __m512 a0 = _mm512_mul_ps(q[0], _mm512_loadu_ps(k0));
      __m512 a1 = _mm512_mul_ps(q[0], _mm512_loadu_ps(k0 + D));
      __m512 a2 = _mm512_mul_ps(q[0], _mm512_loadu_ps(k0 + 2 * D));
      __m512 a3 = _mm512_mul_ps(q[0], _mm512_loadu_ps(k0 + 3 * D));
      for (int c = 1; c < V; ++c) {
        a0 = _mm512_fmadd_ps(q[c], _mm512_loadu_ps(k0 + 16 * c), a0);
        a1 = _mm512_fmadd_ps(q[c], _mm512_loadu_ps(k0 + D + 16 * c), a1);
        a2 = _mm512_fmadd_ps(q[c], _mm512_loadu_ps(k0 + 2 * D + 16 * c), a2);
        a3 = _mm512_fmadd_ps(q[c], _mm512_loadu_ps(k0 + 3 * D + 16 * c), a3);
      }
      _mm_storeu_ps(sc + j, sum4(a0, a1, a2, a3));
    }
    for (; j < take; ++j) sc[j] = Avx512Ops::dot(qg, k + int64_t(j) * D, D);
  }
  LZ_AVX512 static inline void add_values(float* out, const float* pr, const float* v,
                                                                 int take, int) {
    constexpr int D = kHeadDim;
    __m512 o[V];
    for (int c = 0; c < V; ++c) o[c] = _mm512_loadu_ps(out + 16 * c);
    for (int j = 0; j < take; ++j) {
      const __m512 pj = _mm512_set1_ps(pr[j]);
      const float* vj = v + int64_t(j) * D;
      for (int c = 0; c < V; ++c) o[c] = _mm512_fmadd_ps(pj, _mm512_loadu_ps(vj + 16 * c), o[c]);
    }
    for (int c = 0; c < V; ++c) _mm512_storeu_ps(out + 16 * c, o[c]);
  }
};

// flatten: the block steps inline into the walk (always_inline cannot cross the target attribute).
template <int V>
[[gnu::flatten]] LZ_AVX512 void attend_avx512_regs(const PagedAttentionParams& p, const RopeTable& rope, int token, int kv_head,
                                  int visible, Scratch& s) {
  attend_group<Avx512Ops, RegisterBlock<V>>(p, rope, token, kv_head, visible, s);
}
LZ_AVX2 void attend_avx2(const PagedAttentionParams& p, const RopeTable& rope, int token, int kv_head,
                         int visible, Scratch& s) {
  attend_group<Avx2Ops, LoopBlock<Avx2Ops>>(p, rope, token, kv_head, visible, s);
}
#endif

int validate(const PagedAttentionParams& p) {
  if (p.num_kv_heads <= 0 || p.num_heads % p.num_kv_heads != 0) {
    throw Error("paged_attention: num_heads must be a multiple of num_kv_heads");
  }
  int total = 0;
  for (int b = 0; b < p.table_len; ++b) {
    const BlockRef& ref = p.table[b];
    if (ref.valid < 1 || ref.valid > p.block_size) {
      throw Error("paged_attention: block " + std::to_string(ref.block) + " has " + std::to_string(ref.valid) +
                  " valid slots");
    }
    if (!p.lazy && ref.shift != 0) {
      throw Error("paged_attention: shifted block " + std::to_string(ref.block) +
                  " in a plain (non-lazy) attention call");
    }
    total += ref.valid;
  }
  if (p.n > total) throw Error("paged_attention: more queries than table entries");
  return total;
}

}  // namespace

void RopeTable::reset(const float* inv_freq, int head_dim) {
  half_ = head_dim / 2;
  inv_freq_.assign(inv_freq, inv_freq + half_);
  lo_ = 0;
  hi_ = -1;
  values_.clear();
}

void RopeTable::cover(int64_t lo, int64_t hi) {
  if (lo >= lo_ && hi <= hi_) return;
  const int64_t new_lo = std::min(lo, hi_ >= lo_ ? lo_ : lo);
  // Grow in steps so a long generation does not rebuild the table at every token.
  const int64_t new_hi = std::max(hi, hi_ >= lo_ ? hi_ : hi) + 1024;
  std::vector<float> values(std::size_t(new_hi - new_lo + 1) * 2 * half_);
  for (int64_t pos = new_lo; pos <= new_hi; ++pos) {
    float* c = values.data() + std::size_t(pos - new_lo) * 2 * half_;
    const float fpos = float(pos);
    for (int i = 0; i < half_; ++i) {
      const float angle = fpos * inv_freq_[i];  // as rope_rotate: fp32 angle, double cos/sin
      c[i] = float(std::cos(double(angle)));
      c[half_ + i] = float(std::sin(double(angle)));
    }
  }
  values_ = std::move(values);
  lo_ = new_lo;
  hi_ = new_hi;
}

void RopeTable::rotate(float* x, int64_t position) const {
  const float* c = cos_at(position);
  const float* s = sin_at(position);
  for (int i = 0; i < half_; ++i) {
    const float a = x[i], b = x[i + half_];
    x[i] = a * c[i] - b * s[i];
    x[i + half_] = b * c[i] + a * s[i];
  }
}

void attention_rotation_range(const PagedAttentionParams& p, int64_t* lo, int64_t* hi) {
  int min_shift = 0, max_shift = 0;
  for (int b = 0; b < p.table_len; ++b) {
    min_shift = std::min(min_shift, p.table[b].shift);
    max_shift = std::max(max_shift, p.table[b].shift);
  }
  int64_t min_pos = INT64_MAX, max_pos = INT64_MIN;
  for (int i = 0; i < p.n; ++i) {
    min_pos = std::min<int64_t>(min_pos, p.q_positions[i]);
    max_pos = std::max<int64_t>(max_pos, p.q_positions[i]);
  }
  *lo = min_pos - max_shift;
  *hi = max_pos - min_shift;
}

void fast_paged_attention(const PagedAttentionParams& p, const RopeTable& rope, ThreadPool& pool, Isa isa) {
  const int total = validate(p);
  const int prior = total - p.n;
  const int D = p.head_dim, G = p.num_heads / p.num_kv_heads;
  auto* attend = &attend_scalar;
#ifdef LAZYSCOPE_X86
  if (isa == Isa::Avx512 && D == 64) attend = &attend_avx512_regs<4>;
  else if (isa == Isa::Avx512 && D == 128) attend = &attend_avx512_regs<8>;
  else if (isa == Isa::Avx512 && D == 32) attend = &attend_avx512_regs<2>;
  else if (isa == Isa::Avx512 && D == 16) attend = &attend_avx512_regs<1>;
  else if (isa == Isa::Avx512 && D % 16 == 0) attend = &attend_avx512;
  else if (isa >= Isa::Avx2 && D % 8 == 0) attend = &attend_avx2;
#endif
  const int64_t work = int64_t(p.n) * p.num_kv_heads;
  // Chunks of interleaved items, claimed one at a time: later tokens see more keys (causal
  // prefill), and a decode step has only as many items as KV heads.
  const int chunks = int(std::min<int64_t>(work, pool.threads() == 1 ? 1 : 64 * pool.threads()));
  pool.run_chunks(chunks, [&](int chunk) {
    // A thread's scratch outlives the call: each buffer grows to this call's own need (a group
    // larger than the last call's, with a smaller head_dim, overflowed row_max when only qrot's
    // size was checked).
    thread_local Scratch s;
    auto at_least = [](std::vector<float>& v, std::size_t n) {
      if (v.size() < n) v.resize(n);
    };
    at_least(s.qrot, std::size_t(G) * D);
    at_least(s.acc, std::size_t(G) * D);
    at_least(s.row_max, std::size_t(G));
    at_least(s.row_sum, std::size_t(G));
    at_least(s.scores, std::size_t(p.block_size) + 16);
    at_least(s.probs, std::size_t(p.block_size) + 16);
    for (int64_t w = chunk; w < work; w += chunks) {
      const int token = int(w / p.num_kv_heads), kv_head = int(w % p.num_kv_heads);
      attend(p, rope, token, kv_head, prior + token + 1, s);
    }
  });
}

void fast_kv_write(const KvWriteParams& p, const RopeTable& rope) {
  const int D = p.head_dim;
  for (int i = 0; i < p.n; ++i) {
    const int block = p.slots[i] / p.block_size, slot = p.slots[i] % p.block_size;
    for (int h = 0; h < p.num_kv_heads; ++h) {
      const float* k = p.k + (int64_t(i) * p.num_kv_heads + h) * D;
      const float* v = p.v + (int64_t(i) * p.num_kv_heads + h) * D;
      float* kd = p.k_pool + pool_offset(block, h, slot, p.num_kv_heads, p.block_size, D);
      float* vd = p.v_pool + pool_offset(block, h, slot, p.num_kv_heads, p.block_size, D);
      std::copy(k, k + D, kd);
      rope.rotate(kd, p.positions[i]);
      std::copy(v, v + D, vd);
    }
  }
}

}  // namespace lazyscope::cpu

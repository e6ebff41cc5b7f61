// Block layouts follow ggml's published formats (ggml-common.h); written from the layouts.
#include "kernels/cpu/quant_matmul.h"

#include <algorithm>
#include <cmath>
#include <cstring>
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
#endif

namespace lazyscope::cpu {
namespace {

constexpr int kQK = 32;

// Where a 32-element block format keeps its parts, and what its unsigned codes u mean:
// x = d * u + m with m = min (Q4_1, Q5_1) or m = -zero * d (Q4_0: 8, Q5_0: 16, Q8_0: 128,
// whose signed codes are read as u = q + 128).
struct BlockLayout {
  int bytes;
  int qs;        // offset of the low nibbles / int8 codes
  int qh;        // offset of the 32 high bits (Q5_*), -1 when none
  bool has_min;  // a stored f16 min at offset 2
  int zero;
};

constexpr BlockLayout layout_of(WeightFormat f) {
  switch (f) {
    case WeightFormat::Q4_0:
      return {18, 2, -1, false, 8};
    case WeightFormat::Q4_1:
      return {20, 4, -1, true, 0};
    case WeightFormat::Q5_0:
      return {22, 6, 2, false, 16};
    case WeightFormat::Q5_1:
      return {24, 8, 4, true, 0};
    default:
      return {34, 2, -1, false, 128};  // Q8_0
  }
}

inline uint16_t load_u16(const uint8_t* p) {
  uint16_t v;
  std::memcpy(&v, p, 2);
  return v;
}
inline uint32_t load_u32(const uint8_t* p) {
  uint32_t v;
  std::memcpy(&v, p, 4);
  return v;
}

// ---- scalar: the same arithmetic one block at a time (fallback and test reference) ----

template <WeightFormat F>
void unpack_block(const uint8_t* blk, uint8_t u[kQK], float& dw, float& mw) {
  constexpr BlockLayout L = layout_of(F);
  dw = half_to_float(load_u16(blk));
  mw = L.has_min ? half_to_float(load_u16(blk + 2)) : -float(L.zero) * dw;
  const uint8_t* qs = blk + L.qs;
  if constexpr (F == WeightFormat::Q8_0) {
    for (int j = 0; j < kQK; ++j) u[j] = uint8_t(qs[j] ^ 0x80u);
  } else {
    for (int j = 0; j < kQK / 2; ++j) {
      u[j] = qs[j] & 0x0F;
      u[j + kQK / 2] = qs[j] >> 4;
    }
    if constexpr (L.qh >= 0) {
      const uint32_t qh = load_u32(blk + L.qh);
      for (int j = 0; j < kQK; ++j) u[j] = uint8_t(u[j] | (((qh >> j) & 1u) << 4));
    }
  }
}

template <WeightFormat F>
float block_dot_scalar(const uint8_t* blk, const int8_t* q, float dy, float sy8) {
  uint8_t u[kQK];
  float dw, mw;
  unpack_block<F>(blk, u, dw, mw);
  int32_t dot = 0;
  for (int j = 0; j < kQK; ++j) dot += int32_t(u[j]) * int32_t(q[j]);
  return float(dot) * (dw * dy) + mw * (sy8 * 8.0f);
}

template <WeightFormat F>
float row_dot_scalar(const uint8_t* row, const MatmulInput& in, int t, int block_begin) {
  constexpr BlockLayout L = layout_of(F);
  const int blocks = in.k / kQK;
  const int8_t* q = in.q.data() + std::size_t(t) * in.k;
  const float* d = in.scale.data() + std::size_t(t) * blocks;
  const float* s = in.sum_eighth.data() + std::size_t(t) * blocks;
  float sum = 0.0f;
  for (int b = block_begin; b < blocks; ++b) {
    sum += block_dot_scalar<F>(row + std::size_t(b) * L.bytes, q + b * kQK, d[b], s[b]);
  }
  return sum;
}

template <WeightFormat F>
void matmul_q8_scalar(const PackedMatrix& w, const MatmulInput& in, int r0, int r1, float* out,
                      int64_t stride) {
  for (int r = r0; r < r1; ++r) {
    for (int t = 0; t < in.n; ++t) out[t * stride + r] = row_dot_scalar<F>(w.row(r), in, t, 0);
  }
}

float dot_f32_scalar(const float* a, const float* b, int n) {
  float s0 = 0, s1 = 0, s2 = 0, s3 = 0;
  int i = 0;
  for (; i + 4 <= n; i += 4) {
    s0 += a[i] * b[i];
    s1 += a[i + 1] * b[i + 1];
    s2 += a[i + 2] * b[i + 2];
    s3 += a[i + 3] * b[i + 3];
  }
  for (; i < n; ++i) s0 += a[i] * b[i];
  return (s0 + s1) + (s2 + s3);
}

#ifdef LAZYSCOPE_X86

#define LZ_AVX2 __attribute__((target("avx2,fma,f16c")))
#define LZ_AVX512 __attribute__((target("avx512f,avx512bw,avx512dq,avx512vl,avx512vnni,avx2,fma,f16c")))

// ---- AVX2: one block per 256-bit register ----

LZ_AVX2 inline float hsum256(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

// 32 bytes with 0x10 where bit j of qh is set.
LZ_AVX2 inline __m256i high_bits256(uint32_t qh) {
  const __m256i shuffle = _mm256_setr_epi64x(0x0000000000000000, 0x0101010101010101,
                                             0x0202020202020202, 0x0303030303030303);
  __m256i bytes = _mm256_shuffle_epi8(_mm256_set1_epi32(int(qh)), shuffle);
  const __m256i bit = _mm256_set1_epi64x(int64_t(0x8040201008040201ull));
  bytes = _mm256_cmpeq_epi8(_mm256_and_si256(bytes, bit), bit);
  return _mm256_and_si256(bytes, _mm256_set1_epi8(0x10));
}

template <WeightFormat F>
LZ_AVX2 float row_dot_avx2(const uint8_t* row, const MatmulInput& in, int t) {
  constexpr BlockLayout L = layout_of(F);
  const int blocks = in.k / kQK;
  const int8_t* q = in.q.data() + std::size_t(t) * in.k;
  const float* d = in.scale.data() + std::size_t(t) * blocks;
  const float* s = in.sum_eighth.data() + std::size_t(t) * blocks;
  __m256 acc = _mm256_setzero_ps();
  float bias = 0.0f;
  const __m256i ones = _mm256_set1_epi16(1);
  for (int b = 0; b < blocks; ++b) {
    const uint8_t* blk = row + std::size_t(b) * L.bytes;
    const __m256i y = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(q + b * kQK));
    const float dw = _cvtsh_ss(load_u16(blk));
    __m256i p16;
    if constexpr (F == WeightFormat::Q8_0) {
      const __m256i wq = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk + L.qs));
      p16 = _mm256_maddubs_epi16(_mm256_sign_epi8(wq, wq), _mm256_sign_epi8(y, wq));
    } else {
      const __m128i raw = _mm_loadu_si128(reinterpret_cast<const __m128i*>(blk + L.qs));
      __m256i u = _mm256_and_si256(_mm256_set_m128i(_mm_srli_epi16(raw, 4), raw), _mm256_set1_epi8(0x0F));
      if constexpr (L.qh >= 0) u = _mm256_or_si256(u, high_bits256(load_u32(blk + L.qh)));
      p16 = _mm256_maddubs_epi16(u, y);
      const float mw = L.has_min ? _cvtsh_ss(load_u16(blk + 2)) : -float(L.zero) * dw;
      bias += mw * (s[b] * 8.0f);
    }
    const __m256 p = _mm256_cvtepi32_ps(_mm256_madd_epi16(p16, ones));
    acc = _mm256_fmadd_ps(p, _mm256_set1_ps(dw * d[b]), acc);
  }
  return hsum256(acc) + bias;
}

template <WeightFormat F>
LZ_AVX2 void matmul_q8_avx2(const PackedMatrix& w, const MatmulInput& in, int r0, int r1,
                            float* out, int64_t stride) {
  for (int r = r0; r < r1; ++r) {
    for (int t = 0; t < in.n; ++t) out[t * stride + r] = row_dot_avx2<F>(w.row(r), in, t);
  }
}

LZ_AVX2 float dot_f32_avx2(const float* a, const float* b, int n) {
  __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();
  int i = 0;
  for (; i + 16 <= n; i += 16) {
    acc0 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i), acc0);
    acc1 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i + 8), _mm256_loadu_ps(b + i + 8), acc1);
  }
  float s = hsum256(_mm256_add_ps(acc0, acc1));
  for (; i < n; ++i) s += a[i] * b[i];
  return s;
}

// ---- AVX-512 VNNI: two blocks per 512-bit register, natural element order ----

// Lane pattern [a x 8, b x 8] from two adjacent floats.
LZ_AVX512 inline __m512 spread_pair(const float* p) {
  const __m512i index = _mm512_set_epi32(1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0);
  return _mm512_permutexvar_ps(index, _mm512_castps128_ps512(_mm_castpd_ps(_mm_load_sd(reinterpret_cast<const double*>(p)))));
}

// Unsigned codes of blocks b and b + 1 (64 bytes, element order).
template <WeightFormat F>
LZ_AVX512 inline __m512i expand_pair(const uint8_t* b0) {
  constexpr BlockLayout L = layout_of(F);
  const uint8_t* b1 = b0 + L.bytes;
  if constexpr (F == WeightFormat::Q8_0) {
    const __m512i z = _mm512_inserti64x4(
        _mm512_castsi256_si512(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(b0 + L.qs))),
        _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b1 + L.qs)), 1);
    return _mm512_xor_si512(z, _mm512_set1_epi8(char(0x80)));
  } else {
    const __m256i raw = _mm256_inserti128_si256(
        _mm256_castsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(b0 + L.qs))),
        _mm_loadu_si128(reinterpret_cast<const __m128i*>(b1 + L.qs)), 1);
    __m512i z = _mm512_inserti64x4(_mm512_castsi256_si512(raw), _mm256_srli_epi16(raw, 4), 1);
    z = _mm512_and_si512(z, _mm512_set1_epi8(0x0F));
    z = _mm512_shuffle_i64x2(z, z, _MM_SHUFFLE(3, 1, 2, 0));  // [lo0 lo1 hi0 hi1] -> [lo0 hi0 lo1 hi1]
    if constexpr (L.qh >= 0) {
      const __mmask64 high = __mmask64(load_u32(b0 + L.qh)) | (__mmask64(load_u32(b1 + L.qh)) << 32);
      z = _mm512_mask_add_epi8(z, high, z, _mm512_set1_epi8(16));
    }
    return z;
  }
}

// dw and m of blocks b and b + 1 in the lane pattern of expand_pair.
template <WeightFormat F>
LZ_AVX512 inline void scales_pair(const uint8_t* b0, __m512& dw, __m512& mw) {
  constexpr BlockLayout L = layout_of(F);
  const uint8_t* b1 = b0 + L.bytes;
  const uint64_t halves = uint64_t(load_u16(b0)) | (uint64_t(load_u16(b1)) << 16) |
                          (L.has_min ? (uint64_t(load_u16(b0 + 2)) << 32) | (uint64_t(load_u16(b1 + 2)) << 48) : 0);
  const __m512 f = _mm512_castps128_ps512(_mm_cvtph_ps(_mm_cvtsi64_si128(int64_t(halves))));
  dw = _mm512_permutexvar_ps(_mm512_set_epi32(1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0), f);
  if constexpr (L.has_min) {
    mw = _mm512_permutexvar_ps(_mm512_set_epi32(3, 3, 3, 3, 3, 3, 3, 3, 2, 2, 2, 2, 2, 2, 2, 2), f);
  } else {
    mw = _mm512_mul_ps(dw, _mm512_set1_ps(-float(L.zero)));
  }
}

// Streaming the weights from memory is a decode step's cost, and the hardware prefetcher does
// not run far enough ahead of a tile's interleaved rows: step `step` of a tile that reads `span`
// bytes of its (contiguous) rows per step asks for the same bytes kPrefetchAhead further on.
// 4 KiB measured best for the default model's matrices (1-8 KiB tried).
constexpr std::size_t kPrefetchAhead = 4096;

LZ_AVX512 inline void prefetch_ahead(const uint8_t* tile, int step, int span) {
  const char* at = reinterpret_cast<const char*>(tile) + kPrefetchAhead + std::size_t(step) * span;
  for (int o = 0; o < span; o += 64) _mm_prefetch(at + o, _MM_HINT_T0);
}

// Decode (a few tokens) for the 4-bit formats: four weight rows side by side, one block per
// step, row i's 16 code bytes in 128-bit lane i. Low nibbles (elements 0-15) and high nibbles
// (16-31) meet the token's two 16-byte halves broadcast to every lane, so a block costs two
// vpdpbusd for four rows and the scales of four rows arrive in one conversion.
template <WeightFormat F>
LZ_AVX512 void gemv4_avx512(const uint8_t* tile, std::size_t row_bytes, const MatmulInput& in, int t, float* out) {
  static_assert(F == WeightFormat::Q4_0 || F == WeightFormat::Q4_1);
  constexpr BlockLayout L = layout_of(F);
  const int blocks = in.k / kQK;
  const int8_t* q = in.q.data() + std::size_t(t) * in.k;
  const float* dy = in.scale.data() + std::size_t(t) * blocks;
  const float* sy = in.sum_eighth.data() + std::size_t(t) * blocks;
  const __m512i nibble = _mm512_set1_epi8(0x0F);
  // Lanes of row i: 4i..4i+3. Scales come as [d0 m0 d1 m1 ...] (Q4_1) or [d0 d1 d2 d3] (Q4_0).
  const __m512i d_index = L.has_min ? _mm512_set_epi32(6, 6, 6, 6, 4, 4, 4, 4, 2, 2, 2, 2, 0, 0, 0, 0)
                                    : _mm512_set_epi32(3, 3, 3, 3, 2, 2, 2, 2, 1, 1, 1, 1, 0, 0, 0, 0);
  const __m512i m_index = _mm512_set_epi32(7, 7, 7, 7, 5, 5, 5, 5, 3, 3, 3, 3, 1, 1, 1, 1);
  __m512 acc = _mm512_setzero_ps(), bias = _mm512_setzero_ps();
  const uint8_t* r0 = tile;
  const uint8_t* r1 = tile + row_bytes;
  const uint8_t* r2 = tile + 2 * row_bytes;
  const uint8_t* r3 = tile + 3 * row_bytes;
  for (int b = 0; b < blocks; ++b) {
    prefetch_ahead(tile, b, 4 * L.bytes);
    const std::size_t at = std::size_t(b) * L.bytes;
    __m512i raw = _mm512_castsi128_si512(_mm_loadu_si128(reinterpret_cast<const __m128i*>(r0 + at + L.qs)));
    raw = _mm512_inserti32x4(raw, _mm_loadu_si128(reinterpret_cast<const __m128i*>(r1 + at + L.qs)), 1);
    raw = _mm512_inserti32x4(raw, _mm_loadu_si128(reinterpret_cast<const __m128i*>(r2 + at + L.qs)), 2);
    raw = _mm512_inserti32x4(raw, _mm_loadu_si128(reinterpret_cast<const __m128i*>(r3 + at + L.qs)), 3);
    const __m512i lo = _mm512_and_si512(raw, nibble);
    const __m512i hi = _mm512_and_si512(_mm512_srli_epi16(raw, 4), nibble);
    const __m512i ylo = _mm512_broadcast_i32x4(_mm_loadu_si128(reinterpret_cast<const __m128i*>(q + b * kQK)));
    const __m512i yhi = _mm512_broadcast_i32x4(_mm_loadu_si128(reinterpret_cast<const __m128i*>(q + b * kQK + 16)));
    const __m512i dot = _mm512_dpbusd_epi32(_mm512_dpbusd_epi32(_mm512_setzero_si512(), lo, ylo), hi, yhi);
    __m512 dw, mw;
    if constexpr (L.has_min) {
      __m128i h = _mm_cvtsi32_si128(int(load_u32(r0 + at)));
      h = _mm_insert_epi32(h, int(load_u32(r1 + at)), 1);
      h = _mm_insert_epi32(h, int(load_u32(r2 + at)), 2);
      h = _mm_insert_epi32(h, int(load_u32(r3 + at)), 3);
      const __m512 f = _mm512_castps256_ps512(_mm256_cvtph_ps(h));
      dw = _mm512_permutexvar_ps(d_index, f);
      mw = _mm512_permutexvar_ps(m_index, f);
    } else {
      const uint64_t halves = uint64_t(load_u16(r0 + at)) | (uint64_t(load_u16(r1 + at)) << 16) |
                              (uint64_t(load_u16(r2 + at)) << 32) | (uint64_t(load_u16(r3 + at)) << 48);
      dw = _mm512_permutexvar_ps(d_index, _mm512_castps128_ps512(_mm_cvtph_ps(_mm_cvtsi64_si128(int64_t(halves)))));
      mw = _mm512_mul_ps(dw, _mm512_set1_ps(-float(L.zero)));
    }
    acc = _mm512_fmadd_ps(_mm512_cvtepi32_ps(dot), _mm512_mul_ps(dw, _mm512_set1_ps(dy[b])), acc);
    bias = _mm512_fmadd_ps(mw, _mm512_set1_ps(sy[b]), bias);
  }
  // Each row's four lanes hold its block sums; sum_eighth * 8 spread over four lanes is * 2.
  __m512 v = _mm512_fmadd_ps(bias, _mm512_set1_ps(2.0f), acc);
  v = _mm512_add_ps(v, _mm512_shuffle_ps(v, v, _MM_SHUFFLE(2, 3, 0, 1)));
  v = _mm512_add_ps(v, _mm512_shuffle_ps(v, v, _MM_SHUFFLE(1, 0, 3, 2)));
  const __m512 sums = _mm512_permutexvar_ps(_mm512_set_epi32(0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 12, 8, 4, 0), v);
  _mm_storeu_ps(out, _mm512_castps512_ps128(sums));
}

// Weights of a row tile, expanded once and reused by every token tile.
// Plain arrays read with unaligned loads: the buffer's allocation is not 64-byte aligned.
struct ExpandedPair {
  int8_t u[64];
  float dw[16];
  float mw[16];
};

template <WeightFormat F, int RB, int TB>
LZ_AVX512 void tile_avx512(const ExpandedPair* expanded, int pairs, const uint8_t* const* rows,
                           const MatmulInput& in, int t0, int r0, float* out, int64_t stride) {
  constexpr BlockLayout L = layout_of(F);
  const int blocks = in.k / kQK;
  __m512 acc[RB][TB];
  for (int i = 0; i < RB; ++i)
    for (int j = 0; j < TB; ++j) acc[i][j] = _mm512_setzero_ps();
  for (int p = 0; p < pairs; ++p) {
    __m512i u[RB];
    __m512 dw[RB], mw[RB];
    if (!expanded) prefetch_ahead(rows[0], p, RB * 2 * L.bytes);
    for (int i = 0; i < RB; ++i) {
      if (expanded) {
        const ExpandedPair& e = expanded[std::size_t(i) * pairs + p];
        u[i] = _mm512_loadu_si512(e.u);
        dw[i] = _mm512_loadu_ps(e.dw);
        mw[i] = _mm512_loadu_ps(e.mw);
      } else {
        const uint8_t* blk = rows[i] + std::size_t(2 * p) * L.bytes;
        u[i] = expand_pair<F>(blk);
        scales_pair<F>(blk, dw[i], mw[i]);
      }
    }
    for (int j = 0; j < TB; ++j) {
      const int t = t0 + j;
      const __m512i y = _mm512_loadu_si512(in.q.data() + std::size_t(t) * in.k + 64 * p);
      const __m512 dy = spread_pair(in.scale.data() + std::size_t(t) * blocks + 2 * p);
      const __m512 sy = spread_pair(in.sum_eighth.data() + std::size_t(t) * blocks + 2 * p);
      for (int i = 0; i < RB; ++i) {
        const __m512i dot = _mm512_dpbusd_epi32(_mm512_setzero_si512(), u[i], y);
        acc[i][j] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(dot), _mm512_mul_ps(dw[i], dy), acc[i][j]);
        acc[i][j] = _mm512_fmadd_ps(mw[i], sy, acc[i][j]);
      }
    }
  }
  const bool odd = blocks % 2 != 0;
  for (int i = 0; i < RB; ++i) {
    for (int j = 0; j < TB; ++j) {
      float sum = _mm512_reduce_add_ps(acc[i][j]);
      if (odd) sum += row_dot_scalar<F>(rows[i], in, t0 + j, blocks - 1);
      out[(t0 + j) * stride + r0 + i] = sum;
    }
  }
}

template <WeightFormat F, int RB>
LZ_AVX512 void expand_rows(const uint8_t* const* rows, int pairs, ExpandedPair* expanded) {
  constexpr BlockLayout L = layout_of(F);
  for (int i = 0; i < RB; ++i) {
    for (int p = 0; p < pairs; ++p) {
      const uint8_t* blk = rows[i] + std::size_t(2 * p) * L.bytes;
      ExpandedPair& e = expanded[std::size_t(i) * pairs + p];
      __m512 dw, mw;
      scales_pair<F>(blk, dw, mw);
      _mm512_storeu_si512(e.u, expand_pair<F>(blk));
      _mm512_storeu_ps(e.dw, dw);
      _mm512_storeu_ps(e.mw, mw);
    }
  }
}

constexpr int kTokenTile = 4;

// Prompts: sixteen weight rows per 512-bit register, one 32-bit lane per row. A block's codes
// are laid out as eight registers, register c holding elements 4c..4c+3 of every row, so eight
// vpdpbusd against the token's four bytes broadcast give each lane its row's whole block dot.
// The scaling then costs four vector operations for sixteen rows (the pair kernel above spends
// them on every row's partial sums), and a tile of tokens stores sixteen outputs at once.
constexpr int kWideRows = 16;
static_assert(kTokenTile == 4 && kWideRows == 16, "matmul_row_unit (below) splits prompts at these");

struct WideBlock {
  uint8_t u[8][64];  // u[c][4 r + i] = element 4c + i of row r
  float dw[kWideRows];
  float mw[kWideRows];
};

template <WeightFormat F>
LZ_AVX512 void expand_wide(const uint8_t* const* rows, int blocks, WideBlock* wide) {
  alignas(64) uint8_t codes[64];
  alignas(64) float dws[16], mws[16];
  for (int r = 0; r < kWideRows; ++r) {
    for (int b = 0; b < blocks; b += 2) {
      const uint8_t* blk = rows[r] + std::size_t(b) * layout_of(F).bytes;
      _mm512_store_si512(codes, expand_pair<F>(blk));
      __m512 dw, mw;
      scales_pair<F>(blk, dw, mw);
      _mm512_store_ps(dws, dw);
      _mm512_store_ps(mws, mw);
      for (int h = 0; h < 2; ++h) {
        WideBlock& w = wide[b + h];
        for (int c = 0; c < 8; ++c) std::memcpy(&w.u[c][4 * r], codes + 32 * h + 4 * c, 4);
        w.dw[r] = dws[8 * h];
        w.mw[r] = mws[8 * h];
      }
    }
  }
}

template <int TB>
LZ_AVX512 void wide_tile(const WideBlock* wide, const MatmulInput& in, int t0, int r0, float* out, int64_t stride) {
  const int blocks = in.k / kQK;
  __m512 acc[TB];
  for (int j = 0; j < TB; ++j) acc[j] = _mm512_setzero_ps();
  for (int b = 0; b < blocks; ++b) {
    const WideBlock& w = wide[b];
    __m512i u[8];
    for (int c = 0; c < 8; ++c) u[c] = _mm512_loadu_si512(w.u[c]);
    const __m512 dw = _mm512_loadu_ps(w.dw), mw = _mm512_loadu_ps(w.mw);
    for (int j = 0; j < TB; ++j) {
      const std::size_t t = std::size_t(t0 + j);
      const int8_t* y = in.q.data() + t * in.k + std::size_t(b) * kQK;
      __m512i s0 = _mm512_setzero_si512(), s1 = _mm512_setzero_si512();
      for (int c = 0; c < 8; c += 2) {
        s0 = _mm512_dpbusd_epi32(s0, u[c], _mm512_set1_epi32(int(load_u32(reinterpret_cast<const uint8_t*>(y + 4 * c)))));
        s1 = _mm512_dpbusd_epi32(s1, u[c + 1], _mm512_set1_epi32(int(load_u32(reinterpret_cast<const uint8_t*>(y + 4 * c + 4)))));
      }
      const float dy = in.scale[t * blocks + b], sy = 8.0f * in.sum_eighth[t * blocks + b];
      acc[j] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_add_epi32(s0, s1)), _mm512_mul_ps(dw, _mm512_set1_ps(dy)), acc[j]);
      acc[j] = _mm512_fmadd_ps(mw, _mm512_set1_ps(sy), acc[j]);
    }
  }
  for (int j = 0; j < TB; ++j) _mm512_storeu_ps(out + (t0 + j) * stride + r0, acc[j]);
}

template <WeightFormat F>
LZ_AVX512 void matmul_q8_avx512(const PackedMatrix& w, const MatmulInput& in, int r0, int r1,
                                float* out, int64_t stride) {
  constexpr int RB = kMatmulRowTile;
  const int pairs = (in.k / kQK) / 2;
  // Expanded row tiles for many tokens: 64-byte aligned per thread, grown once.
  thread_local std::vector<ExpandedPair> buffer;
  const bool expand = in.n >= kTokenTile;
  if (expand && buffer.size() < std::size_t(RB) * pairs) buffer.resize(std::size_t(RB) * pairs);
  int r = r0;
  const int blocks = in.k / kQK;
  if (expand && blocks % 2 == 0) {
    thread_local std::vector<WideBlock> wide;
    if (wide.size() < std::size_t(blocks)) wide.resize(std::size_t(blocks));
    for (; r + kWideRows <= r1; r += kWideRows) {
      const uint8_t* rows[kWideRows];
      for (int i = 0; i < kWideRows; ++i) rows[i] = w.row(r + i);
      expand_wide<F>(rows, blocks, wide.data());
      int t = 0;
      for (; t + kTokenTile <= in.n; t += kTokenTile) wide_tile<kTokenTile>(wide.data(), in, t, r, out, stride);
      for (; t < in.n; ++t) wide_tile<1>(wide.data(), in, t, r, out, stride);
    }
  }
  for (; r + RB <= r1; r += RB) {
    const uint8_t* rows[RB];
    for (int i = 0; i < RB; ++i) rows[i] = w.row(r + i);
    const ExpandedPair* e = nullptr;
    if (expand) {
      expand_rows<F, RB>(rows, pairs, buffer.data());
      e = buffer.data();
    }
    int t = 0;
    if constexpr (F == WeightFormat::Q4_0 || F == WeightFormat::Q4_1) {
      if (!expand) {
        for (; t < in.n; ++t) gemv4_avx512<F>(rows[0], w.row_bytes, in, t, out + t * stride + r);
        continue;
      }
    }
    for (; t + kTokenTile <= in.n; t += kTokenTile) tile_avx512<F, RB, kTokenTile>(e, pairs, rows, in, t, r, out, stride);
    for (; t < in.n; ++t) tile_avx512<F, RB, 1>(e, pairs, rows, in, t, r, out, stride);
  }
  for (; r < r1; ++r) {
    const uint8_t* rows[1] = {w.row(r)};
    for (int t = 0; t < in.n; ++t) tile_avx512<F, 1, 1>(nullptr, pairs, rows, in, t, r, out, stride);
  }
}

LZ_AVX512 float dot_f32_avx512(const float* a, const float* b, int n) {
  __m512 acc0 = _mm512_setzero_ps(), acc1 = _mm512_setzero_ps();
  int i = 0;
  for (; i + 32 <= n; i += 32) {
    acc0 = _mm512_fmadd_ps(_mm512_loadu_ps(a + i), _mm512_loadu_ps(b + i), acc0);
    acc1 = _mm512_fmadd_ps(_mm512_loadu_ps(a + i + 16), _mm512_loadu_ps(b + i + 16), acc1);
  }
  if (i + 16 <= n) {
    acc0 = _mm512_fmadd_ps(_mm512_loadu_ps(a + i), _mm512_loadu_ps(b + i), acc0);
    i += 16;
  }
  float s = _mm512_reduce_add_ps(_mm512_add_ps(acc0, acc1));
  for (; i < n; ++i) s += a[i] * b[i];
  return s;
}

// One block of 32 activations to int8, the scalar code's rounding (nearest, ties to even, as
// nearbyint in the default mode), so both give the same codes and scales.
LZ_AVX512 void quantize_block_avx512(const float* x, int8_t* q, float* scale, float* sum_eighth) {
  const __m512 a = _mm512_loadu_ps(x), b = _mm512_loadu_ps(x + 16);
  const float amax = _mm512_reduce_max_ps(_mm512_max_ps(_mm512_abs_ps(a), _mm512_abs_ps(b)));
  const float d = amax / 127.0f;
  const float id = d > 0.0f ? 1.0f / d : 0.0f;
  const __m512i qa = _mm512_cvtps_epi32(_mm512_mul_ps(a, _mm512_set1_ps(id)));
  const __m512i qb = _mm512_cvtps_epi32(_mm512_mul_ps(b, _mm512_set1_ps(id)));
  _mm_storeu_si128(reinterpret_cast<__m128i*>(q), _mm512_cvtepi32_epi8(qa));
  _mm_storeu_si128(reinterpret_cast<__m128i*>(q + 16), _mm512_cvtepi32_epi8(qb));
  *scale = d;
  *sum_eighth = d * float(_mm512_reduce_add_epi32(_mm512_add_epi32(qa, qb))) / 8.0f;
}

#endif  // LAZYSCOPE_X86

float dot_f32(const float* a, const float* b, int n, Isa isa) {
#ifdef LAZYSCOPE_X86
  if (isa == Isa::Avx512) return dot_f32_avx512(a, b, n);
  if (isa == Isa::Avx2) return dot_f32_avx2(a, b, n);
#endif
  return dot_f32_scalar(a, b, n);
}

// K-quants and plain types: one row dequantized into a per-thread buffer, fp32 dots.
void matmul_dequantized(const PackedMatrix& w, const MatmulInput& in, int r0, int r1, float* out,
                        int64_t stride, Isa isa) {
  thread_local std::vector<float> row;
  if (row.size() < std::size_t(in.k)) row.resize(std::size_t(in.k));
  for (int r = r0; r < r1; ++r) {
    const float* values = reinterpret_cast<const float*>(w.row(r));
    if (w.format != WeightFormat::F32) {
      dequantize_weight_row(w.format, w.row(r), row.data(), in.k);
      values = row.data();
    }
    for (int t = 0; t < in.n; ++t) out[t * stride + r] = dot_f32(values, in.x + std::size_t(t) * in.k, in.k, isa);
  }
}

template <WeightFormat F>
void matmul_q8(const PackedMatrix& w, const MatmulInput& in, int r0, int r1, float* out,
               int64_t stride, Isa isa) {
#ifdef LAZYSCOPE_X86
  if (isa == Isa::Avx512) return matmul_q8_avx512<F>(w, in, r0, r1, out, stride);
  if (isa == Isa::Avx2) return matmul_q8_avx2<F>(w, in, r0, r1, out, stride);
#endif
  matmul_q8_scalar<F>(w, in, r0, r1, out, stride);
}

uint16_t float_to_half(float f) {
#if defined(__x86_64__) && defined(__F16C__)
  return _cvtss_sh(f, 0);
#else
  // Round to nearest even through the float bits (normal range; tiny values flush to zero).
  uint32_t x;
  std::memcpy(&x, &f, 4);
  const uint32_t sign = (x >> 16) & 0x8000u;
  int32_t exponent = int32_t((x >> 23) & 0xFF) - 127 + 15;
  uint32_t mantissa = x & 0x7FFFFFu;
  if (exponent <= 0) return uint16_t(sign);
  if (exponent >= 31) return uint16_t(sign | 0x7C00u);
  uint32_t half = (uint32_t(exponent) << 10) | (mantissa >> 13);
  const uint32_t rest = mantissa & 0x1FFFu;
  if (rest > 0x1000u || (rest == 0x1000u && (half & 1u))) ++half;
  return uint16_t(sign | half);
#endif
}

void put_half(uint8_t* p, float f) {
  const uint16_t h = float_to_half(f);
  std::memcpy(p, &h, 2);
}

}  // namespace

bool uses_q8_activations(WeightFormat f) {
  return f == WeightFormat::Q4_0 || f == WeightFormat::Q4_1 || f == WeightFormat::Q5_0 ||
         f == WeightFormat::Q5_1 || f == WeightFormat::Q8_0;
}

void reset_input(MatmulInput& in, const float* x, int n, int k) {
  in.x = x;
  in.n = n;
  in.k = k;
  in.quantized = false;
  if (k % kQK != 0) return;
  const std::size_t values = std::size_t(n) * k, blocks = values / kQK;
  if (in.q.size() < values) in.q.resize(values);
  if (in.scale.size() < blocks) in.scale.resize(blocks);
  if (in.sum_eighth.size() < blocks) in.sum_eighth.resize(blocks);
}

void quantize_input_rows(MatmulInput& in, int row_begin, int row_end) {
  if (in.k % kQK != 0) return;
  const int blocks = in.k / kQK;
#if defined(LAZYSCOPE_X86)
  if (active_isa() == Isa::Avx512) {
    for (int t = row_begin; t < row_end; ++t) {
      for (int b = 0; b < blocks; ++b) {
        const std::size_t at = std::size_t(t) * in.k + std::size_t(b) * kQK, block = std::size_t(t) * blocks + b;
        quantize_block_avx512(in.x + at, in.q.data() + at, &in.scale[block], &in.sum_eighth[block]);
      }
    }
    return;
  }
#endif
  for (int t = row_begin; t < row_end; ++t) {
    for (int b = 0; b < blocks; ++b) {
      const float* x = in.x + std::size_t(t) * in.k + b * kQK;
      int8_t* q = in.q.data() + std::size_t(t) * in.k + b * kQK;
      float amax = 0.0f;
      for (int j = 0; j < kQK; ++j) amax = std::max(amax, std::fabs(x[j]));
      const float d = amax / 127.0f;
      const float id = d > 0.0f ? 1.0f / d : 0.0f;
      int sum = 0;
      for (int j = 0; j < kQK; ++j) {
        const int v = int(std::nearbyint(x[j] * id));
        q[j] = int8_t(v);
        sum += v;
      }
      in.scale[std::size_t(t) * blocks + b] = d;
      in.sum_eighth[std::size_t(t) * blocks + b] = d * float(sum) / 8.0f;
    }
  }
}

// The AVX-512 prompt kernel's kTokenTile (4) and kWideRows (16); 16 is a multiple of every
// kernel's row tile, so the unit is the same on every processor.
int matmul_row_unit(const MatmulInput& in) { return in.n >= 4 ? 16 : kMatmulRowTile; }

void matmul_rows(const PackedMatrix& w, const MatmulInput& in, int r0, int r1, float* out,
                 int64_t stride, Isa isa) {
  if (w.cols != in.k) {
    throw Error("matmul: weight matrix has " + std::to_string(w.cols) + " columns, input has " + std::to_string(in.k));
  }
  if (r0 >= r1) return;
  switch (w.format) {
    case WeightFormat::Q4_0:
      return matmul_q8<WeightFormat::Q4_0>(w, in, r0, r1, out, stride, isa);
    case WeightFormat::Q4_1:
      return matmul_q8<WeightFormat::Q4_1>(w, in, r0, r1, out, stride, isa);
    case WeightFormat::Q5_0:
      return matmul_q8<WeightFormat::Q5_0>(w, in, r0, r1, out, stride, isa);
    case WeightFormat::Q5_1:
      return matmul_q8<WeightFormat::Q5_1>(w, in, r0, r1, out, stride, isa);
    case WeightFormat::Q8_0:
      return matmul_q8<WeightFormat::Q8_0>(w, in, r0, r1, out, stride, isa);
    case WeightFormat::F32:
    case WeightFormat::F16:
    case WeightFormat::BF16:
    case WeightFormat::Q4_K:
    case WeightFormat::Q5_K:
    case WeightFormat::Q6_K:
      return matmul_dequantized(w, in, r0, r1, out, stride, isa);
  }
  throw Error("matmul: unsupported weight format " + std::to_string(uint32_t(w.format)));
}

std::vector<uint8_t> quantize_weight_rows(WeightFormat format, const float* w, int rows, int cols) {
  const WeightFormatInfo* info = weight_format_info(format);
  if (!info || cols % info->block_size != 0) throw Error("quantize_weight_rows: unsupported format or width");
  const bool block32 = uses_q8_activations(format);
  if (!block32 && format != WeightFormat::F32 && format != WeightFormat::F16 && format != WeightFormat::BF16) {
    throw Error(std::string("quantize_weight_rows: no quantizer for ") + info->name);
  }
  const std::size_t row_bytes = std::size_t(cols / info->block_size) * info->block_bytes;
  std::vector<uint8_t> out(row_bytes * rows);
  for (int r = 0; r < rows; ++r) {
    const float* x = w + std::size_t(r) * cols;
    uint8_t* dst = out.data() + row_bytes * r;
    if (format == WeightFormat::F32) {
      std::memcpy(dst, x, sizeof(float) * cols);
      continue;
    }
    if (format == WeightFormat::F16 || format == WeightFormat::BF16) {
      for (int c = 0; c < cols; ++c) {
        uint16_t h;
        if (format == WeightFormat::F16) {
          h = float_to_half(x[c]);
        } else {
          uint32_t bits;
          std::memcpy(&bits, &x[c], 4);
          h = uint16_t((bits + 0x7FFFu + ((bits >> 16) & 1u)) >> 16);
        }
        std::memcpy(dst + 2 * c, &h, 2);
      }
      continue;
    }
    for (int b = 0; b < cols / kQK; ++b, x += kQK, dst += info->block_bytes) {
      float lo = x[0], hi = x[0], amax = 0.0f, signed_max = 0.0f;
      for (int j = 0; j < kQK; ++j) {
        lo = std::min(lo, x[j]);
        hi = std::max(hi, x[j]);
        if (std::fabs(x[j]) > amax) {
          amax = std::fabs(x[j]);
          signed_max = x[j];
        }
      }
      uint8_t codes[kQK];
      float d = 0.0f;
      switch (format) {
        case WeightFormat::Q8_0: {
          d = amax / 127.0f;
          const float id = d ? 1.0f / d : 0.0f;
          put_half(dst, d);
          for (int j = 0; j < kQK; ++j) dst[2 + j] = uint8_t(int8_t(std::nearbyint(x[j] * id)));
          continue;
        }
        case WeightFormat::Q4_0:
        case WeightFormat::Q5_0: {
          const int levels = format == WeightFormat::Q4_0 ? 8 : 16;
          d = signed_max / -float(levels);
          const float id = d ? 1.0f / d : 0.0f;
          for (int j = 0; j < kQK; ++j) {
            codes[j] = uint8_t(std::min(2 * levels - 1, int(x[j] * id + float(levels) + 0.5f)));
          }
          put_half(dst, d);
          break;
        }
        default: {  // Q4_1, Q5_1
          const int top = format == WeightFormat::Q4_1 ? 15 : 31;
          d = (hi - lo) / float(top);
          const float id = d ? 1.0f / d : 0.0f;
          for (int j = 0; j < kQK; ++j) codes[j] = uint8_t(std::min(top, int((x[j] - lo) * id + 0.5f)));
          put_half(dst, d);
          put_half(dst + 2, lo);
          break;
        }
      }
      const BlockLayout L = layout_of(format);
      uint32_t qh = 0;
      for (int j = 0; j < kQK / 2; ++j) {
        dst[L.qs + j] = uint8_t((codes[j] & 0x0F) | ((codes[j + kQK / 2] & 0x0F) << 4));
      }
      for (int j = 0; j < kQK; ++j) qh |= uint32_t((codes[j] >> 4) & 1u) << j;
      if (L.qh >= 0) std::memcpy(dst + L.qh, &qh, 4);
    }
  }
  return out;
}

}  // namespace lazyscope::cpu

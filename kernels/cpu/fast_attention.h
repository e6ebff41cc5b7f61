#pragma once
// The fast CPU mode's paged attention (same semantics as cpu::paged_attention: lazy per-shift
// query rotation, GQA, online softmax) and RoPE-at-write, vectorised, with the rotations read
// from a table of the same fp32 cos/sin values the reference computes.
#include <cstdint>
#include <vector>

#include "kernels/cpu/attention.h"
#include "kernels/cpu/isa.h"
#include "kernels/cpu/thread_pool.h"

namespace lazyscope::cpu {

// cos/sin of float(position) * inv_freq[i], evaluated like rope_rotate, for a range of positions.
class RopeTable {
 public:
  void reset(const float* inv_freq, int head_dim);
  // Makes [lo, hi] available (grows the table; call outside parallel regions).
  void cover(int64_t lo, int64_t hi);
  const float* cos_at(int64_t position) const { return values_.data() + index(position); }
  const float* sin_at(int64_t position) const { return values_.data() + index(position) + half_; }
  // x[head_dim] rotated in place by `position` (which must be covered).
  void rotate(float* x, int64_t position) const;

 private:
  std::size_t index(int64_t position) const { return std::size_t(position - lo_) * 2 * half_; }
  std::vector<float> inv_freq_;
  int half_ = 0;
  int64_t lo_ = 0, hi_ = -1;
  std::vector<float> values_;  // per position: half cos, then half sin
};

// Throws Error on the same malformed tables the reference rejects.
void fast_paged_attention(const PagedAttentionParams& p, const RopeTable& rope, ThreadPool& pool, Isa isa);
// The positions fast_paged_attention will rotate queries by (for RopeTable::cover).
void attention_rotation_range(const PagedAttentionParams& p, int64_t* lo, int64_t* hi);

void fast_kv_write(const KvWriteParams& p, const RopeTable& rope);

}  // namespace lazyscope::cpu

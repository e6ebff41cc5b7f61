#include "kernels/cpu/attention.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <thread>
#include <vector>

#include "base/error.h"
#include "kernels/rope.h"

namespace lazyscope::cpu {
namespace {

int64_t pool_offset(int block, int head, int slot, int num_kv_heads, int block_size, int head_dim) {
  return ((int64_t(block) * num_kv_heads + head) * block_size + slot) * head_dim;
}

// One (query token, head) pair: online softmax over every visible key.
void attend_one(const PagedAttentionParams& p, int token, int head, int visible_keys,
                std::vector<float>& qrot, std::vector<float>& acc) {
  const int D = p.head_dim;
  const int kv_head = head / (p.num_heads / p.num_kv_heads);
  const float* q_raw = p.q + (int64_t(token) * p.num_heads + head) * D;
  const int64_t m = p.q_positions[token];
  const float scale = 1.0f / std::sqrt(float(D));
  float running_max = -INFINITY;
  double denom = 0.0;
  std::fill(acc.begin(), acc.end(), 0.0f);
  std::vector<double> acc_d(D, 0.0);
  int seen = 0;
  int current_shift = 0;
  bool rotated = false;
  for (int b = 0; b < p.table_len && seen < visible_keys; ++b) {
    const BlockRef& ref = p.table[b];
    if (!rotated || ref.shift != current_shift) {
      // A new run of blocks with one shift: rotate the raw query once by (m − δ).
      current_shift = ref.shift;
      std::copy(q_raw, q_raw + D, qrot.begin());
      rope_rotate(qrot.data(), D, p.inv_freq, m - current_shift);
      rotated = true;
    }
    const int take = std::min(ref.valid, visible_keys - seen);
    for (int s = 0; s < take; ++s) {
      const float* k = p.k_pool + pool_offset(ref.block, kv_head, s, p.num_kv_heads, p.block_size, D);
      const float* v = p.v_pool + pool_offset(ref.block, kv_head, s, p.num_kv_heads, p.block_size, D);
      float score = 0.0f;
      for (int d = 0; d < D; ++d) score += qrot[d] * k[d];
      score *= scale;
      if (score > running_max) {
        double correction = std::exp(double(running_max) - double(score));
        denom *= correction;
        for (int d = 0; d < D; ++d) acc_d[d] *= correction;
        running_max = score;
      }
      double w = std::exp(double(score) - double(running_max));
      denom += w;
      for (int d = 0; d < D; ++d) acc_d[d] += w * double(v[d]);
    }
    seen += take;
  }
  float* out = p.out + (int64_t(token) * p.num_heads + head) * D;
  for (int d = 0; d < D; ++d) out[d] = float(acc_d[d] / denom);
}

}  // namespace

void paged_attention(const PagedAttentionParams& p, int threads) {
  if (p.num_kv_heads <= 0 || p.num_heads % p.num_kv_heads != 0) {
    throw Error("paged_attention: num_heads must be a multiple of num_kv_heads");
  }
  int total = 0;
  for (int b = 0; b < p.table_len; ++b) {
    const BlockRef& ref = p.table[b];
    if (ref.valid < 1 || ref.valid > p.block_size) {
      throw Error("paged_attention: block " + std::to_string(ref.block) + " has " +
                  std::to_string(ref.valid) + " valid slots");
    }
    if (!p.lazy && ref.shift != 0) {
      throw Error("paged_attention: shifted block " + std::to_string(ref.block) +
                  " in a plain (non-lazy) attention call");
    }
    total += ref.valid;
  }
  if (p.n > total) throw Error("paged_attention: more queries than table entries");
  const int prior = total - p.n;
  const int work = p.n * p.num_heads;
  threads = std::max(1, std::min(threads, work));
  auto run = [&](int begin, int end) {
    std::vector<float> qrot(p.head_dim), acc(p.head_dim);
    for (int w = begin; w < end; ++w) {
      int token = w / p.num_heads, head = w % p.num_heads;
      attend_one(p, token, head, prior + token + 1, qrot, acc);
    }
  };
  if (threads == 1 || work < 64) {
    run(0, work);
    return;
  }
  std::vector<std::jthread> pool;
  int chunk = (work + threads - 1) / threads;
  for (int t = 0; t < threads; ++t) {
    int begin = t * chunk, end = std::min(work, begin + chunk);
    if (begin < end) pool.emplace_back(run, begin, end);
  }
}

void kv_write(const KvWriteParams& p) {
  const int D = p.head_dim;
  for (int i = 0; i < p.n; ++i) {
    const int block = p.slots[i] / p.block_size, slot = p.slots[i] % p.block_size;
    for (int h = 0; h < p.num_kv_heads; ++h) {
      const float* k = p.k + (int64_t(i) * p.num_kv_heads + h) * D;
      const float* v = p.v + (int64_t(i) * p.num_kv_heads + h) * D;
      float* kd = p.k_pool + pool_offset(block, h, slot, p.num_kv_heads, p.block_size, D);
      float* vd = p.v_pool + pool_offset(block, h, slot, p.num_kv_heads, p.block_size, D);
      std::copy(k, k + D, kd);
      rope_rotate(kd, D, p.inv_freq, p.positions[i]);
      std::copy(v, v + D, vd);
    }
  }
}

void materialize(const BlockCopy& c, int num_kv_heads, int head_dim, int block_size,
                 const float* inv_freq, float* k_pool, float* v_pool) {
  for (int h = 0; h < num_kv_heads; ++h) {
    for (int s = 0; s < c.valid; ++s) {
      const int64_t src = pool_offset(c.src, h, s, num_kv_heads, block_size, head_dim);
      const int64_t dst = pool_offset(c.dst, h, s, num_kv_heads, block_size, head_dim);
      std::copy(k_pool + src, k_pool + src + head_dim, k_pool + dst);
      rope_rotate(k_pool + dst, head_dim, inv_freq, c.shift);
      std::copy(v_pool + src, v_pool + src + head_dim, v_pool + dst);
    }
  }
}

}  // namespace lazyscope::cpu

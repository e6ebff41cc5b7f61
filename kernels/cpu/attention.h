#pragma once
// CPU reference for the paged (lazy) attention kernels, the KV write with RoPE, and the
// materialize copy. Pool layout per layer: [num_blocks][num_kv_heads][block_size][head_dim].
#include <cstdint>

#include "kernels/backend.h"

namespace lazyscope::cpu {

struct PagedAttentionParams {
  const float* q = nullptr;             // [n, num_heads, head_dim], raw (not yet rotated)
  const int32_t* q_positions = nullptr; // [n]
  const float* k_pool = nullptr;        // keys rotated at their encoding positions
  const float* v_pool = nullptr;
  const BlockRef* table = nullptr;      // blocks attended, in sequence order
  int table_len = 0;
  int n = 0;                            // new tokens: the last n valid entries of the table
  int num_heads = 0;
  int num_kv_heads = 0;
  int head_dim = 0;
  int block_size = 0;
  const float* inv_freq = nullptr;      // [head_dim / 2]
  bool lazy = false;                    // honour block shifts (else every shift must be 0)
  float* out = nullptr;                 // [n, num_heads, head_dim]
};

// For every run of blocks with the same shift δ, the query is rotated once by (m − δ) and
// dotted with the stored keys; exact because R(a)·R(b) = R(a+b). Throws Error on a non-zero
// shift when !lazy.
void paged_attention(const PagedAttentionParams& p, int threads = 1);

struct KvWriteParams {
  const float* k = nullptr;             // [n, num_kv_heads, head_dim], raw projections
  const float* v = nullptr;
  const int32_t* positions = nullptr;   // rotation position per token
  const int32_t* slots = nullptr;       // block * block_size + offset
  int n = 0;
  int num_kv_heads = 0;
  int head_dim = 0;
  int block_size = 0;
  const float* inv_freq = nullptr;
  float* k_pool = nullptr;
  float* v_pool = nullptr;
};

// Rotates keys to their positions and stores K/V into the pool (RoPE-at-write).
void kv_write(const KvWriteParams& p);

// Copies `valid` slots of block src into dst for every kv head, keys rotated by `shift`.
void materialize(const BlockCopy& copy, int num_kv_heads, int head_dim, int block_size,
                 const float* inv_freq, float* k_pool, float* v_pool);

}  // namespace lazyscope::cpu

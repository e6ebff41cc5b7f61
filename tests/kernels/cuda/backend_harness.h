#pragma once
// Shared fixture pieces for the GPU backend tests: small model shapes, bf16-representable random
// weights, random prompts, and the block-table bookkeeping of prefill and decode steps.
#include <algorithm>
#include <cmath>
#include <functional>
#include <random>
#include <vector>

#include "kernels/backend.h"
#include "kernels/cuda/cuda_backend.h"
#include "kernels/random_weights.h"

namespace lazyscope::cuda::test {

// 2 layers, hidden 256: quick on the CPU reference, any head size and GQA ratio.
inline ModelShape tiny_shape(int head_dim, int num_heads = 8, int num_kv_heads = 2) {
  ModelShape s;
  s.vocab_size = 320;
  s.hidden_size = 256;
  s.intermediate_size = 512;
  s.num_layers = 2;
  s.num_heads = num_heads;
  s.num_kv_heads = num_kv_heads;
  s.head_dim = head_dim;
  s.rope.theta = 500000.0f;
  s.rope.llama3 = true;
  return s;
}

// SmolLM2-135M's attention and width (9 query / 3 KV heads: GQA 3, head_dim 64, hidden 576,
// vocab 49152, tied embeddings), with 4 of its 30 layers to keep the CPU reference quick.
inline ModelShape smollm2_like_shape() {
  ModelShape s;
  s.vocab_size = 49152;
  s.hidden_size = 576;
  s.intermediate_size = 1536;
  s.num_layers = 4;
  s.num_heads = 9;
  s.num_kv_heads = 3;
  s.head_dim = 64;
  s.rms_norm_eps = 1e-5f;
  s.rope.theta = 100000.0f;
  s.tie_word_embeddings = true;
  return s;
}

// Host fp32 weights (bf16-representable, so both backends use the same numbers);
// ~1.3 / sqrt(hidden) keeps activations at scale through the layers at any width.
inline HostWeights random_weights(const ModelShape& s, uint64_t seed) {
  return random_host_weights(s, seed, {1.3f / std::sqrt(float(s.hidden_size)), true});
}

inline std::vector<int32_t> random_tokens(int n, int vocab, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<int32_t> out(n);
  for (int32_t& t : out) t = int32_t(rng() % uint32_t(vocab));
  return out;
}

inline int32_t host_argmax(const std::vector<float>& logits) {
  return int32_t(std::max_element(logits.begin(), logits.end()) - logits.begin());
}

// Top-1 minus top-2 logit: how near a tie the greedy choice was.
inline float top2_gap(std::vector<float> logits) {
  std::partial_sort(logits.begin(), logits.begin() + 2, logits.end(), std::greater<float>());
  return logits[0] - logits[1];
}

// The default launch choices with one change, e.g. tuned([](CudaTuning& t) { t.graphs = false; }).
template <typename Change>
CudaTuning tuned(Change change) {
  CudaTuning tuning;
  change(tuning);
  return tuning;
}

// Blocks a prefilled segment occupies.
struct Segment {
  std::vector<BlockRef> blocks;
};

// Prefills `tokens` at positions start.. into fresh blocks beginning at `first_block`, after `prefix`.
inline Segment prefill(Backend& backend, const std::vector<int32_t>& tokens, int start, int first_block,
                       int block_size, const std::vector<BlockRef>& prefix, bool lazy, std::vector<float>* logits) {
  const int n = int(tokens.size());
  Segment seg;
  std::vector<int32_t> positions(n), slots(n);
  for (int i = 0; i < n; ++i) {
    positions[i] = start + i;
    slots[i] = first_block * block_size + i;
  }
  for (int b = 0; b * block_size < n; ++b) {
    seg.blocks.push_back(BlockRef{first_block + b, 0, std::min(block_size, n - b * block_size)});
  }
  std::vector<BlockRef> table = prefix;
  table.insert(table.end(), seg.blocks.begin(), seg.blocks.end());
  ForwardStep step;
  step.tokens = tokens;
  step.positions = positions;
  step.slots = slots;
  step.table = table;
  step.lazy_rotation = lazy;
  step.want_logits = logits != nullptr;
  backend.forward(step, logits);
  return seg;
}

// One sequence being decoded: its table (cached prefix, then its own blocks from `first_block`,
// filled contiguously) and where its next token goes. step() spans point into this object.
struct DecodingSequence {
  std::vector<BlockRef> table;
  int first_block = 0;  // its own blocks: first_block, first_block + 1, ...
  int own_tokens = 0;   // tokens already in its own blocks
  int next_position = 0;
  int32_t next_token = 0;
  bool lazy = false;
  int block_size = 16;
  std::vector<int32_t> token, position, slot;

  // The next one-token step; appends its slot to the table.
  ForwardStep step() {
    if (own_tokens % block_size == 0) table.push_back(BlockRef{first_block + own_tokens / block_size, 0, 0});
    table.back().valid += 1;
    token.assign(1, next_token);
    position.assign(1, next_position);
    slot.assign(1, (first_block + own_tokens / block_size) * block_size + own_tokens % block_size);
    ForwardStep s;
    s.tokens = token;
    s.positions = position;
    s.slots = slot;
    s.table = table;
    s.lazy_rotation = lazy;
    return s;
  }
  // After the step ran: the token it chose comes next.
  void advance(int32_t chosen) {
    ++own_tokens;
    ++next_position;
    next_token = chosen;
  }
};

// One decode step of the sequence in `table` (blocks hold it contiguously from block 0).
inline ForwardStep next_step(std::vector<BlockRef>& table, int length, int block_size, int32_t token, bool lazy,
                             std::vector<int32_t>& tokens, std::vector<int32_t>& positions,
                             std::vector<int32_t>& slots) {
  if (length % block_size == 0) table.push_back(BlockRef{length / block_size, 0, 0});
  table.back().valid += 1;
  tokens.assign(1, token);
  positions.assign(1, length);
  slots.assign(1, length);
  ForwardStep step;
  step.tokens = tokens;
  step.positions = positions;
  step.slots = slots;
  step.table = table;
  step.lazy_rotation = lazy;
  return step;
}

}  // namespace lazyscope::cuda::test

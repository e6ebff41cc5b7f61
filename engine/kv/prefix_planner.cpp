// Full attention: the prompt is one causal sequence at positions 0..N-1. Under the prefix
// policy its full blocks are cached under vLLM-style chained hashes, so a block is a hit only
// when every block before it hits too (same tokens at the same prefix); none caches nothing.
#include <algorithm>

#include "engine/kv/plan_builder.h"

namespace lazyscope {

void plan_full_attention(PlanBuilder& builder) {
  const PromptLayout& layout = builder.layout();
  RequestPlan& plan = builder.plan();
  const int B = builder.block_size();
  std::vector<int32_t> tokens = layout.prefix;
  std::vector<std::pair<int, int>> doc_spans;  // [begin, end) of each document
  for (const auto& d : layout.documents) {
    doc_spans.push_back({int(tokens.size()), int(tokens.size() + d.size())});
    tokens.insert(tokens.end(), d.begin(), d.end());
  }
  tokens.insert(tokens.end(), layout.query.begin(), layout.query.end());
  const int N = int(tokens.size());
  auto block_tokens = [&](int b) {
    return std::vector<int32_t>(tokens.begin() + b * B, tokens.begin() + (b + 1) * B);
  };

  int hit_blocks = 0;
  int first_in_flight = -1;  // the first hit block another running request is still encoding
  std::vector<uint64_t> chain;
  uint64_t h = hash_string(0, builder.model_identity() + "|full");
  for (int b = 0; b + 1 <= N / B; ++b) {
    h = hash_tokens(h, block_tokens(b));
    chain.push_back(h);
  }
  const bool caching = plan.policy == Policy::Prefix;
  if (caching) {
    for (std::size_t b = 0; b < chain.size(); ++b) {
      if (!builder.find_shared(chain[b], block_tokens(int(b)))) break;
      hit_blocks = int(b) + 1;
    }
    if (hit_blocks * B >= N) --hit_blocks;  // at least one token must run to produce logits
    for (int b = 0; b < hit_blocks; ++b) {
      CachedSegment* s = builder.find_shared(chain[std::size_t(b)], block_tokens(b));
      if (!s->published && first_in_flight < 0) first_in_flight = b;
      builder.acquire(*s, true);
      PlanBuilder::fill(s->blocks, B, B, 0, nullptr, &plan.table);
    }
  }
  const int cached = hit_blocks * B;
  plan.stats.cached_tokens = cached;
  plan.prompt.lazy = false;
  plan.prompt.tokens.assign(tokens.begin() + cached, tokens.end());
  plan.prompt.positions = iota_positions(cached, N - cached);
  // New full blocks become cacheable segments (prefix policy); the tail is private.
  const int full_blocks = N / B;
  for (int b = hit_blocks; b < full_blocks && caching; ++b) {
    CachedSegment& s = builder.new_segment(
        SegmentKind::Prefix, "tokens " + std::to_string(b * B) + "-" + std::to_string((b + 1) * B - 1),
        chain[std::size_t(b)]);
    s.tokens = block_tokens(b);
    s.encode_position = b * B;
    const int64_t id = s.id;
    builder.acquire(s, false);
    plan.pending.push_back(id);
    std::vector<int32_t> blk = builder.allocate(1, id);
    builder.share_in_flight(id);
    builder.block(blk[0]).valid = B;
    PlanBuilder::fill(blk, B, B, 0, &plan.prompt.slots, &plan.table);
  }
  const int tail_start = caching ? std::max(cached, full_blocks * B) : cached;
  CachedSegment& tail = builder.new_segment(SegmentKind::Query, "sequence", 0);
  tail.tokens.assign(tokens.begin() + tail_start, tokens.end());
  tail.encode_position = tail_start;
  const int64_t tid = tail.id;
  builder.acquire(tail, false);
  plan.ephemeral.push_back(tid);
  plan.tail_segment = tid;
  plan.prompt.segment = tid;
  const int tail_tokens = N - tail_start;
  if (tail_tokens > 0) {
    std::vector<int32_t> blk = builder.allocate(blocks_for(tail_tokens, B), tid);
    int remaining = tail_tokens;
    for (int32_t b : blk) {
      builder.block(b).valid = std::min(B, remaining);
      remaining -= B;
    }
    PlanBuilder::fill(blk, tail_tokens, B, 0, &plan.prompt.slots, &plan.table);
  }
  plan.prompt.table = plan.table;
  plan.next_position = N;

  const int prefix_len = int(layout.prefix.size());
  const int in_flight_from = first_in_flight < 0 ? N + 1 : first_in_flight * B;  // token where in-flight KV starts
  plan.placements.push_back({-1, SegmentKind::Prefix, "prefix", 0, prefix_len, 0, prefix_len <= cached, false,
                             prefix_len <= cached && prefix_len > in_flight_from, -1, {}});
  for (std::size_t k = 0; k < doc_spans.size(); ++k) {
    const auto [begin, end] = doc_spans[k];
    const bool hit = end <= cached;
    plan.stats.documents += 1;
    if (hit) plan.stats.document_hits += 1;
    const std::string label =
        k < layout.document_labels.size() ? layout.document_labels[k] : "document " + std::to_string(k);
    plan.placements.push_back(
        {-1, SegmentKind::Document, label, begin, end - begin, 0, hit, false, hit && end > in_flight_from, -1, {}});
  }
  plan.placements.push_back({tid, SegmentKind::Query, "query", N - int(layout.query.size()), int(layout.query.size()),
                             0, false, false, false, -1, {}});
}

}  // namespace lazyscope

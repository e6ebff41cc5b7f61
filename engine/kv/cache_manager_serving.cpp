// KvCacheManager's additions for the serving scheduler:
// - estimate_admission: the blocks plan() would allocate for a layout, counted without
//   allocating, evicting or touching the LRU clock, so a refused request costs the cache nothing;
//   plan() spares the cached segments this count says it hits, so the two agree;
// - publish_encoded: a segment becomes findable as soon as its KV is complete, not only when its
//   request ends (concurrent requests share it, as a serving engine's prefix cache does); before
//   that it is shared in flight (complete() says when a sharer may read it);
// - usage: blocks referenced, cached and free, from counts kept as segments change (O(1)).
#include <algorithm>
#include <unordered_set>

#include "base/error.h"
#include "engine/kv/cache_manager.h"

namespace lazyscope {
namespace {

int blocks_for(int tokens, int block_size) { return (tokens + block_size - 1) / block_size; }

}  // namespace

AdmissionEstimate KvCacheManager::estimate_admission(const PromptLayout& layout, Mode mode, Policy policy) const {
  check_mode_policy(mode, policy);
  std::lock_guard lock(mutex_);
  return count_admission(layout, mode, policy, nullptr);
}

AdmissionEstimate KvCacheManager::count_admission(const PromptLayout& layout, Mode mode, Policy policy,
                                                  std::vector<int64_t>* hits_out) const {
  const int B = pool_.block_size();
  std::unordered_set<int64_t> used;  // cached segments this request would hit (not evictable for it)
  // Published or in flight, as plan()'s lookups.
  auto published = [&](uint64_t key, const std::vector<int32_t>& tokens) -> int64_t {
    const CachedSegment* s = find_shared(key, tokens);
    return s ? s->id : -1;
  };
  AdmissionEstimate e;
  if (mode == Mode::Full) {
    std::vector<int32_t> tokens = layout.prefix;
    for (const auto& d : layout.documents) tokens.insert(tokens.end(), d.begin(), d.end());
    tokens.insert(tokens.end(), layout.query.begin(), layout.query.end());
    const int N = int(tokens.size());
    const int full_blocks = N / B;
    int hit_blocks = 0;
    if (policy == Policy::Prefix) {
      uint64_t h = hash_string(0, identity_ + "|full");
      std::vector<int64_t> hits;
      for (int b = 0; b < full_blocks; ++b) {
        std::vector<int32_t> block_tokens(tokens.begin() + b * B, tokens.begin() + (b + 1) * B);
        h = hash_tokens(h, block_tokens);
        const int64_t id = published(h, block_tokens);
        if (id < 0) break;
        hits.push_back(id);
      }
      hit_blocks = int(hits.size());
      if (hit_blocks * B >= N) --hit_blocks;
      for (int b = 0; b < hit_blocks; ++b) used.insert(hits[b]);
    }
    const int cached = hit_blocks * B;
    const int tail_start = policy == Policy::Prefix ? std::max(cached, full_blocks * B) : cached;
    if (policy == Policy::Prefix) e.blocks_needed += full_blocks - hit_blocks;
    e.blocks_needed += blocks_for(N - tail_start, B);
  } else {
    if (layout.query.empty()) throw Error("block mode needs a non-empty query: its last token gives the prompt's logits");
    const int P = int(layout.prefix.size());
    const bool reuse = policy != Policy::None;
    const uint64_t identity_hash = hash_string(0, identity_);
    const uint64_t prefix_key = hash_tokens(hash_string(identity_hash, "prefix"), layout.prefix);
    if (P > 0) {
      const int64_t hit = reuse ? published(prefix_key, layout.prefix) : -1;
      if (hit >= 0) {
        used.insert(hit);
      } else {
        e.blocks_needed += blocks_for(P, B);
      }
    }
    std::unordered_set<uint64_t> here;  // keys encoded or acquired earlier in this request
    int start = P;
    for (const std::vector<int32_t>& doc : layout.documents) {
      const int L = int(doc.size());
      const int shift = start - P;
      if (L == 0) continue;
      const int doc_blocks = blocks_for(L, B);
      const uint64_t doc_key = hash_tokens(prefix_key, doc);
      // As plan()'s base_segment: reused within the request, hit when published, else encoded.
      auto base = [&](bool publish) {
        if (policy != Policy::None && here.count(doc_key)) return;
        if (publish) {
          if (int64_t hit = published(doc_key, doc); hit >= 0) {
            used.insert(hit);
            here.insert(doc_key);
            return;
          }
        }
        e.blocks_needed += doc_blocks;
        here.insert(doc_key);
      };
      switch (policy) {
        case Policy::None:
        case Policy::Lazy:
          base(policy == Policy::Lazy);
          break;
        case Policy::Materialized:
          base(true);
          if (shift != 0) e.blocks_needed += doc_blocks;  // the request's own rotated copy
          break;
        case Policy::Positional: {
          const uint64_t pos_key = hash_tokens(doc_key, {start});
          if (int64_t hit = published(pos_key, doc); hit >= 0) {
            used.insert(hit);
          } else if (here.count(pos_key)) {
          } else if (shift == 0) {
            e.blocks_needed += doc_blocks;
            here.insert(doc_key);
            here.insert(pos_key);
          } else {
            base(false);
            e.blocks_needed += doc_blocks;
            here.insert(pos_key);
          }
          break;
        }
        case Policy::Prefix:
          throw Error("policy 'prefix' cannot plan block attention");
      }
      start += L;
    }
    e.blocks_needed += blocks_for(int(layout.query.size()), B);
  }
  int64_t available = pool_.free_count() + evictable_blocks_;
  for (int64_t id : used) {
    const CachedSegment& s = segments_.at(id);
    if (evictable(s)) available -= int64_t(s.blocks.size());
  }
  e.blocks_available = int(available);
  if (hits_out) hits_out->assign(used.begin(), used.end());
  return e;
}

void KvCacheManager::publish_encoded(RequestPlan& plan, int64_t segment) {
  std::lock_guard lock(mutex_);
  auto pending = std::find(plan.pending.begin(), plan.pending.end(), segment);
  if (pending == plan.pending.end()) return;
  auto it = segments_.find(segment);
  if (it == segments_.end()) return;
  CachedSegment& s = it->second;
  s.complete = true;
  if (index_.count(s.key)) return;  // another request published the same key first: dropped at finish
  publish(s);
  plan.pending.erase(pending);  // still held by the request (plan.held) until it finishes
}

void KvCacheManager::publish_encoded(RequestPlan& plan) {
  std::lock_guard lock(mutex_);
  std::vector<int64_t> kept;  // a key published first by another request: dropped at finish
  for (int64_t id : plan.pending) {
    auto it = segments_.find(id);
    if (it == segments_.end()) continue;
    CachedSegment& s = it->second;
    s.complete = true;
    if (index_.count(s.key)) {
      kept.push_back(id);
    } else {
      publish(s);
    }
  }
  plan.pending = std::move(kept);
}

PoolUsage KvCacheManager::usage() const {
  std::lock_guard lock(mutex_);
  PoolUsage u;
  u.free = pool_.free_count();
  u.cached = int(evictable_blocks_);
  u.in_use = pool_.num_blocks() - u.free - u.cached;
  return u;
}

bool KvCacheManager::complete(int64_t segment) const {
  std::lock_guard lock(mutex_);
  auto it = segments_.find(segment);
  return it != segments_.end() && it->second.complete;
}

bool KvCacheManager::abandoned(int64_t segment) const {
  std::lock_guard lock(mutex_);
  auto it = segments_.find(segment);
  return it == segments_.end() || it->second.abandoned;
}

int64_t KvCacheManager::blocks_evicted() const {
  std::lock_guard lock(mutex_);
  return evicted_total_;
}

}  // namespace lazyscope

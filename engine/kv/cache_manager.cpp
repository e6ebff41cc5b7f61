#include "engine/kv/cache_manager.h"

#include <algorithm>
#include <string>
#include <unordered_set>

#include "base/error.h"

namespace lazyscope {
namespace {

constexpr uint64_t kFnvOffset = 1469598103934665603ull;
constexpr uint64_t kFnvPrime = 1099511628211ull;

uint64_t fnv_bytes(uint64_t h, const void* data, std::size_t size) {
  const auto* p = static_cast<const unsigned char*>(data);
  for (std::size_t i = 0; i < size; ++i) {
    h ^= p[i];
    h *= kFnvPrime;
  }
  return h;
}

int blocks_for(int tokens, int block_size) { return (tokens + block_size - 1) / block_size; }

}  // namespace

uint64_t hash_tokens(uint64_t seed, const std::vector<int32_t>& tokens) {
  // FNV-1a over whole token ids (a quarter of the byte-wise steps: serving workloads hash every
  // document of every request); keys never leave the process and hits compare the tokens.
  uint64_t h = seed ^ kFnvOffset;
  for (int32_t t : tokens) {
    h ^= uint32_t(t);
    h *= kFnvPrime;
  }
  h ^= uint64_t(tokens.size()) << 32;
  return h * kFnvPrime;
}

uint64_t hash_string(uint64_t seed, const std::string& text) {
  return fnv_bytes(seed ^ kFnvOffset, text.data(), text.size());
}

std::size_t LruEviction::choose(const std::vector<const CachedSegment*>& candidates) {
  std::size_t best = 0;
  for (std::size_t i = 1; i < candidates.size(); ++i) {
    if (candidates[i]->last_use < candidates[best]->last_use) best = i;
  }
  return best;
}

KvCacheManager::KvCacheManager(int num_blocks, int block_size, std::size_t bytes_per_block,
                               std::string model_identity, EventSink* sink,
                               std::unique_ptr<EvictionPolicy> eviction, std::string pool_name,
                               int64_t first_segment_id)
    : pool_(num_blocks, block_size),
      bytes_per_block_(bytes_per_block),
      identity_(std::move(model_identity)),
      sink_(sink),
      pool_name_(std::move(pool_name)),
      eviction_(eviction ? std::move(eviction) : std::make_unique<LruEviction>()),
      next_id_(first_segment_id) {}

int KvCacheManager::free_blocks() const {
  std::lock_guard lock(mutex_);
  return pool_.free_count();
}

int64_t KvCacheManager::bytes_stored() const {
  int64_t blocks = 0;
  for (const auto& [id, s] : segments_) {
    if (s.published) blocks += int64_t(s.blocks.size());
  }
  return blocks * int64_t(bytes_per_block_);
}

std::vector<BlockState> KvCacheManager::blocks() const {
  std::lock_guard lock(mutex_);
  return pool_.blocks();
}

std::vector<CachedSegment> KvCacheManager::segments() const {
  std::lock_guard lock(mutex_);
  std::vector<CachedSegment> out;
  for (const auto& [id, s] : segments_) out.push_back(s);
  std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) { return a.id < b.id; });
  return out;
}

void KvCacheManager::emit_block(BlockAction action, int32_t block, const CachedSegment& segment,
                                int64_t source_segment) {
  if (!sink_) return;
  const BlockState& b = pool_.at(block);
  sink_->on_block(BlockEvent{pool_name_, action, block, segment.id, b.refcount, b.shift, source_segment});
}

CachedSegment& KvCacheManager::new_segment(SegmentKind kind, std::string label, uint64_t key) {
  CachedSegment s;
  s.id = next_id_++;
  s.kind = kind;
  s.label = std::move(label);
  s.key = key;
  s.last_use = ++clock_;
  return segments_.emplace(s.id, std::move(s)).first->second;
}

void KvCacheManager::evict_one(std::vector<const CachedSegment*>& candidates) {
  const std::size_t pick = eviction_->choose(candidates);
  const CachedSegment* victim = candidates[pick];
  candidates.erase(candidates.begin() + std::ptrdiff_t(pick));
  evicted_in_plan_ += int64_t(victim->blocks.size());
  free_segment(victim->id, true);  // other segments' addresses stay valid (node-based map)
}

std::vector<int32_t> KvCacheManager::allocate(int count, CachedSegment& owner, RequestPlan& plan) {
  const int64_t owner_id = owner.id;
  // Unreferenced published segments in id order, gathered once per allocation (not per victim).
  std::vector<const CachedSegment*> candidates;
  bool gathered = false;
  while (pool_.free_count() < count) {
    if (!gathered) {
      for (const auto& [id, s] : segments_) {
        if (s.published && s.refcount == 0) candidates.push_back(&s);
      }
      std::sort(candidates.begin(), candidates.end(),
                [](const CachedSegment* a, const CachedSegment* b) { return a->id < b->id; });
      gathered = true;
    }
    if (candidates.empty()) {
      throw Error("KV budget too small for this request: it needs " + std::to_string(count) +
                  " more block(s) of " + std::to_string(pool_.block_size()) + " tokens, " +
                  std::to_string(pool_.free_count()) + " free of " + std::to_string(pool_.num_blocks()) +
                  " after evicting everything unreferenced; raise --kv-budget");
    }
    evict_one(candidates);
  }
  CachedSegment& seg = segments_.at(owner_id);
  std::vector<int32_t> blocks = pool_.take(count, owner_id);
  for (int32_t b : blocks) {
    pool_.at(b).refcount = seg.refcount;
    pool_.at(b).last_use = clock_;
    seg.blocks.push_back(b);
    emit_block(BlockAction::Allocated, b, seg);
  }
  plan.stats.blocks_allocated += count;
  return blocks;
}

void KvCacheManager::acquire(CachedSegment& s, RequestPlan& plan, bool report_hit) {
  ++s.refcount;
  s.last_use = ++clock_;
  for (int32_t b : s.blocks) {
    pool_.at(b).refcount = s.refcount;
    pool_.at(b).last_use = clock_;
    if (report_hit) emit_block(BlockAction::Hit, b, s);
  }
  plan.held.push_back(s.id);
}

void KvCacheManager::release_segment(int64_t id) {
  auto it = segments_.find(id);
  if (it == segments_.end()) return;
  CachedSegment& s = it->second;
  if (s.refcount <= 0) throw Error("KV cache: segment " + std::to_string(id) + " released twice");
  --s.refcount;
  for (int32_t b : s.blocks) pool_.at(b).refcount = s.refcount;
}

void KvCacheManager::free_segment(int64_t id, bool evicted) {
  auto it = segments_.find(id);
  if (it == segments_.end()) return;
  CachedSegment& s = it->second;
  for (int32_t b : s.blocks) {
    emit_block(evicted ? BlockAction::Evicted : BlockAction::Released, b, s);
    pool_.at(b).refcount = 0;
    pool_.give_back(b);
  }
  if (s.published) {
    auto found = index_.find(s.key);
    if (found != index_.end() && found->second == id) index_.erase(found);
  }
  segments_.erase(it);
}

CachedSegment* KvCacheManager::find_published(uint64_t key, const std::vector<int32_t>& tokens) {
  auto it = index_.find(key);
  if (it == index_.end()) return nullptr;
  CachedSegment& s = segments_.at(it->second);
  return s.tokens == tokens ? &s : nullptr;  // exact: a hash collision is a miss
}

RequestPlan KvCacheManager::plan(const PromptLayout& layout, Mode mode, Policy policy) {
  check_mode_policy(mode, policy);
  if (layout.query.empty() && layout.documents.empty() && layout.prefix.empty()) {
    throw Error("the prompt is empty");
  }
  std::lock_guard lock(mutex_);
  RequestPlan plan;
  plan.mode = mode;
  plan.policy = policy;
  evicted_in_plan_ = 0;
  try {
    if (mode == Mode::Full) {
      plan_full(layout, plan);
    } else {
      plan_block(layout, plan);
    }
  } catch (...) {
    // Roll back: nothing stays held, nothing half-encoded is published.
    for (int64_t id : plan.held) release_segment(id);
    for (int64_t id : plan.pending) free_segment(id, false);
    for (int64_t id : plan.ephemeral) free_segment(id, false);
    throw;
  }
  plan.stats.blocks_evicted = evicted_in_plan_;
  plan.stats.prompt_tokens = layout.total_tokens();
  return plan;
}

namespace {

std::vector<int32_t> iota_positions(int start, int count) {
  std::vector<int32_t> p(count);
  for (int i = 0; i < count; ++i) p[i] = start + i;
  return p;
}

}  // namespace

// Fills a segment's blocks with `tokens` from `start`, returning the slots and its table entries.
struct KvCacheManager::Builder {
  static void fill(const std::vector<int32_t>& blocks, int tokens, int block_size, int shift,
                   std::vector<int32_t>* slots, std::vector<BlockRef>* table) {
    for (int i = 0; i < tokens; ++i) {
      if (slots) slots->push_back(blocks[i / block_size] * block_size + i % block_size);
    }
    for (std::size_t b = 0; b < blocks.size(); ++b) {
      int valid = std::min(block_size, tokens - int(b) * block_size);
      if (valid > 0 && table) table->push_back(BlockRef{blocks[b], shift, valid});
    }
  }
};

void KvCacheManager::plan_block(const PromptLayout& layout, RequestPlan& plan) {
  const int B = pool_.block_size();
  const int P = int(layout.prefix.size());
  const bool reuse = plan.policy != Policy::None;
  const uint64_t identity_hash = hash_string(0, identity_);
  const uint64_t prefix_key = hash_tokens(hash_string(identity_hash, "prefix"), layout.prefix);

  // Prefix: causal at [0, P).
  std::vector<BlockRef> prefix_table;
  if (P > 0) {
    CachedSegment* hit = reuse ? find_published(prefix_key, layout.prefix) : nullptr;
    int64_t id;
    if (hit) {
      acquire(*hit, plan, true);
      id = hit->id;
      plan.stats.cached_tokens += P;
    } else {
      CachedSegment& s = new_segment(SegmentKind::Prefix, "prefix", prefix_key);
      s.tokens = layout.prefix;
      id = s.id;
      acquire(s, plan, false);
      (reuse ? plan.pending : plan.ephemeral).push_back(id);
      allocate(blocks_for(P, B), segments_.at(id), plan);
      SegmentTask task;
      task.segment = id;
      task.tokens = layout.prefix;
      task.positions = iota_positions(0, P);
      Builder::fill(segments_.at(id).blocks, P, B, 0, &task.slots, &task.table);
      plan.encodes.push_back(std::move(task));
    }
    Builder::fill(segments_.at(id).blocks, P, B, 0, nullptr, &prefix_table);
    plan.placements.push_back(
        {id, SegmentKind::Prefix, "prefix", 0, P, 0, hit != nullptr, false, -1, segments_.at(id).blocks});
  }

  plan.table = prefix_table;
  std::unordered_map<uint64_t, int64_t> bases_this_request;  // doc key -> base used here
  std::unordered_set<int64_t> made_here;                     // segments encoded or copied here
  std::unordered_set<uint64_t> placed_keys;                  // documents placed so far
  enum class Use { Hit, Miss, Repeat };
  int start = P;
  for (std::size_t k = 0; k < layout.documents.size(); ++k) {
    const std::vector<int32_t>& doc = layout.documents[k];
    const int L = int(doc.size());
    const int shift = start - P;
    const std::string label =
        k < layout.document_labels.size() ? layout.document_labels[k] : "document " + std::to_string(k);
    plan.stats.documents += 1;
    if (L == 0) {
      plan.stats.document_hits += 1;
      continue;
    }
    const uint64_t doc_key = hash_tokens(prefix_key, doc);

    // Encodes the document at [P, P+L) into a new segment keyed `key`.
    auto encode_new = [&](bool publish, uint64_t key) -> int64_t {
      CachedSegment& s = new_segment(SegmentKind::Document, label, key);
      s.tokens = doc;
      s.encode_position = P;
      const int64_t id = s.id;
      acquire(s, plan, false);
      (publish ? plan.pending : plan.ephemeral).push_back(id);
      allocate(blocks_for(L, B), segments_.at(id), plan);
      SegmentTask task;
      task.segment = id;
      task.tokens = doc;
      task.positions = iota_positions(P, L);
      task.table = prefix_table;
      Builder::fill(segments_.at(id).blocks, L, B, 0, &task.slots, &task.table);
      plan.encodes.push_back(std::move(task));
      bases_this_request[doc_key] = id;
      made_here.insert(id);
      return id;
    };

    // The document's KV at its encoding positions [P, P+L): cached before this request (a hit),
    // made earlier in this request (a repeat), or encoded now (a miss).
    auto base_segment = [&](bool publish, Use* use) -> int64_t {
      if (auto it = bases_this_request.find(doc_key); it != bases_this_request.end() && plan.policy != Policy::None) {
        *use = made_here.count(it->second) ? Use::Repeat : Use::Hit;
        return it->second;
      }
      if (publish) {
        if (CachedSegment* hit = find_published(doc_key, doc)) {
          acquire(*hit, plan, true);
          bases_this_request[doc_key] = hit->id;
          *use = Use::Hit;
          return hit->id;
        }
      }
      *use = Use::Miss;
      return encode_new(publish, doc_key);
    };

    // A copy of `base` with keys rotated by `shift` (materialize).
    auto copy_of = [&](int64_t base, CachedSegment& dst) {
      const std::vector<int32_t> src_blocks = segments_.at(base).blocks;
      std::vector<int32_t> dst_blocks = allocate(int(src_blocks.size()), dst, plan);
      dst.source_segment = base;
      made_here.insert(dst.id);
      for (std::size_t b = 0; b < src_blocks.size(); ++b) {
        int valid = std::min(B, L - int(b) * B);
        plan.copies.push_back(BlockCopy{src_blocks[b], dst_blocks[b], shift, valid});
        pool_.at(dst_blocks[b]).shift = shift;
        emit_block(BlockAction::Copied, dst_blocks[b], dst, base);
        plan.stats.bytes_copied += int64_t(bytes_per_block_) * valid / B;
      }
    };

    Use use = Use::Miss;
    int64_t used = -1;
    int table_shift = 0;
    switch (plan.policy) {
      case Policy::None:
      case Policy::Lazy: {
        used = base_segment(plan.policy == Policy::Lazy, &use);
        table_shift = shift;
        break;
      }
      case Policy::Materialized: {
        const int64_t base = base_segment(true, &use);
        if (shift == 0) {
          used = base;
        } else {
          CachedSegment& c = new_segment(SegmentKind::Copy, label, 0);
          c.tokens = doc;
          c.encode_position = start;
          c.shift = shift;
          used = c.id;
          acquire(c, plan, false);
          plan.ephemeral.push_back(used);
          copy_of(base, segments_.at(used));
        }
        break;
      }
      case Policy::Positional: {
        const uint64_t pos_key = hash_tokens(doc_key, {start});
        if (CachedSegment* hit = find_published(pos_key, doc)) {
          acquire(*hit, plan, true);
          used = hit->id;
          use = Use::Hit;
        } else if (auto it = bases_this_request.find(pos_key); it != bases_this_request.end()) {
          used = it->second;
          use = Use::Repeat;  // only this request's own encodes and copies are remembered here
        } else if (shift == 0) {
          used = encode_new(true, pos_key);  // encoded where it sits: the copy is the base
          use = Use::Miss;
          bases_this_request[pos_key] = used;
        } else {
          const int64_t base = base_segment(false, &use);
          if (use == Use::Hit) use = Use::Miss;  // not reachable: positional bases are never published
          CachedSegment& c = new_segment(SegmentKind::Copy, label, pos_key);
          c.tokens = doc;
          c.encode_position = start;
          c.shift = shift;
          used = c.id;
          acquire(c, plan, false);
          plan.pending.push_back(used);
          copy_of(base, segments_.at(used));
          bases_this_request[pos_key] = used;
        }
        break;
      }
      case Policy::Prefix:
        throw Error("policy 'prefix' cannot plan block attention");
    }
    // A second placement of a document in one request is a repeat, whatever served it.
    if (!placed_keys.insert(doc_key).second) use = Use::Repeat;
    if (use == Use::Hit) {
      plan.stats.document_hits += 1;
      plan.stats.cached_tokens += L;
    } else if (use == Use::Repeat) {
      plan.stats.document_repeats += 1;
      plan.stats.repeat_tokens += L;
    }
    const CachedSegment& placed = segments_.at(used);
    Builder::fill(placed.blocks, L, B, table_shift, nullptr, &plan.table);
    plan.placements.push_back({used, placed.kind, label, start, L, shift, use == Use::Hit, use == Use::Repeat,
                               placed.source_segment, placed.blocks});
    start += L;
  }

  // Query: fresh blocks right after the last document; generated tokens follow it.
  const int Q = int(layout.query.size());
  if (Q == 0) throw Error("block mode needs a non-empty query: its last token gives the prompt's logits");
  CachedSegment& q = new_segment(SegmentKind::Query, "query", 0);
  q.tokens = layout.query;
  q.encode_position = start;
  const int64_t qid = q.id;
  acquire(q, plan, false);
  plan.ephemeral.push_back(qid);
  plan.tail_segment = qid;
  plan.prompt.segment = qid;
  plan.prompt.lazy = plan.policy == Policy::Lazy || plan.policy == Policy::None;
  if (Q > 0) {
    allocate(blocks_for(Q, B), segments_.at(qid), plan);
    plan.prompt.tokens = layout.query;
    plan.prompt.positions = iota_positions(start, Q);
    Builder::fill(segments_.at(qid).blocks, Q, B, 0, &plan.prompt.slots, &plan.table);
  }
  plan.placements.push_back({qid, SegmentKind::Query, "query", start, Q, 0, false, false, -1, segments_.at(qid).blocks});
  plan.prompt.table = plan.table;
  plan.next_position = start + Q;
  // Encoded segments' blocks: set their valid counts for display.
  for (const auto& [id, s] : segments_) {
    int remaining = int(s.tokens.size());
    for (int32_t b : s.blocks) {
      pool_.at(b).valid = std::min(B, std::max(0, remaining));
      remaining -= B;
    }
  }
}

void KvCacheManager::plan_full(const PromptLayout& layout, RequestPlan& plan) {
  const int B = pool_.block_size();
  std::vector<int32_t> tokens = layout.prefix;
  std::vector<std::pair<int, int>> doc_spans;  // [begin, end) of each document
  for (const auto& d : layout.documents) {
    doc_spans.push_back({int(tokens.size()), int(tokens.size() + d.size())});
    tokens.insert(tokens.end(), d.begin(), d.end());
  }
  tokens.insert(tokens.end(), layout.query.begin(), layout.query.end());
  const int N = int(tokens.size());

  // vLLM-style chained hashes of full blocks; a hit needs every preceding block to hit.
  int hit_blocks = 0;
  std::vector<uint64_t> chain;
  uint64_t h = hash_string(0, identity_ + "|full");
  for (int b = 0; b + 1 <= N / B; ++b) {
    h = hash_tokens(h, std::vector<int32_t>(tokens.begin() + b * B, tokens.begin() + (b + 1) * B));
    chain.push_back(h);
  }
  if (plan.policy == Policy::Prefix) {
    for (std::size_t b = 0; b < chain.size(); ++b) {
      std::vector<int32_t> block_tokens(tokens.begin() + b * B, tokens.begin() + (b + 1) * B);
      if (!find_published(chain[b], block_tokens)) break;
      hit_blocks = int(b) + 1;
    }
    if (hit_blocks * B >= N) --hit_blocks;  // at least one token must run to produce logits
    for (int b = 0; b < hit_blocks; ++b) {
      std::vector<int32_t> block_tokens(tokens.begin() + b * B, tokens.begin() + (b + 1) * B);
      CachedSegment* s = find_published(chain[b], block_tokens);
      acquire(*s, plan, true);
      Builder::fill(s->blocks, B, B, 0, nullptr, &plan.table);
    }
  }
  const int cached = hit_blocks * B;
  plan.stats.cached_tokens = cached;
  plan.prompt.lazy = false;
  plan.prompt.tokens.assign(tokens.begin() + cached, tokens.end());
  plan.prompt.positions = iota_positions(cached, N - cached);
  // New full blocks become cacheable segments (prefix policy); the tail is private.
  const int full_blocks = N / B;
  for (int b = hit_blocks; b < full_blocks && plan.policy == Policy::Prefix; ++b) {
    CachedSegment& s = new_segment(SegmentKind::Prefix,
                                   "tokens " + std::to_string(b * B) + "-" + std::to_string((b + 1) * B - 1),
                                   chain[b]);
    s.tokens.assign(tokens.begin() + b * B, tokens.begin() + (b + 1) * B);
    s.encode_position = b * B;
    const int64_t id = s.id;
    acquire(s, plan, false);
    plan.pending.push_back(id);
    std::vector<int32_t> blk = allocate(1, segments_.at(id), plan);
    pool_.at(blk[0]).valid = B;
    Builder::fill(blk, B, B, 0, &plan.prompt.slots, &plan.table);
  }
  const int tail_start = plan.policy == Policy::Prefix ? std::max(cached, full_blocks * B) : cached;
  CachedSegment& tail = new_segment(SegmentKind::Query, "sequence", 0);
  tail.tokens.assign(tokens.begin() + tail_start, tokens.end());
  tail.encode_position = tail_start;
  const int64_t tid = tail.id;
  acquire(tail, plan, false);
  plan.ephemeral.push_back(tid);
  plan.tail_segment = tid;
  plan.prompt.segment = tid;
  const int tail_tokens = N - tail_start;
  if (tail_tokens > 0) {
    std::vector<int32_t> blk = allocate(blocks_for(tail_tokens, B), segments_.at(tid), plan);
    int remaining = tail_tokens;
    for (int32_t b : blk) {
      pool_.at(b).valid = std::min(B, remaining);
      remaining -= B;
    }
    Builder::fill(blk, tail_tokens, B, 0, &plan.prompt.slots, &plan.table);
  }
  plan.prompt.table = plan.table;
  plan.next_position = N;

  const int prefix_len = int(layout.prefix.size());
  plan.placements.push_back({-1, SegmentKind::Prefix, "prefix", 0, prefix_len, 0, prefix_len <= cached, false, -1, {}});
  for (std::size_t k = 0; k < doc_spans.size(); ++k) {
    const auto [begin, end] = doc_spans[k];
    const bool hit = end <= cached;
    plan.stats.documents += 1;
    if (hit) plan.stats.document_hits += 1;
    const std::string label =
        k < layout.document_labels.size() ? layout.document_labels[k] : "document " + std::to_string(k);
    plan.placements.push_back({-1, SegmentKind::Document, label, begin, end - begin, 0, hit, false, -1, {}});
  }
  plan.placements.push_back({tid, SegmentKind::Query, "query", N - int(layout.query.size()),
                             int(layout.query.size()), 0, false, false, -1, {}});
}

SegmentTask KvCacheManager::next_decode_step(RequestPlan& plan, int32_t token) {
  std::lock_guard lock(mutex_);
  const int B = pool_.block_size();
  CachedSegment& tail = segments_.at(plan.tail_segment);
  const bool need_block = tail.blocks.empty() || pool_.at(tail.blocks.back()).valid == B ||
                          plan.table.empty() || plan.table.back().block != tail.blocks.back();
  if (need_block) {
    evicted_in_plan_ = 0;
    std::vector<int32_t> blk = allocate(1, tail, plan);
    plan.stats.blocks_evicted += evicted_in_plan_;
    plan.table.push_back(BlockRef{blk[0], 0, 0});
  }
  BlockRef& last = plan.table.back();
  BlockState& state = pool_.at(last.block);
  const int32_t slot = last.block * B + last.valid;
  ++last.valid;
  state.valid = last.valid;
  state.last_use = ++clock_;
  tail.tokens.push_back(token);
  SegmentTask step;
  step.segment = tail.id;
  step.tokens = {token};
  step.positions = {plan.next_position++};
  step.slots = {slot};
  step.table = plan.table;
  step.lazy = plan.prompt.lazy;
  return step;
}

void KvCacheManager::finish(RequestPlan& plan, bool success) {
  std::lock_guard lock(mutex_);
  for (int64_t id : plan.held) release_segment(id);
  for (int64_t id : plan.pending) {
    auto it = segments_.find(id);
    if (it == segments_.end()) continue;
    if (!success) {
      free_segment(id, false);
      continue;
    }
    CachedSegment& s = it->second;
    if (index_.count(s.key)) {
      free_segment(id, false);  // someone published the same key first
      continue;
    }
    s.published = true;
    index_[s.key] = id;
  }
  for (int64_t id : plan.ephemeral) free_segment(id, false);
  plan.held.clear();
  plan.pending.clear();
  plan.ephemeral.clear();
  plan.stats.bytes_stored = bytes_stored();
  if (sink_) {
    int in_use = 0, cached = 0;
    for (const BlockState& b : pool_.blocks()) {
      if (b.segment < 0) continue;
      if (b.refcount > 0) ++in_use; else ++cached;
    }
    sink_->on_pool(PoolEvent{pool_name_, pool_.num_blocks(), in_use, cached,
                             int64_t(pool_.num_blocks()) * int64_t(bytes_per_block_)});
  }
}

void KvCacheManager::clear() {
  std::lock_guard lock(mutex_);
  std::vector<int64_t> ids;
  for (const auto& [id, s] : segments_) {
    if (s.refcount == 0) ids.push_back(id);
  }
  for (int64_t id : ids) free_segment(id, true);
}

void KvCacheManager::check_invariants() const {
  std::lock_guard lock(mutex_);
  std::vector<int> owners(pool_.num_blocks(), 0);
  for (const auto& [id, s] : segments_) {
    if (s.refcount < 0) throw Error("segment " + std::to_string(id) + " has a negative refcount");
    if (s.published && index_.count(s.key) == 0) throw Error("published segment missing from index");
    for (int32_t b : s.blocks) {
      if (pool_.at(b).segment != id) throw Error("block " + std::to_string(b) + " owner mismatch");
      if (pool_.at(b).refcount != s.refcount) throw Error("block " + std::to_string(b) + " refcount mismatch");
      ++owners[b];
    }
  }
  int free_blocks = 0;
  for (int b = 0; b < pool_.num_blocks(); ++b) {
    if (pool_.at(b).segment < 0) {
      ++free_blocks;
      if (owners[b] != 0) throw Error("free block " + std::to_string(b) + " is owned");
    } else if (owners[b] != 1) {
      throw Error("block " + std::to_string(b) + " is leaked or shared by " + std::to_string(owners[b]) + " segments");
    }
  }
  if (free_blocks != pool_.free_count()) throw Error("free list disagrees with block states");
  for (const auto& [key, id] : index_) {
    if (segments_.count(id) == 0) throw Error("index points at a freed segment");
  }
}

}  // namespace lazyscope

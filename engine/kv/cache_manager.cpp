#include "engine/kv/cache_manager.h"

#include <algorithm>
#include <exception>
#include <string>
#include <utility>

#include "base/error.h"
#include "engine/kv/plan_builder.h"

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

void LruEviction::insert(const CachedSegment& segment) { order_.insert({segment.last_use, segment.id}); }

void LruEviction::erase(const CachedSegment& segment) { order_.erase({segment.last_use, segment.id}); }

int64_t LruEviction::victim(const std::function<bool(int64_t)>& spared) const {
  for (const auto& [last_use, id] : order_) {
    if (!spared(id)) return id;
  }
  return -1;
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

int64_t KvCacheManager::bytes_stored() const { return published_blocks_ * int64_t(bytes_per_block_); }

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
  queued_.blocks.push_back(BlockEvent{pool_name_, action, block, segment.id, b.refcount, b.shift, source_segment});
}

KvCacheManager::QueuedEvents KvCacheManager::take_events() {
  QueuedEvents out = std::move(queued_);
  queued_ = {};
  return out;
}

void KvCacheManager::deliver(const QueuedEvents& events) const {
  if (!sink_) return;
  for (const BlockEvent& e : events.blocks) sink_->on_block(e);
  if (events.pool) sink_->on_pool(*events.pool);
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

void KvCacheManager::unlist(const CachedSegment& segment) {
  if (!evictable(segment)) return;
  eviction_->erase(segment);
  evictable_blocks_ -= int64_t(segment.blocks.size());
}

void KvCacheManager::list(const CachedSegment& segment) {
  if (!evictable(segment)) return;
  eviction_->insert(segment);
  evictable_blocks_ += int64_t(segment.blocks.size());
}

void KvCacheManager::evict_one() {
  // The segments this plan is about to hit are spared: a request never evicts what it reads.
  const int64_t victim = eviction_->victim([this](int64_t id) { return spared_.count(id) > 0; });
  if (victim < 0) return;
  evicted_in_plan_ += int64_t(segments_.at(victim).blocks.size());
  free_segment(victim, true);  // other segments' addresses stay valid (node-based map)
}

std::vector<int32_t> KvCacheManager::allocate(int count, CachedSegment& owner, RequestPlan& plan) {
  const int64_t owner_id = owner.id;
  while (pool_.free_count() < count) {
    const int before = pool_.free_count();
    evict_one();
    if (pool_.free_count() == before) {
      throw Error("KV budget too small for this request: it needs " + std::to_string(count) +
                  " more block(s) of " + std::to_string(pool_.block_size()) + " tokens, " +
                  std::to_string(pool_.free_count()) + " free of " + std::to_string(pool_.num_blocks()) +
                  " after evicting everything unreferenced; raise --kv-budget");
    }
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
  unlist(s);
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
  if (s.abandoned && s.refcount == 0) {
    free_segment(id, false);
    return;
  }
  list(s);
}

void KvCacheManager::free_segment(int64_t id, bool evicted) {
  auto it = segments_.find(id);
  if (it == segments_.end()) return;
  CachedSegment& s = it->second;
  unlist(s);
  for (int32_t b : s.blocks) {
    emit_block(evicted ? BlockAction::Evicted : BlockAction::Released, b, s);
    pool_.at(b).refcount = 0;
    pool_.give_back(b);
  }
  if (evicted) evicted_total_ += int64_t(s.blocks.size());
  if (s.published) {
    published_blocks_ -= int64_t(s.blocks.size());
    auto found = index_.find(s.key);
    if (found != index_.end() && found->second == id) index_.erase(found);
  }
  if (auto found = in_flight_.find(s.key); found != in_flight_.end() && found->second == id) in_flight_.erase(found);
  segments_.erase(it);
}

CachedSegment* KvCacheManager::find_published(uint64_t key, const std::vector<int32_t>& tokens) {
  auto it = index_.find(key);
  if (it == index_.end()) return nullptr;
  CachedSegment& s = segments_.at(it->second);
  return s.tokens == tokens ? &s : nullptr;  // exact: a hash collision is a miss
}

const CachedSegment* KvCacheManager::find_shared(uint64_t key, const std::vector<int32_t>& tokens) const {
  for (const auto* index : {&index_, &in_flight_}) {
    auto it = index->find(key);
    if (it == index->end()) continue;
    const CachedSegment& s = segments_.at(it->second);
    return s.tokens == tokens ? &s : nullptr;
  }
  return nullptr;
}

CachedSegment* KvCacheManager::find_shared(uint64_t key, const std::vector<int32_t>& tokens) {
  return const_cast<CachedSegment*>(std::as_const(*this).find_shared(key, tokens));
}

void KvCacheManager::register_in_flight(const CachedSegment& segment) {
  if (index_.count(segment.key) || in_flight_.count(segment.key)) return;
  in_flight_[segment.key] = segment.id;
}

void KvCacheManager::publish(CachedSegment& s) {
  // Found by key from now on; another segment of this key still in flight (planned when this
  // one was not findable) stays with its sharers but is found no more.
  in_flight_.erase(s.key);
  s.published = true;
  s.complete = true;
  index_[s.key] = s.id;
  published_blocks_ += int64_t(s.blocks.size());
  list(s);
}

RequestPlan KvCacheManager::plan(const PromptLayout& layout, Mode mode, Policy policy) {
  check_mode_policy(mode, policy);
  if (layout.query.empty() && layout.documents.empty() && layout.prefix.empty()) {
    throw Error("the prompt is empty");
  }
  RequestPlan plan;
  plan.mode = mode;
  plan.policy = policy;
  QueuedEvents events;
  std::exception_ptr failure;
  {
    std::lock_guard lock(mutex_);
    evicted_in_plan_ = 0;
    try {
      std::vector<int64_t> hits;
      count_admission(layout, mode, policy, &hits);
      spared_.insert(hits.begin(), hits.end());
      PlanBuilder builder(*this, layout, plan);
      if (mode == Mode::Full) {
        plan_full_attention(builder);
      } else {
        plan_block_attention(builder);
      }
    } catch (...) {
      // Roll back: nothing stays held, nothing half-encoded is published.
      for (int64_t id : plan.held) release_segment(id);
      for (int64_t id : plan.pending) free_segment(id, false);
      for (int64_t id : plan.ephemeral) free_segment(id, false);
      failure = std::current_exception();
    }
    spared_.clear();
    events = take_events();
  }
  deliver(events);  // outside the lock: a sink may call back into the manager
  if (failure) std::rethrow_exception(failure);
  plan.stats.blocks_evicted = evicted_in_plan_;
  plan.stats.prompt_tokens = layout.total_tokens();
  return plan;
}

SegmentTask KvCacheManager::next_decode_step(RequestPlan& plan, int32_t token) {
  SegmentTask step;
  QueuedEvents events;
  std::exception_ptr failure;
  {
    std::lock_guard lock(mutex_);
    try {
      step = decode_step_locked(plan, token);
    } catch (...) {
      failure = std::current_exception();
    }
    events = take_events();
  }
  deliver(events);
  if (failure) std::rethrow_exception(failure);
  return step;
}

SegmentTask KvCacheManager::decode_step_locked(RequestPlan& plan, int32_t token) {
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
  QueuedEvents events;
  {
    std::lock_guard lock(mutex_);
    finish_locked(plan, success);
    events = take_events();
  }
  deliver(events);
}

void KvCacheManager::finish_locked(RequestPlan& plan, bool success) {
  for (int64_t id : plan.held) release_segment(id);
  for (int64_t id : plan.pending) {
    auto it = segments_.find(id);
    if (it == segments_.end()) continue;
    CachedSegment& s = it->second;
    if (success) s.complete = true;
    if (success && !index_.count(s.key)) {
      publish(s);
      continue;
    }
    // Failed, or someone published the same key first. A request sharing it in flight still
    // holds it: it stays until that reference goes, findable no more.
    if (s.refcount > 0) {
      s.abandoned = true;
      if (auto found = in_flight_.find(s.key); found != in_flight_.end() && found->second == id) in_flight_.erase(found);
    } else {
      free_segment(id, false);
    }
  }
  for (int64_t id : plan.ephemeral) free_segment(id, false);
  plan.held.clear();
  plan.pending.clear();
  plan.ephemeral.clear();
  plan.stats.bytes_stored = bytes_stored();
  if (sink_) {
    const int cached = int(evictable_blocks_);
    const int in_use = pool_.num_blocks() - pool_.free_count() - cached;
    queued_.pool = PoolEvent{pool_name_, pool_.num_blocks(), in_use, cached,
                             int64_t(pool_.num_blocks()) * int64_t(bytes_per_block_)};
  }
}

void KvCacheManager::clear() {
  QueuedEvents events;
  {
    std::lock_guard lock(mutex_);
    std::vector<int64_t> ids;
    for (const auto& [id, s] : segments_) {
      if (s.refcount == 0) ids.push_back(id);
    }
    for (int64_t id : ids) free_segment(id, true);
    events = take_events();
  }
  deliver(events);
}

void KvCacheManager::check_invariants() const {
  std::lock_guard lock(mutex_);
  std::vector<int> owners(pool_.num_blocks(), 0);
  int64_t evictable_blocks = 0, published_blocks = 0;
  for (const auto& [id, s] : segments_) {
    if (s.refcount < 0) throw Error("segment " + std::to_string(id) + " has a negative refcount");
    if (s.published && index_.count(s.key) == 0) throw Error("published segment missing from index");
    if (s.abandoned && s.refcount == 0) throw Error("abandoned segment " + std::to_string(id) + " was not freed");
    if (s.published && !s.complete) throw Error("published segment " + std::to_string(id) + " is not complete");
    if (evictable(s)) evictable_blocks += int64_t(s.blocks.size());
    if (s.published) published_blocks += int64_t(s.blocks.size());
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
  for (const auto& [key, id] : in_flight_) {
    auto it = segments_.find(id);
    if (it == segments_.end()) throw Error("in-flight index points at a freed segment");
    if (it->second.published || it->second.abandoned || it->second.key != key || index_.count(key)) {
      throw Error("in-flight index entry for segment " + std::to_string(id) + " is stale");
    }
  }
  if (evictable_blocks != evictable_blocks_) throw Error("evictable block count disagrees with the segments");
  if (published_blocks != published_blocks_) throw Error("published block count disagrees with the segments");
}

}  // namespace lazyscope

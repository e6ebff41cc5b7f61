#pragma once
// The segment cache over the paged pool: decides, per request and policy, which segments are
// hits, which must be encoded (and into which blocks), which blocks are copied, and the block
// table the attention kernels walk. Works without tensors ("accounting mode"): the Session
// executes a plan on a backend, the workload simulator only counts. The policies' planning
// lives in plan_builder.h and one file per policy; events reach the sink after the lock is
// released.
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "engine/kv/block_pool.h"
#include "engine/kv/prompt_layout.h"
#include "engine/kv/policy.h"
#include "engine/events/events.h"
#include "kernels/backend.h"

namespace lazyscope {

struct CachedSegment {
  int64_t id = 0;
  SegmentKind kind = SegmentKind::Document;
  std::string label;             // document title (copies keep their source's title)
  int64_t source_segment = -1;   // copies: the segment copied from
  uint64_t key = 0;
  bool published = false;  // findable by key (cached); else private to one request
  bool complete = false;   // its KV is written (its encode or copy ran); published implies it
  // Its encoder ended while another request shared it in flight, and it is not (or could not
  // be) published: no longer findable, freed when the last reference goes.
  bool abandoned = false;
  std::vector<int32_t> blocks;
  std::vector<int32_t> tokens;
  int encode_position = 0;
  int shift = 0;
  int refcount = 0;
  uint64_t last_use = 0;
};

// Chooses which unreferenced cached segment to evict next. The cache keeps the policy told
// which segments are evictable (published, unreferenced) as that changes, so a choice does not
// scan the pool; a segment's fields do not change between its insert and its erase.
class EvictionPolicy {
 public:
  virtual ~EvictionPolicy() = default;
  virtual const char* name() const = 0;
  virtual void insert(const CachedSegment& segment) = 0;
  virtual void erase(const CachedSegment& segment) = 0;
  // The next victim among the inserted segments for which `spared` is false; -1 when none.
  virtual int64_t victim(const std::function<bool(int64_t)>& spared) const = 0;
};

// Least recently used first (ties: the lowest segment id): O(log n) per change, a choice
// O(log n + spared segments skipped).
class LruEviction final : public EvictionPolicy {
 public:
  const char* name() const override { return "lru"; }
  void insert(const CachedSegment& segment) override;
  void erase(const CachedSegment& segment) override;
  int64_t victim(const std::function<bool(int64_t)>& spared) const override;

 private:
  std::set<std::pair<uint64_t, int64_t>> order_;  // (last_use, id)
};

// Something the backend must compute: new tokens into slots, attending to `table`.
struct SegmentTask {
  int64_t segment = -1;
  std::vector<int32_t> tokens, positions, slots;
  std::vector<BlockRef> table;
  bool lazy = false;
};

struct Placement {
  int64_t segment = -1;  // the segment whose blocks the prompt uses here
  SegmentKind kind = SegmentKind::Document;
  std::string label;
  int start = 0;
  int tokens = 0;
  int shift = 0;         // δ = start − P (0 for prefix and query)
  bool hit = false;      // its KV was in the pool before this request arrived
  bool repeat = false;   // a document placed earlier in this request, served by that encode
  bool in_flight = false;  // a hit on KV another running request was still encoding at admission
  int64_t source_segment = -1;  // a copy: the segment it was copied from
  std::vector<int32_t> blocks;  // block mode: the blocks the prompt reads here
};

struct RequestPlan {
  Mode mode = Mode::Block;
  Policy policy = Policy::Lazy;
  std::vector<SegmentTask> encodes;   // in order (prefix before documents)
  std::vector<BlockCopy> copies;      // after the encodes
  SegmentTask prompt;                 // the last forward of the prompt; produces logits
  std::vector<Placement> placements;  // prefix, documents, query in prompt order
  std::vector<int64_t> held;          // segments this request references
  std::vector<int64_t> pending;       // encoded here; published when the request succeeds
  std::vector<int64_t> ephemeral;     // freed when the request ends
  // Segments this request shares while another running request still encodes them: its copies
  // and prompt run only once they are complete (KvCacheManager::complete).
  std::vector<int64_t> awaits;
  int64_t tail_segment = -1;          // where generated tokens are appended
  int next_position = 0;
  std::vector<BlockRef> table;        // the full table, grown by each decode step
  CacheStats stats;
};

// What admitting a request would take right now, without changing anything (serving admission).
struct AdmissionEstimate {
  int blocks_needed = 0;     // blocks plan() would allocate now, its cached segments counted as hits
  int blocks_available = 0;  // free blocks + blocks of unreferenced cached segments it does not use
  bool fits() const { return blocks_needed <= blocks_available; }
};

struct PoolUsage {
  int in_use = 0;  // blocks of segments a running request references
  int cached = 0;  // blocks of unreferenced cached segments (evictable)
  int free = 0;
};

class KvCacheManager {
 public:
  // `pool_name` stamps every event (the policy whose pool this is); segment ids start at
  // `first_segment_id`, so several managers of one session never share an id.
  KvCacheManager(int num_blocks, int block_size, std::size_t bytes_per_block,
                 std::string model_identity, EventSink* sink = nullptr,
                 std::unique_ptr<EvictionPolicy> eviction = nullptr, std::string pool_name = {},
                 int64_t first_segment_id = 1);

  // Plans a request; acquires every segment it uses. Throws Error (with nothing held) when the
  // budget cannot fit it even after evicting everything unreferenced.
  RequestPlan plan(const PromptLayout& layout, Mode mode, Policy policy);
  // The slot for the next generated token (allocating a block when the tail is full); updates
  // plan.table and returns the one-token step.
  SegmentTask next_decode_step(RequestPlan& plan, int32_t token);
  // Ends the request: publishes what it encoded when `success`, drops references, frees
  // ephemeral blocks. Fills plan.stats.bytes_stored.
  void finish(RequestPlan& plan, bool success);
  void clear();
  // cache_manager_serving.cpp: plan()'s hits and allocations as a read-only count.
  AdmissionEstimate estimate_admission(const PromptLayout& layout, Mode mode, Policy policy) const;
  // cache_manager_serving.cpp: makes `segment`, encoded by this plan and complete now, findable
  // before the request ends (a no-op when it is not pending or its key is already published).
  void publish_encoded(RequestPlan& plan, int64_t segment);
  // Every segment still pending in the plan, complete now (one pass over plan.pending).
  void publish_encoded(RequestPlan& plan);
  PoolUsage usage() const;  // cache_manager_serving.cpp
  // cache_manager_serving.cpp: whether `segment` (one of a plan's awaits) has its KV (its
  // encoder called publish_encoded or finished). abandoned(): its encoder ended without it
  // (a sharer must start again; cannot happen when requests end newest first, as the
  // scheduler's preemption does).
  bool complete(int64_t segment) const;
  bool abandoned(int64_t segment) const;
  // Blocks evicted since the cache was made, plans that failed included.
  int64_t blocks_evicted() const;

  int num_blocks() const { return pool_.num_blocks(); }
  int block_size() const { return pool_.block_size(); }
  std::size_t bytes_per_block() const { return bytes_per_block_; }
  int free_blocks() const;
  int64_t bytes_stored() const;  // blocks owned by published segments
  // Copies for display (thread-safe).
  std::vector<BlockState> blocks() const;
  std::vector<CachedSegment> segments() const;
  // Invariant check for tests: throws Error describing the first violation.
  void check_invariants() const;

 private:
  friend class PlanBuilder;
  struct QueuedEvents {
    std::vector<BlockEvent> blocks;
    std::optional<PoolEvent> pool;
  };
  CachedSegment& new_segment(SegmentKind kind, std::string label, uint64_t key);
  std::vector<int32_t> allocate(int count, CachedSegment& owner, RequestPlan& plan);
  void evict_one();
  void acquire(CachedSegment& segment, RequestPlan& plan, bool report_hit);
  void release_segment(int64_t id);
  void free_segment(int64_t id, bool evicted);
  // Published under `key` with these tokens (a hash collision is a miss); nullptr when none.
  CachedSegment* find_published(uint64_t key, const std::vector<int32_t>& tokens);
  // Published, or being encoded by a running request that will publish it; nullptr when none.
  CachedSegment* find_shared(uint64_t key, const std::vector<int32_t>& tokens);
  const CachedSegment* find_shared(uint64_t key, const std::vector<int32_t>& tokens) const;
  // A pending segment under `key` becomes findable in flight (when nothing else is under it).
  void register_in_flight(const CachedSegment& segment);
  void publish(CachedSegment& segment);
  // Keeps the eviction policy and the block counts in step with a segment's state: call
  // unlist before changing a segment's refcount, published flag or last_use, list after.
  bool evictable(const CachedSegment& segment) const { return segment.published && segment.refcount == 0; }
  void unlist(const CachedSegment& segment);
  void list(const CachedSegment& segment);
  // estimate_admission's count; `hits` receives the cached segments the plan would use.
  AdmissionEstimate count_admission(const PromptLayout& layout, Mode mode, Policy policy,
                                    std::vector<int64_t>* hits) const;
  // Queues the event (under the lock); deliver() hands the queue to the sink after unlocking.
  void emit_block(BlockAction action, int32_t block, const CachedSegment& segment,
                  int64_t source_segment = -1);
  QueuedEvents take_events();
  void deliver(const QueuedEvents& events) const;
  SegmentTask decode_step_locked(RequestPlan& plan, int32_t token);
  void finish_locked(RequestPlan& plan, bool success);

  mutable std::mutex mutex_;
  BlockPool pool_;
  std::size_t bytes_per_block_;
  std::string identity_;
  EventSink* sink_;
  std::string pool_name_;
  std::unique_ptr<EvictionPolicy> eviction_;
  std::unordered_map<int64_t, CachedSegment> segments_;
  std::unordered_map<uint64_t, int64_t> index_;      // published segments by key
  std::unordered_map<uint64_t, int64_t> in_flight_;  // pending segments being encoded, by key
  std::unordered_set<int64_t> spared_;  // while planning: segments the plan is about to hit
  int64_t next_id_;
  uint64_t clock_ = 0;
  int64_t evicted_in_plan_ = 0;
  int64_t evicted_total_ = 0;
  int64_t evictable_blocks_ = 0;  // blocks of evictable segments
  int64_t published_blocks_ = 0;  // blocks of published segments
  QueuedEvents queued_;
};

uint64_t hash_tokens(uint64_t seed, const std::vector<int32_t>& tokens);
uint64_t hash_string(uint64_t seed, const std::string& text);

}  // namespace lazyscope

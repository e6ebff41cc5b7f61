#pragma once
// What every policy's planner works with while one request is planned (under the cache
// manager's lock): the request's layout and plan, and the operations the policies combine.
// The policies themselves live in files named for them (lazy_planner.cpp, ...).
#include <cstdint>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "engine/kv/cache_manager.h"

namespace lazyscope {

// One document placement being planned.
struct DocumentSlot {
  std::size_t index = 0;                      // in layout.documents
  const std::vector<int32_t>* tokens = nullptr;
  std::string label;
  int start = 0;                              // placement s
  int shift = 0;                              // δ = s − P
  uint64_t key = 0;                           // cache key of its KV at the encoding positions
  int length() const { return int(tokens->size()); }
};

// Design: a placement is a hit when its KV was in the pool before the request arrived; a repeat
// is served by this request's own earlier encode or copy; a miss is encoded now.
enum class DocumentUse { Hit, Miss, Repeat };

// What a policy decided for one placement.
struct PlacedDocument {
  int64_t segment = -1;                  // whose blocks the prompt reads here
  DocumentUse use = DocumentUse::Miss;
  int table_shift = 0;                   // rotation the attention kernel applies (lazy); 0 for stored copies
};

class PlanBuilder {
 public:
  PlanBuilder(KvCacheManager& cache, const PromptLayout& layout, RequestPlan& plan);

  const PromptLayout& layout() const { return layout_; }
  RequestPlan& plan() { return plan_; }
  int block_size() const { return block_size_; }

  // Block attention, in prompt order: the prefix, each document through its policy, the query.
  void place_prefix(bool reuse);
  DocumentSlot document(std::size_t k) const;
  // Counts the placement (a second placement of a document is a repeat) and extends the table.
  void place_document(const DocumentSlot& slot, PlacedDocument placed);
  void place_query(bool lazy_rotation);

  // The document's KV at its encoding positions [P, P+L): cached before this request (a hit),
  // made earlier in this request (a repeat), or encoded now (a miss, published after the
  // request when `publish`).
  PlacedDocument base(const DocumentSlot& slot, bool publish);
  // Always a new encode at [P, P+L), keyed `key`.
  int64_t encode(const DocumentSlot& slot, bool publish, uint64_t key);
  // The published (or in-flight) segment under `key` holding the document's tokens, acquired
  // (its blocks reported as hits); -1 when there is none or this request made it.
  int64_t cached(const DocumentSlot& slot, uint64_t key);
  // The segment this request made under `key`; -1 when none.
  int64_t made_here(uint64_t key) const;
  // A copy of `base`'s KV with keys rotated by slot.shift (materialize), keyed `key`.
  int64_t rotated_copy(const DocumentSlot& slot, int64_t base, bool publish, uint64_t key);

  // Primitives for the full-attention planner, which works on whole blocks of the flat sequence.
  // find_shared: published, or in flight (another running request encodes it and will publish).
  CachedSegment* find_shared(uint64_t key, const std::vector<int32_t>& tokens);
  CachedSegment& new_segment(SegmentKind kind, std::string label, uint64_t key);
  // References the segment; a hit on one still in flight joins plan().awaits.
  void acquire(CachedSegment& segment, bool report_hit);
  // A pending segment of this plan becomes findable in flight by later requests.
  void share_in_flight(int64_t id);
  bool awaited(int64_t id) const;
  std::vector<int32_t> allocate(int count, int64_t owner);
  BlockState& block(int32_t id);
  const std::string& model_identity() const;

  // Slots and table entries of `tokens` tokens written into `blocks` from their first slot.
  static void fill(const std::vector<int32_t>& blocks, int tokens, int block_size, int shift,
                   std::vector<int32_t>* slots, std::vector<BlockRef>* table);

 private:
  KvCacheManager& cache_;
  const PromptLayout& layout_;
  RequestPlan& plan_;
  int block_size_;
  int prefix_tokens_;
  uint64_t prefix_key_;
  std::vector<BlockRef> prefix_table_;
  std::vector<int> starts_;                             // placement of each document
  std::unordered_map<uint64_t, int64_t> used_;          // key -> segment used in this request
  std::unordered_set<int64_t> made_;                    // segments encoded or copied here
  std::unordered_set<uint64_t> placed_;                 // documents placed so far
};

using DocumentPlanner = PlacedDocument (*)(PlanBuilder&, const DocumentSlot&);

// The block-attention policies, one per file.
PlacedDocument plan_none_document(PlanBuilder& builder, const DocumentSlot& slot);
PlacedDocument plan_lazy_document(PlanBuilder& builder, const DocumentSlot& slot);
PlacedDocument plan_materialized_document(PlanBuilder& builder, const DocumentSlot& slot);
PlacedDocument plan_positional_document(PlanBuilder& builder, const DocumentSlot& slot);
// Throws Error for a policy that does not serve block attention (prefix).
DocumentPlanner document_planner_for(Policy policy);

// Block attention: prefix, documents (each through its policy's planner), query.
void plan_block_attention(PlanBuilder& builder);
// Full attention: the prompt as one causal sequence; the prefix policy caches its full blocks
// under chained hashes (prefix_planner.cpp), none caches nothing.
void plan_full_attention(PlanBuilder& builder);

std::vector<int32_t> iota_positions(int start, int count);
int blocks_for(int tokens, int block_size);

}  // namespace lazyscope

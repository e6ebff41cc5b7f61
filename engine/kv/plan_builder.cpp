#include "engine/kv/plan_builder.h"

#include <algorithm>

#include "base/error.h"

namespace lazyscope {

std::vector<int32_t> iota_positions(int start, int count) {
  std::vector<int32_t> p(std::size_t(std::max(0, count)));
  for (int i = 0; i < count; ++i) p[std::size_t(i)] = start + i;
  return p;
}

int blocks_for(int tokens, int block_size) { return (tokens + block_size - 1) / block_size; }

void PlanBuilder::fill(const std::vector<int32_t>& blocks, int tokens, int block_size, int shift,
                       std::vector<int32_t>* slots, std::vector<BlockRef>* table) {
  for (int i = 0; i < tokens; ++i) {
    if (slots) slots->push_back(blocks[std::size_t(i / block_size)] * block_size + i % block_size);
  }
  for (std::size_t b = 0; b < blocks.size(); ++b) {
    const int valid = std::min(block_size, tokens - int(b) * block_size);
    if (valid > 0 && table) table->push_back(BlockRef{blocks[b], shift, valid});
  }
}

PlanBuilder::PlanBuilder(KvCacheManager& cache, const PromptLayout& layout, RequestPlan& plan)
    : cache_(cache),
      layout_(layout),
      plan_(plan),
      block_size_(cache.pool_.block_size()),
      prefix_tokens_(int(layout.prefix.size())),
      prefix_key_(hash_tokens(hash_string(hash_string(0, cache.identity_), "prefix"), layout.prefix)) {
  int start = prefix_tokens_;
  for (const auto& doc : layout.documents) {
    starts_.push_back(start);
    start += int(doc.size());
  }
}

CachedSegment* PlanBuilder::find_shared(uint64_t key, const std::vector<int32_t>& tokens) {
  return cache_.find_shared(key, tokens);
}

void PlanBuilder::share_in_flight(int64_t id) { cache_.register_in_flight(cache_.segments_.at(id)); }

bool PlanBuilder::awaited(int64_t id) const {
  return std::find(plan_.awaits.begin(), plan_.awaits.end(), id) != plan_.awaits.end();
}

CachedSegment& PlanBuilder::new_segment(SegmentKind kind, std::string label, uint64_t key) {
  return cache_.new_segment(kind, std::move(label), key);
}

void PlanBuilder::acquire(CachedSegment& segment, bool report_hit) {
  // Shared while another running request still encodes it: this request reads it once complete.
  if (report_hit && !segment.published && !awaited(segment.id)) plan_.awaits.push_back(segment.id);
  cache_.acquire(segment, plan_, report_hit);
}

std::vector<int32_t> PlanBuilder::allocate(int count, int64_t owner) {
  return cache_.allocate(count, cache_.segments_.at(owner), plan_);
}

BlockState& PlanBuilder::block(int32_t id) { return cache_.pool_.at(id); }

const std::string& PlanBuilder::model_identity() const { return cache_.identity_; }

void PlanBuilder::place_prefix(bool reuse) {
  const int P = prefix_tokens_;
  if (P == 0) return;
  KvCacheManager& c = cache_;
  CachedSegment* hit = reuse ? c.find_shared(prefix_key_, layout_.prefix) : nullptr;
  int64_t id;
  if (hit) {
    acquire(*hit, true);
    id = hit->id;
    plan_.stats.cached_tokens += P;
  } else {
    CachedSegment& s = c.new_segment(SegmentKind::Prefix, "prefix", prefix_key_);
    s.tokens = layout_.prefix;
    id = s.id;
    c.acquire(s, plan_, false);
    (reuse ? plan_.pending : plan_.ephemeral).push_back(id);
    c.allocate(blocks_for(P, block_size_), c.segments_.at(id), plan_);
    if (reuse) share_in_flight(id);
    SegmentTask task;
    task.segment = id;
    task.tokens = layout_.prefix;
    task.positions = iota_positions(0, P);
    fill(c.segments_.at(id).blocks, P, block_size_, 0, &task.slots, &task.table);
    plan_.encodes.push_back(std::move(task));
  }
  const std::vector<int32_t>& blocks = c.segments_.at(id).blocks;
  fill(blocks, P, block_size_, 0, nullptr, &prefix_table_);
  plan_.placements.push_back(
      {id, SegmentKind::Prefix, "prefix", 0, P, 0, hit != nullptr, false, hit && awaited(id), -1, blocks});
  plan_.table = prefix_table_;
}

DocumentSlot PlanBuilder::document(std::size_t k) const {
  DocumentSlot slot;
  slot.index = k;
  slot.tokens = &layout_.documents[k];
  slot.label = k < layout_.document_labels.size() ? layout_.document_labels[k] : "document " + std::to_string(k);
  slot.start = starts_[k];
  slot.shift = slot.start - prefix_tokens_;
  slot.key = hash_tokens(prefix_key_, *slot.tokens);
  return slot;
}

int64_t PlanBuilder::encode(const DocumentSlot& slot, bool publish, uint64_t key) {
  KvCacheManager& c = cache_;
  const int L = slot.length();
  CachedSegment& s = c.new_segment(SegmentKind::Document, slot.label, key);
  s.tokens = *slot.tokens;
  s.encode_position = prefix_tokens_;
  const int64_t id = s.id;
  c.acquire(s, plan_, false);
  (publish ? plan_.pending : plan_.ephemeral).push_back(id);
  c.allocate(blocks_for(L, block_size_), c.segments_.at(id), plan_);
  if (publish) share_in_flight(id);
  SegmentTask task;
  task.segment = id;
  task.tokens = *slot.tokens;
  task.positions = iota_positions(prefix_tokens_, L);
  task.table = prefix_table_;
  fill(c.segments_.at(id).blocks, L, block_size_, 0, &task.slots, &task.table);
  plan_.encodes.push_back(std::move(task));
  used_[slot.key] = id;  // the KV at the encoding positions, whatever else it is keyed by
  used_[key] = id;
  made_.insert(id);
  return id;
}

int64_t PlanBuilder::cached(const DocumentSlot& slot, uint64_t key) {
  CachedSegment* hit = cache_.find_shared(key, *slot.tokens);
  if (!hit || made_.count(hit->id)) return -1;  // this request's own encode is a repeat, not a hit
  acquire(*hit, true);
  return hit->id;
}

int64_t PlanBuilder::made_here(uint64_t key) const {
  auto it = used_.find(key);
  return it != used_.end() && made_.count(it->second) ? it->second : -1;
}

PlacedDocument PlanBuilder::base(const DocumentSlot& slot, bool publish) {
  if (auto it = used_.find(slot.key); it != used_.end()) {
    return PlacedDocument{it->second, made_.count(it->second) ? DocumentUse::Repeat : DocumentUse::Hit, 0};
  }
  if (publish) {
    if (const int64_t hit = cached(slot, slot.key); hit >= 0) {
      used_[slot.key] = hit;
      return PlacedDocument{hit, DocumentUse::Hit, 0};
    }
  }
  return PlacedDocument{encode(slot, publish, slot.key), DocumentUse::Miss, 0};
}

int64_t PlanBuilder::rotated_copy(const DocumentSlot& slot, int64_t base, bool publish, uint64_t key) {
  KvCacheManager& c = cache_;
  const int L = slot.length();
  CachedSegment& copy = c.new_segment(SegmentKind::Copy, slot.label, key);
  copy.tokens = *slot.tokens;
  copy.encode_position = slot.start;
  copy.shift = slot.shift;
  copy.source_segment = base;
  const int64_t id = copy.id;
  c.acquire(copy, plan_, false);
  (publish ? plan_.pending : plan_.ephemeral).push_back(id);
  const std::vector<int32_t> src_blocks = c.segments_.at(base).blocks;
  const std::vector<int32_t> dst_blocks = c.allocate(int(src_blocks.size()), c.segments_.at(id), plan_);
  if (publish) share_in_flight(id);
  const CachedSegment& dst = c.segments_.at(id);
  for (std::size_t b = 0; b < src_blocks.size(); ++b) {
    const int valid = std::min(block_size_, L - int(b) * block_size_);
    plan_.copies.push_back(BlockCopy{src_blocks[b], dst_blocks[b], slot.shift, valid});
    c.pool_.at(dst_blocks[b]).shift = slot.shift;
    c.emit_block(BlockAction::Copied, dst_blocks[b], dst, base);
    plan_.stats.bytes_copied += int64_t(c.bytes_per_block_) * valid / block_size_;
  }
  used_[key] = id;
  made_.insert(id);
  return id;
}

void PlanBuilder::place_document(const DocumentSlot& slot, PlacedDocument placed) {
  const int L = slot.length();
  plan_.stats.documents += 1;
  // A second placement of a document in one request is a repeat, whatever served it.
  if (!placed_.insert(slot.key).second) placed.use = DocumentUse::Repeat;
  if (placed.use == DocumentUse::Hit) {
    plan_.stats.document_hits += 1;
    plan_.stats.cached_tokens += L;
  } else if (placed.use == DocumentUse::Repeat) {
    plan_.stats.document_repeats += 1;
    plan_.stats.repeat_tokens += L;
  }
  const CachedSegment& segment = cache_.segments_.at(placed.segment);
  fill(segment.blocks, L, block_size_, placed.table_shift, nullptr, &plan_.table);
  // In flight: the KV read here (or the base a copy is made from) is still being encoded.
  const bool in_flight = placed.use == DocumentUse::Hit &&
                         (awaited(placed.segment) || (segment.source_segment >= 0 && awaited(segment.source_segment)));
  plan_.placements.push_back({placed.segment, segment.kind, slot.label, slot.start, L, slot.shift,
                              placed.use == DocumentUse::Hit, placed.use == DocumentUse::Repeat, in_flight,
                              segment.source_segment, segment.blocks});
}

void PlanBuilder::place_query(bool lazy_rotation) {
  KvCacheManager& c = cache_;
  const int start = starts_.empty() ? prefix_tokens_ : starts_.back() + int(layout_.documents.back().size());
  const int Q = int(layout_.query.size());
  if (Q == 0) throw Error("block mode needs a non-empty query: its last token gives the prompt's logits");
  // Fresh blocks right after the last document; generated tokens follow it.
  CachedSegment& q = c.new_segment(SegmentKind::Query, "query", 0);
  q.tokens = layout_.query;
  q.encode_position = start;
  const int64_t qid = q.id;
  c.acquire(q, plan_, false);
  plan_.ephemeral.push_back(qid);
  plan_.tail_segment = qid;
  plan_.prompt.segment = qid;
  plan_.prompt.lazy = lazy_rotation;
  c.allocate(blocks_for(Q, block_size_), c.segments_.at(qid), plan_);
  plan_.prompt.tokens = layout_.query;
  plan_.prompt.positions = iota_positions(start, Q);
  fill(c.segments_.at(qid).blocks, Q, block_size_, 0, &plan_.prompt.slots, &plan_.table);
  plan_.placements.push_back(
      {qid, SegmentKind::Query, "query", start, Q, 0, false, false, false, -1, c.segments_.at(qid).blocks});
  plan_.prompt.table = plan_.table;
  plan_.next_position = start + Q;
  // The valid counts of the blocks this request uses, for display (other segments' are unchanged).
  for (int64_t id : plan_.held) {
    const CachedSegment& s = c.segments_.at(id);
    int remaining = int(s.tokens.size());
    for (int32_t b : s.blocks) {
      c.pool_.at(b).valid = std::min(block_size_, std::max(0, remaining));
      remaining -= block_size_;
    }
  }
}

DocumentPlanner document_planner_for(Policy policy) {
  switch (policy) {
    case Policy::None:
      return &plan_none_document;
    case Policy::Lazy:
      return &plan_lazy_document;
    case Policy::Materialized:
      return &plan_materialized_document;
    case Policy::Positional:
      return &plan_positional_document;
    case Policy::Prefix:
      break;
  }
  throw Error(std::string("policy '") + to_string(policy) + "' cannot plan block attention");
}

void plan_block_attention(PlanBuilder& builder) {
  RequestPlan& plan = builder.plan();
  const DocumentPlanner planner = document_planner_for(plan.policy);
  builder.place_prefix(plan.policy != Policy::None);
  for (std::size_t k = 0; k < builder.layout().documents.size(); ++k) {
    const DocumentSlot slot = builder.document(k);
    if (slot.length() == 0) {
      plan.stats.documents += 1;  // nothing to encode or read: counted as served
      plan.stats.document_hits += 1;
      continue;
    }
    builder.place_document(slot, planner(builder, slot));
  }
  builder.place_query(plan.policy == Policy::Lazy || plan.policy == Policy::None);
}

}  // namespace lazyscope

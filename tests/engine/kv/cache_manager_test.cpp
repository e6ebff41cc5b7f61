// Segment cache accounting: hits, copies and pool invariants per policy, without tensors.
#include "engine/kv/cache_manager.h"

#include <gtest/gtest.h>

#include <random>

#include "base/error.h"

namespace lazyscope {
namespace {

constexpr int kBlock = 4;

std::vector<int32_t> tokens(int first, int count) {
  std::vector<int32_t> t(count);
  for (int i = 0; i < count; ++i) t[i] = first + i;
  return t;
}

PromptLayout layout(const std::vector<std::vector<int32_t>>& docs) {
  PromptLayout l;
  l.prefix = {1, 2, 3};
  l.documents = docs;
  l.query = {7, 8};
  return l;
}

// Runs a request in accounting mode with `decode` generated tokens.
RequestPlan run(KvCacheManager& cache, const PromptLayout& l, Mode mode, Policy policy, int decode = 0) {
  RequestPlan plan = cache.plan(l, mode, policy);
  for (int i = 0; i < decode; ++i) cache.next_decode_step(plan, 5);
  cache.check_invariants();
  cache.finish(plan, true);
  cache.check_invariants();
  return plan;
}

TEST(CacheManager, LazyReusesDocumentsAnywhere) {
  KvCacheManager cache(64, kBlock, 100, "m");
  auto a = tokens(100, 6), b = tokens(200, 5);
  RequestPlan first = run(cache, layout({a, b}), Mode::Block, Policy::Lazy);
  EXPECT_EQ(first.stats.document_hits, 0);
  EXPECT_EQ(first.encodes.size(), 3u);  // prefix, a, b
  RequestPlan second = run(cache, layout({b, a}), Mode::Block, Policy::Lazy);
  EXPECT_EQ(second.stats.documents, 2);
  EXPECT_EQ(second.stats.document_hits, 2);
  EXPECT_TRUE(second.encodes.empty());
  EXPECT_TRUE(second.copies.empty());
  // prompt = 3 + 6 + 5 + 2 = 16 tokens, cached = 3 + 6 + 5.
  EXPECT_EQ(second.stats.prompt_tokens, 16);
  EXPECT_EQ(second.stats.cached_tokens, 14);
  EXPECT_DOUBLE_EQ(second.stats.token_hit_ratio(), 14.0 / 16.0);
  // b now starts at P: shift 0; a starts at P + 5: shift 5, carried in the table.
  ASSERT_EQ(second.placements.size(), 4u);
  EXPECT_EQ(second.placements[1].shift, 0);
  EXPECT_EQ(second.placements[2].shift, 5);
  bool saw_shift = false;
  for (const BlockRef& r : second.prompt.table) saw_shift |= r.shift == 5;
  EXPECT_TRUE(saw_shift);
  EXPECT_TRUE(second.prompt.lazy);
}

TEST(CacheManager, RepeatedDocumentIsStoredOnce) {
  KvCacheManager cache(64, kBlock, 100, "m");
  auto a = tokens(100, 5);
  RequestPlan plan = cache.plan(layout({a, a, a}), Mode::Block, Policy::Lazy);
  EXPECT_EQ(plan.encodes.size(), 2u);  // prefix + one copy of a
  // Its KV was not in the pool when the request arrived: no hits; the two repeats apart.
  EXPECT_EQ(plan.stats.document_hits, 0);
  EXPECT_EQ(plan.stats.document_repeats, 2);
  EXPECT_EQ(plan.stats.repeat_tokens, 10);
  EXPECT_EQ(plan.stats.cached_tokens, 0);
  EXPECT_DOUBLE_EQ(plan.stats.document_hit_ratio(), 0.0);
  EXPECT_FALSE(plan.placements[1].repeat);
  EXPECT_TRUE(plan.placements[2].repeat);
  EXPECT_FALSE(plan.placements[2].hit);
  cache.finish(plan, true);
  int doc_segments = 0;
  for (const auto& s : cache.segments()) doc_segments += s.kind == SegmentKind::Document;
  EXPECT_EQ(doc_segments, 1);
}

TEST(CacheManager, ASecondPlacementInOneRequestIsARepeatEvenWhenCachedBefore) {
  for (Policy policy : {Policy::Lazy, Policy::Materialized, Policy::Positional}) {
    KvCacheManager cache(64, kBlock, 100, "m");
    auto a = tokens(100, 5), b = tokens(200, 3);
    run(cache, layout({a, b, a}), Mode::Block, policy);
    RequestPlan plan = run(cache, layout({a, b, a}), Mode::Block, policy);
    EXPECT_EQ(plan.stats.documents, 3) << to_string(policy);
    EXPECT_EQ(plan.stats.document_hits, 2) << to_string(policy);  // a and b: in the pool before
    EXPECT_EQ(plan.stats.document_repeats, 1) << to_string(policy);
    EXPECT_EQ(plan.stats.cached_tokens, 3 + 5 + 3) << to_string(policy);
    EXPECT_DOUBLE_EQ(plan.stats.document_hit_ratio(), 1.0) << to_string(policy);
    EXPECT_TRUE(plan.placements[3].repeat) << to_string(policy);
    EXPECT_FALSE(plan.placements[3].hit) << to_string(policy);
  }
}

TEST(CacheManager, MaterializedRepeatOfAFreshEncodeIsARepeatNotAHit) {
  KvCacheManager cache(64, kBlock, 100, "m");
  auto a = tokens(100, 5), b = tokens(200, 3);
  RequestPlan plan = run(cache, layout({a, b, a}), Mode::Block, Policy::Materialized);
  EXPECT_EQ(plan.stats.document_hits, 0);
  EXPECT_EQ(plan.stats.document_repeats, 1);
  EXPECT_FALSE(plan.copies.empty());  // the second a sits 8 tokens later: a rotated copy
}

TEST(CacheManager, MaterializedCopiesEveryShiftedPlacement) {
  KvCacheManager cache(64, kBlock, 400, "m");
  auto a = tokens(100, 6), b = tokens(200, 5);
  run(cache, layout({a, b}), Mode::Block, Policy::Materialized);
  RequestPlan second = run(cache, layout({b, a}), Mode::Block, Policy::Materialized);
  EXPECT_EQ(second.stats.document_hits, 2);
  // b sits at P (no copy); a is shifted by 5: its 2 blocks (4 + 2 tokens) are copied.
  ASSERT_EQ(second.copies.size(), 2u);
  EXPECT_EQ(second.copies[0].shift, 5);
  EXPECT_EQ(second.copies[0].valid, 4);
  EXPECT_EQ(second.copies[1].valid, 2);
  EXPECT_EQ(second.stats.bytes_copied, 400 + 200);
  EXPECT_FALSE(second.prompt.lazy);
  for (const BlockRef& r : second.prompt.table) EXPECT_EQ(r.shift, 0);
  // The copy names its source document and carries its title.
  const Placement& copied = second.placements[2];
  EXPECT_EQ(copied.kind, SegmentKind::Copy);
  EXPECT_EQ(copied.label, "document 1");
  ASSERT_GE(copied.source_segment, 0);
  bool source_is_a = false;
  for (const auto& s : cache.segments()) source_is_a |= s.id == copied.source_segment && s.tokens == a;
  EXPECT_TRUE(source_is_a);
  // Copies are per request: nothing extra stays cached.
  int copies = 0;
  for (const auto& s : cache.segments()) copies += s.kind == SegmentKind::Copy;
  EXPECT_EQ(copies, 0);
}

TEST(CacheManager, PositionalHitsOnlyAtTheSameStart) {
  KvCacheManager cache(64, kBlock, 100, "m");
  auto a = tokens(100, 6), b = tokens(200, 5);
  run(cache, layout({a, b}), Mode::Block, Policy::Positional);
  RequestPlan same = run(cache, layout({a, b}), Mode::Block, Policy::Positional);
  EXPECT_EQ(same.stats.document_hits, 2);
  RequestPlan swapped = run(cache, layout({b, a}), Mode::Block, Policy::Positional);
  EXPECT_EQ(swapped.stats.document_hits, 0);  // both documents at new starts
  EXPECT_GT(swapped.stats.bytes_copied, 0);
  // One copy per position used: a@P, b@P+6, b@P, a@P+5 are all cached now.
  int doc_like = 0;
  for (const auto& s : cache.segments()) doc_like += s.kind != SegmentKind::Prefix;
  EXPECT_EQ(doc_like, 4);
}

TEST(CacheManager, NoneNeverHits) {
  KvCacheManager cache(64, kBlock, 100, "m");
  auto a = tokens(100, 6);
  run(cache, layout({a}), Mode::Block, Policy::None);
  RequestPlan again = run(cache, layout({a, a}), Mode::Block, Policy::None);
  EXPECT_EQ(again.stats.cached_tokens, 0);
  EXPECT_EQ(again.stats.document_hits, 0);
  EXPECT_EQ(again.encodes.size(), 3u);
  EXPECT_EQ(cache.free_blocks(), 64);
}

TEST(CacheManager, PrefixPolicyChainsFullBlocks) {
  KvCacheManager cache(64, kBlock, 100, "m");
  auto a = tokens(100, 6), b = tokens(200, 5);
  run(cache, layout({a, b}), Mode::Full, Policy::Prefix);  // 16 tokens: 4 full blocks
  RequestPlan same = run(cache, layout({a, b}), Mode::Full, Policy::Prefix);
  // Everything cached but the last block is recomputed to produce logits.
  EXPECT_EQ(same.stats.cached_tokens, 12);
  RequestPlan swapped = run(cache, layout({b, a}), Mode::Full, Policy::Prefix);
  // Prefix (3) + first token differs in block 0? block 0 = [1,2,3,100] vs [1,2,3,200]: miss.
  EXPECT_EQ(swapped.stats.cached_tokens, 0);
  EXPECT_EQ(swapped.stats.document_hits, 0);
}

TEST(CacheManager, ModeAndPolicyMustMatch) {
  KvCacheManager cache(8, kBlock, 100, "m");
  EXPECT_THROW(cache.plan(layout({tokens(1, 3)}), Mode::Block, Policy::Prefix), Error);
  EXPECT_THROW(cache.plan(layout({tokens(1, 3)}), Mode::Full, Policy::Lazy), Error);
}

TEST(CacheManager, BudgetTooSmallIsAClearErrorAndHoldsNothing) {
  KvCacheManager cache(3, kBlock, 100, "m");
  try {
    cache.plan(layout({tokens(100, 40)}), Mode::Block, Policy::Lazy);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("KV budget too small"), std::string::npos) << e.what();
  }
  cache.check_invariants();
  EXPECT_EQ(cache.free_blocks(), 3);
}

TEST(CacheManager, LruEvictsTheLeastRecentlyUsedUnreferencedSegment) {
  // Prefix 1 block + doc 3 blocks + query 1 block per request; 8 blocks total.
  KvCacheManager cache(8, kBlock, 100, "m");
  auto a = tokens(100, 12), b = tokens(200, 12), c = tokens(300, 12);
  run(cache, layout({a}), Mode::Block, Policy::Lazy);
  run(cache, layout({b}), Mode::Block, Policy::Lazy);
  run(cache, layout({a}), Mode::Block, Policy::Lazy);  // a is now more recent than b
  RequestPlan pc = run(cache, layout({c}), Mode::Block, Policy::Lazy);
  EXPECT_GT(pc.stats.blocks_evicted, 0);
  RequestPlan pa = run(cache, layout({a}), Mode::Block, Policy::Lazy);
  EXPECT_EQ(pa.stats.document_hits, 1);  // a survived
  RequestPlan pb = run(cache, layout({b}), Mode::Block, Policy::Lazy);
  EXPECT_EQ(pb.stats.document_hits, 0);  // b was evicted
}

TEST(CacheManager, DecodeAppendsIntoTheQueryBlocks) {
  KvCacheManager cache(16, kBlock, 100, "m");
  RequestPlan plan = cache.plan(layout({tokens(100, 5)}), Mode::Block, Policy::Lazy);
  const int next = plan.next_position;
  EXPECT_EQ(next, 3 + 5 + 2);
  SegmentTask s1 = cache.next_decode_step(plan, 9);
  EXPECT_EQ(s1.positions[0], next);
  EXPECT_EQ(s1.table.back().valid, 3);  // query has 2 tokens + 1 generated
  cache.next_decode_step(plan, 9);
  SegmentTask s3 = cache.next_decode_step(plan, 9);  // query block full at 4: a new block
  EXPECT_EQ(s3.table.back().valid, 1);
  EXPECT_EQ(s3.slots[0], s3.table.back().block * kBlock);
  cache.finish(plan, true);
  cache.check_invariants();
}

// Property test: random workloads over every policy never break the pool's invariants.
TEST(CacheManager, RandomWorkloadKeepsInvariants) {
  for (uint32_t seed : {1u, 2u, 3u}) {
    std::mt19937 rng(seed);
    KvCacheManager cache(40, kBlock, 64, "m");
    std::vector<std::vector<int32_t>> corpus;
    for (int d = 0; d < 12; ++d) corpus.push_back(tokens(1000 + 100 * d, 1 + int(rng() % 13)));
    const Policy policies[] = {Policy::None, Policy::Prefix, Policy::Positional, Policy::Materialized, Policy::Lazy};
    int errors = 0;
    for (int step = 0; step < 1500; ++step) {
      Policy policy = policies[rng() % 5];
      Mode mode = policy == Policy::Prefix || (policy == Policy::None && rng() % 2) ? Mode::Full : Mode::Block;
      std::vector<std::vector<int32_t>> docs;
      int n = 1 + int(rng() % 4);
      for (int i = 0; i < n; ++i) docs.push_back(corpus[rng() % corpus.size()]);
      PromptLayout l = layout(docs);
      try {
        RequestPlan plan = cache.plan(l, mode, policy);
        cache.check_invariants();
        int decode = int(rng() % 6);
        for (int i = 0; i < decode; ++i) cache.next_decode_step(plan, 3);
        cache.check_invariants();
        for (const auto& b : cache.blocks()) ASSERT_GE(b.refcount, 0);
        cache.finish(plan, rng() % 10 != 0);
      } catch (const Error&) {
        ++errors;  // a request larger than the pool: refused cleanly
      }
      cache.check_invariants();
      for (const auto& b : cache.blocks()) ASSERT_EQ(b.refcount, 0) << "a finished request left a reference";
      ASSERT_LE(cache.bytes_stored(), 40 * 64);
    }
    EXPECT_LT(errors, 1500);
    cache.clear();
    EXPECT_EQ(cache.free_blocks(), 40);
  }
}

}  // namespace
}  // namespace lazyscope

namespace lazyscope {
namespace {

// A sink that reads the manager from inside its callbacks: with events delivered under the
// manager's lock this would deadlock; they arrive after it is released.
struct ReadingSink : EventSink {
  KvCacheManager* cache = nullptr;
  int blocks_seen = 0, pools_seen = 0;
  void on_block(const BlockEvent&) override { blocks_seen += cache->free_blocks() >= 0; }
  void on_pool(const PoolEvent& e) override { pools_seen += int(cache->blocks().size()) == e.blocks_total; }
};

TEST(CacheManager, EventsArriveAfterTheLockIsReleased) {
  ReadingSink sink;
  KvCacheManager cache(64, kBlock, 100, "m", &sink, nullptr, "lazy");
  sink.cache = &cache;
  auto a = tokens(100, 6), b = tokens(200, 5);
  RequestPlan plan = cache.plan(layout({a, b}), Mode::Block, Policy::Materialized);
  for (int i = 0; i < 5; ++i) cache.next_decode_step(plan, 5);
  cache.finish(plan, true);
  RequestPlan again = cache.plan(layout({b, a}), Mode::Block, Policy::Materialized);
  cache.finish(again, true);
  cache.clear();
  EXPECT_GT(sink.blocks_seen, 0);
  EXPECT_EQ(sink.pools_seen, 2);
}

}  // namespace
}  // namespace lazyscope

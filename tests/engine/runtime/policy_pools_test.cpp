// Every policy runs on its own KV pool with its own history: a cold comparison is cold for
// both sides, a reordered re-run hits each side's own blocks (design: fair comparisons).
#include <gtest/gtest.h>

#include <map>
#include <set>

#include "base/error.h"
#include "engine/runtime/session.h"

namespace lazyscope {
namespace {

struct PolicyRecorder : EventSink {
  std::map<std::string, std::map<BlockAction, int>> blocks;  // policy -> action -> count
  std::set<std::string> segment_policies;
  std::vector<SegmentEvent> copies;
  void on_segment(const SegmentEvent& e) override {
    segment_policies.insert(e.policy);
    if (e.kind == SegmentKind::Copy) copies.push_back(e);
  }
  void on_block(const BlockEvent& e) override { blocks[e.policy][e.action]++; }
};

Request three_documents() {
  Request r;
  r.prefix_ids = std::vector<int32_t>{1, 5, 6};
  r.document_ids = {std::vector<int32_t>(20, 40), std::vector<int32_t>(9, 41), std::vector<int32_t>(13, 42)};
  r.query_ids = std::vector<int32_t>{7, 8, 9};
  r.max_new_tokens = 3;
  return r;
}

SessionOptions tiny_options(std::vector<Policy> policies) {
  SessionOptions o;
  o.synthetic = "tiny";
  o.backend = BackendKind::Cpu;
  o.kv_budget_bytes = 2ull << 20;
  o.policies = std::move(policies);
  return o;
}

RunResult run(Session& session, const Request& r, Policy policy) {
  RunOptions o;
  o.policy = policy;
  return session.submit(r, o);
}

TEST(PolicyPools, ColdComparisonIsColdForBothAndTheReorderedRerunHitsEachOwnPool) {
  PolicyRecorder rec;
  Session session(tiny_options({Policy::Lazy, Policy::Materialized}), &rec);
  Request r = three_documents();
  const RunResult lazy_cold = run(session, r, Policy::Lazy);
  const RunResult mat_cold = run(session, r, Policy::Materialized);
  // Materialized is not served from the encodes lazy just paid for.
  EXPECT_EQ(lazy_cold.stats.cached_tokens, 0);
  EXPECT_EQ(mat_cold.stats.cached_tokens, 0);
  EXPECT_EQ(mat_cold.stats.document_hits, 0);
  EXPECT_EQ(rec.blocks["materialized"][BlockAction::Hit], 0);

  r.order = {2, 0, 1};
  const RunResult lazy_warm = run(session, r, Policy::Lazy);
  const RunResult mat_warm = run(session, r, Policy::Materialized);
  EXPECT_DOUBLE_EQ(lazy_warm.stats.document_hit_ratio(), 1.0);
  EXPECT_DOUBLE_EQ(mat_warm.stats.document_hit_ratio(), 1.0);
  EXPECT_EQ(lazy_warm.stats.cached_tokens, 3 + 20 + 9 + 13);
  EXPECT_EQ(mat_warm.stats.cached_tokens, 3 + 20 + 9 + 13);
  EXPECT_EQ(lazy_warm.stats.bytes_copied, 0);
  EXPECT_GT(mat_warm.stats.bytes_copied, 0);
  EXPECT_EQ(rec.blocks["lazy"][BlockAction::Copied], 0);
  EXPECT_GT(rec.blocks["materialized"][BlockAction::Copied], 0);
  EXPECT_EQ(lazy_warm.generated_ids, mat_warm.generated_ids);
  EXPECT_EQ(rec.segment_policies, (std::set<std::string>{"lazy", "materialized"}));
  // Copies say what they copy: the title of their document and its segment.
  ASSERT_FALSE(rec.copies.empty());
  for (const SegmentEvent& c : rec.copies) {
    EXPECT_EQ(c.policy, "materialized");
    EXPECT_GE(c.source_segment, 0);
    EXPECT_FALSE(c.blocks.empty());
  }

  // Per-policy history, and each pool holds only its own policy's segments.
  EXPECT_EQ(session.cumulative(Policy::Lazy).document_hits, 3);
  EXPECT_EQ(session.cumulative(Policy::Materialized).document_hits, 3);
  const PoolSnapshot lazy_pool = session.snapshot(Policy::Lazy);
  const PoolSnapshot mat_pool = session.snapshot(Policy::Materialized);
  EXPECT_EQ(int(lazy_pool.blocks.size()), session.blocks_per_policy());
  EXPECT_EQ(int(mat_pool.blocks.size()), session.blocks_per_policy());
  std::set<int64_t> lazy_ids, mat_ids;
  for (const CachedSegment& s : lazy_pool.segments) lazy_ids.insert(s.id);
  for (const CachedSegment& s : mat_pool.segments) mat_ids.insert(s.id);
  EXPECT_EQ(lazy_ids.size(), 4u);  // prefix + 3 documents
  EXPECT_EQ(mat_ids.size(), 4u);
  for (int64_t id : lazy_ids) EXPECT_EQ(mat_ids.count(id), 0u) << "segment ids are unique per session";
}

TEST(PolicyPools, EachPoolHasTheFullBudget) {
  // A budget that holds this request once: two policies each still fit it.
  SessionOptions o = tiny_options({Policy::Lazy, Policy::Materialized});
  Session one(tiny_options({Policy::Lazy}));
  Session two(o);
  EXPECT_EQ(one.blocks_per_policy(), two.blocks_per_policy());
  EXPECT_EQ(two.policies().size(), 2u);
}

TEST(PolicyPools, APolicyWithoutAPoolIsAClearError) {
  Session session(tiny_options({Policy::Lazy}));
  try {
    run(session, three_documents(), Policy::Materialized);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("no KV pool for policy 'materialized'"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("lazy"), std::string::npos) << e.what();
  }
  EXPECT_THROW(session.snapshot(Policy::Positional), Error);
}

TEST(PolicyPools, ClearCacheEmptiesEveryPool) {
  Session session(tiny_options({Policy::Lazy, Policy::Positional}));
  run(session, three_documents(), Policy::Lazy);
  run(session, three_documents(), Policy::Positional);
  session.clear_cache();
  for (Policy p : {Policy::Lazy, Policy::Positional}) EXPECT_TRUE(session.snapshot(p).segments.empty());
  EXPECT_EQ(run(session, three_documents(), Policy::Lazy).stats.document_hits, 0);
}

TEST(PolicyPools, GreedyDecodeWithoutLogitsGivesTheSameTokens) {
  Session session(tiny_options({Policy::Lazy}));
  Request r = three_documents();
  r.max_new_tokens = 6;
  RunOptions keep;
  RunOptions greedy;
  greedy.keep_logits = false;
  const RunResult a = session.submit(r, keep);
  const RunResult b = session.submit(r, greedy);
  EXPECT_EQ(a.generated_ids, b.generated_ids);
  EXPECT_EQ(a.step_logits.size(), 6u);
  EXPECT_TRUE(b.step_logits.empty());
  EXPECT_TRUE(b.prompt_last_logits.empty());
}

}  // namespace
}  // namespace lazyscope

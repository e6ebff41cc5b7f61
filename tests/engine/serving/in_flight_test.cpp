// Sharing a document another running request is still encoding (hand-worked), a plan that never
// evicts what it is about to hit, and a shared in-flight segment whose encoder gives up.
#include <gtest/gtest.h>

#include "base/error.h"
#include "engine/serving/scheduler.h"
#include "engine/serving/serving_engine.h"
#include "engine/serving/step_time_model.h"
#include "kernels/synthetic_shapes.h"

namespace lazyscope {
namespace {

constexpr int kBlock = 16;

class BlockLog final : public EventSink {
 public:
  void on_block(const BlockEvent& e) override { events.push_back(e); }
  int count(BlockAction a) const {
    int n = 0;
    for (const BlockEvent& e : events) n += e.action == a ? 1 : 0;
    return n;
  }
  std::vector<BlockEvent> events;
};

std::vector<int32_t> tokens(int first, int count) {
  std::vector<int32_t> t(static_cast<std::size_t>(count));
  for (int i = 0; i < count; ++i) t[std::size_t(i)] = first + i;
  return t;
}

// Two clients send at once; both retrieve the same 32-token document D (two blocks), no prefix,
// 4-token queries, 2 output tokens, a step budget that holds everything.
Workload two_clients_one_document() {
  Workload w;
  w.options.documents = 1;
  w.options.doc_tokens = 32;
  w.options.docs_per_request = 1;
  w.options.requests = 2;
  w.options.concurrency = 2;
  w.options.query_tokens = 4;
  w.options.output_tokens = 2;
  w.options.prefix_tokens = 0;
  w.options.vocab_size = 512;
  w.documents.push_back(tokens(10, 32));
  for (int r = 0; r < 2; ++r) {
    WorkloadRequest q;
    q.index = r;
    q.documents = {0};
    q.query = tokens(300 + 10 * r, 4);
    q.output_tokens = 2;
    w.requests.push_back(q);
  }
  return w;
}

// By hand: request 0 is admitted first and encodes D; request 1, admitted in the same step,
// shares D in flight instead of encoding a second copy: a hit (D's KV is in the pool, being
// written), counted as in flight. Step 1 runs D (32) and query 0 (4); query 1 waits for D,
// so step 2 runs it (4 tokens) beside request 0's decode. None encodes D twice in step 1.
TEST(InFlight, SecondRequestSharesTheDocumentBeingEncoded) {
  const ModelShape shape = synthetic_shape("tiny");
  const StepTimeModel model(shape, 2, StepTimeConstants::h200());
  const Workload w = two_clients_one_document();
  for (Policy p : all_policies()) {
    SCOPED_TRACE(to_string(p));
    BlockLog log;
    KvCacheManager cache(64, kBlock, shape.kv_bytes_per_block(kBlock, 2), "tiny", &log);
    SchedulerOptions so;
    so.mode = mode_for(p);
    so.policy = p;
    so.step_tokens = 256;
    auto exec = make_accounting_executor(model);
    const ServingResult r = run_scheduler(w, cache, *exec, so);
    ASSERT_EQ(r.requests, 2);
    ASSERT_GE(r.samples.size(), 2u);
    const RequestRecord& r0 = r.records[0];
    const RequestRecord& r1 = r.records[1];
    EXPECT_EQ(r0.document_hits, 0);
    if (p == Policy::None) {
      EXPECT_EQ(r1.document_hits, 0);
      EXPECT_EQ(r.samples[0].prefill_tokens, 2 * (32 + 4));  // both encode D
      EXPECT_EQ(log.count(BlockAction::Allocated), 2 * (2 + 1));
      continue;
    }
    EXPECT_EQ(r1.document_hits, 1);
    EXPECT_EQ(r1.in_flight_hits, 1);
    EXPECT_EQ(r1.cached_document_tokens, 32);
    EXPECT_DOUBLE_EQ(r.hit_ratio_documents, 0.5);
    EXPECT_DOUBLE_EQ(r.in_flight_hit_ratio_documents, 0.5);
    EXPECT_DOUBLE_EQ(r.hit_ratio_tokens, 32.0 / (2 * (32 + 4)));
    // D's two blocks once, each query's block once; request 1 reads D's blocks (two hit events).
    EXPECT_EQ(log.count(BlockAction::Allocated), 2 + 1 + 1);
    EXPECT_EQ(log.count(BlockAction::Hit), 2);
    EXPECT_EQ(r.samples[0].prefill_tokens, 32 + 4);
    EXPECT_EQ(r.samples[0].decode_batch, 0);
    EXPECT_EQ(r.samples[1].prefill_tokens, 4);
    EXPECT_EQ(r.samples[1].decode_batch, 1);
    EXPECT_LT(r0.first_token_s, r1.first_token_s);  // request 1 waited one step for D
    EXPECT_EQ(cache.usage().in_use, 0);
    cache.check_invariants();
  }
}

PromptLayout layout_of(std::vector<std::vector<int32_t>> documents, int query_first) {
  PromptLayout l;
  l.prefix = {1};
  l.documents = std::move(documents);
  l.query = tokens(query_first, 3);
  return l;
}

TEST(InFlight, PlanAwaitsTheSharedSegmentUntilItsEncoderPublishesIt) {
  const ModelShape shape = synthetic_shape("tiny");
  KvCacheManager cache(64, kBlock, shape.kv_bytes_per_block(kBlock, 2), "tiny");
  const std::vector<int32_t> d = tokens(20, 40);
  RequestPlan a = cache.plan(layout_of({d}, 300), Mode::Block, Policy::Materialized);
  ASSERT_EQ(a.encodes.size(), 2u);  // the prefix and D
  const int64_t d_segment = a.encodes[1].segment;
  // B places D at a shift: its copy is made from the in-flight base once the base is complete.
  const PromptLayout lb = layout_of({tokens(100, 16), d}, 310);
  const AdmissionEstimate est = cache.estimate_admission(lb, Mode::Block, Policy::Materialized);
  RequestPlan b = cache.plan(lb, Mode::Block, Policy::Materialized);
  EXPECT_EQ(est.blocks_needed, int(b.stats.blocks_allocated)) << "the estimate counts the in-flight base as a hit";
  ASSERT_EQ(b.encodes.size(), 1u);  // only the new 16-token document: prefix and D are shared
  EXPECT_EQ(b.awaits, (std::vector<int64_t>{a.encodes[0].segment, d_segment}));
  EXPECT_TRUE(b.placements[0].hit && b.placements[0].in_flight);  // the prefix
  EXPECT_TRUE(b.placements[2].hit && b.placements[2].in_flight);  // D, through its copy
  EXPECT_EQ(b.placements[2].source_segment, d_segment);
  EXPECT_FALSE(cache.complete(d_segment));
  cache.publish_encoded(a, a.encodes[0].segment);
  cache.publish_encoded(a, d_segment);
  EXPECT_TRUE(cache.complete(d_segment));
  // C, planned after D was published, is an ordinary hit.
  RequestPlan c = cache.plan(layout_of({d}, 320), Mode::Block, Policy::Materialized);
  EXPECT_TRUE(c.awaits.empty());
  EXPECT_TRUE(c.placements[1].hit && !c.placements[1].in_flight);
  for (RequestPlan* p : {&a, &b, &c}) cache.finish(*p, true);
  EXPECT_EQ(cache.usage().in_use, 0);
  cache.check_invariants();
}

TEST(InFlight, AnAbandonedSharedSegmentIsFreedByItsLastSharer) {
  const ModelShape shape = synthetic_shape("tiny");
  KvCacheManager cache(64, kBlock, shape.kv_bytes_per_block(kBlock, 2), "tiny");
  const std::vector<int32_t> d = tokens(20, 40);
  RequestPlan a = cache.plan(layout_of({d}, 300), Mode::Block, Policy::Lazy);
  const int64_t d_segment = a.encodes[1].segment;
  RequestPlan b = cache.plan(layout_of({d}, 310), Mode::Block, Policy::Lazy);
  ASSERT_EQ(b.awaits.size(), 2u);
  cache.finish(a, false);  // the encoder gives up while B shares D
  EXPECT_FALSE(cache.complete(d_segment));
  EXPECT_TRUE(cache.abandoned(d_segment));
  cache.check_invariants();
  // Nobody finds it any more: a new request encodes D afresh.
  RequestPlan c = cache.plan(layout_of({d}, 320), Mode::Block, Policy::Lazy);
  EXPECT_FALSE(c.placements[1].hit);
  EXPECT_NE(c.placements[1].segment, d_segment);
  const int free_before = cache.free_blocks();
  cache.finish(b, false);
  EXPECT_GT(cache.free_blocks(), free_before) << "B's release frees the abandoned D";
  cache.finish(c, true);
  EXPECT_EQ(cache.usage().in_use, 0);
  cache.check_invariants();
}

// The pool (7 blocks) holds two published documents X (least recently used) and Y, two blocks
// each, and 3 free blocks. A request [Z, X] with a new 3-block Z and a 1-block query needs one
// segment evicted: LRU order picks X, which the same request hits next. The plan spares X and
// evicts Y, and allocates what its estimate said.
TEST(InFlight, APlanNeverEvictsWhatItIsAboutToHit) {
  const ModelShape shape = synthetic_shape("tiny");
  BlockLog log;
  KvCacheManager cache(7, kBlock, shape.kv_bytes_per_block(kBlock, 2), "tiny", &log);
  PromptLayout warm;
  warm.documents = {tokens(20, 32), tokens(60, 32)};  // X, Y
  warm.query = tokens(300, 1);
  RequestPlan w = cache.plan(warm, Mode::Block, Policy::Lazy);
  const int64_t x = w.placements[0].segment, y = w.placements[1].segment;
  cache.finish(w, true);
  ASSERT_EQ(cache.free_blocks(), 3);
  PromptLayout next;
  next.documents = {tokens(100, 48), tokens(20, 32)};  // Z, X
  next.query = tokens(310, 16);
  const AdmissionEstimate est = cache.estimate_admission(next, Mode::Block, Policy::Lazy);
  EXPECT_EQ(est.blocks_needed, 3 + 1);
  EXPECT_EQ(est.blocks_available, 3 + 2);  // free + Y (X is this request's hit)
  log.events.clear();
  RequestPlan p = cache.plan(next, Mode::Block, Policy::Lazy);
  EXPECT_TRUE(p.placements[1].hit);
  EXPECT_EQ(p.placements[1].segment, x);
  EXPECT_EQ(int(p.stats.blocks_allocated), est.blocks_needed);
  EXPECT_EQ(p.stats.blocks_evicted, 2);
  int evicted = 0;
  for (const BlockEvent& e : log.events) {
    if (e.action != BlockAction::Evicted) continue;
    ++evicted;
    EXPECT_EQ(e.segment, y) << "only Y may go";
  }
  EXPECT_EQ(evicted, 2);
  EXPECT_EQ(cache.blocks_evicted(), 2);
  cache.finish(p, true);
  cache.check_invariants();
}

}  // namespace
}  // namespace lazyscope

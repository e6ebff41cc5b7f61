// Pool invariants under faults: many requests in flight at once, cancelled at random points
// (before or during decode), failed encodes (finish without success), decode steps that run out
// of budget. At every step each block's refcount equals the number of live requests holding its
// segment; at the end nothing is held, nothing leaked, and clear() returns every block.
#include <gtest/gtest.h>

#include <cstdio>
#include <map>
#include <random>

#include "base/error.h"
#include "engine/kv/cache_manager.h"

namespace lazyscope {
namespace {

struct Live {
  RequestPlan plan;
  int decode_left = 0;
};

// Every block's refcount is what the live requests hold; no block is owned by two segments.
void expect_references_match(const KvCacheManager& cache, const std::vector<Live>& live) {
  std::map<int64_t, int> held;
  for (const Live& l : live)
    for (int64_t id : l.plan.held) ++held[id];
  const std::vector<BlockState> blocks = cache.blocks();
  for (const CachedSegment& s : cache.segments()) {
    const int expected = held.count(s.id) ? held[s.id] : 0;
    ASSERT_EQ(s.refcount, expected) << "segment " << s.id;
    for (int32_t b : s.blocks) ASSERT_EQ(blocks[b].refcount, expected) << "block " << b;
    held.erase(s.id);
  }
  ASSERT_TRUE(held.empty()) << "a live request holds a segment that no longer exists";
}

struct Faults {
  int refused = 0, decode_refused = 0, cancelled = 0, failed = 0;
};

void run_faulty_workload(uint32_t seed, Policy policy, Mode mode, Faults& faults) {
  std::mt19937 rng(seed);
  const int blocks = 24 + int(rng() % 40);
  const int block_size = 1 + int(rng() % 8);
  KvCacheManager cache(blocks, block_size, 128, "model");
  std::vector<std::vector<int32_t>> corpus;
  for (int d = 0; d < 10; ++d) {
    std::vector<int32_t> doc(1 + rng() % 20);
    for (auto& t : doc) t = int32_t(1000 + 50 * d + rng() % 3);
    corpus.push_back(doc);
  }
  std::vector<Live> live;
  int refused = 0, cancelled = 0, failed = 0, completed = 0, decode_refused = 0;
  for (int step = 0; step < 2000; ++step) {
    const unsigned action = rng() % 10;
    if (action < 4 && live.size() < 6) {  // a new request arrives
      PromptLayout layout;
      layout.prefix = {1, 2, int32_t(3 + rng() % 2)};
      const int n = 1 + int(rng() % 4);
      for (int i = 0; i < n; ++i)
        layout.documents.push_back(corpus[rng() % corpus.size()]);  // repeats allowed
      layout.query.assign(1 + rng() % 5, int32_t(7 + rng() % 3));
      try {
        Live l;
        l.plan = cache.plan(layout, mode, policy);
        l.decode_left = int(rng() % 12);
        if (rng() % 8 == 0) {  // the backend fails while encoding: nothing it encoded is published
          cache.finish(l.plan, false);
          ++failed;
        } else {
          live.push_back(std::move(l));
        }
      } catch (const Error&) {
        ++refused;  // the budget cannot fit it while other requests hold blocks
      }
    } else if (action < 8 && !live.empty()) {  // one decode step of a running request
      Live& l = live[rng() % live.size()];
      if (l.decode_left > 0) {
        try {
          cache.next_decode_step(l.plan, 5);
          --l.decode_left;
        } catch (const Error&) {
          ++decode_refused;  // no block left for the next token: the request ends early
          l.decode_left = 0;
        }
      }
    } else if (!live.empty()) {  // a request ends: done, or cancelled by the user
      const std::size_t i = rng() % live.size();
      const bool cancel = live[i].decode_left > 0 && rng() % 2;
      cache.finish(live[i].plan, !cancel);
      cancel ? ++cancelled : ++completed;
      live.erase(live.begin() + long(i));
    }
    ASSERT_NO_THROW(cache.check_invariants()) << "step " << step;
    expect_references_match(cache, live);
    if (testing::Test::HasFatalFailure()) return;
  }
  for (Live& l : live) cache.finish(l.plan, rng() % 2);
  live.clear();
  cache.check_invariants();
  for (const BlockState& b : cache.blocks())
    ASSERT_EQ(b.refcount, 0) << "a finished request left a reference";
  // Only published segments keep blocks: the rest of the pool is free.
  int64_t published_blocks = 0;
  for (const CachedSegment& s : cache.segments()) {
    ASSERT_TRUE(s.published) << "segment " << s.id << " outlived its request";
    published_blocks += int64_t(s.blocks.size());
  }
  EXPECT_EQ(cache.free_blocks() + published_blocks, blocks);
  cache.clear();
  EXPECT_EQ(cache.free_blocks(), blocks);
  EXPECT_GT(completed, 0);
  EXPECT_GT(cancelled + failed, 0);
  faults.refused += refused;
  faults.decode_refused += decode_refused;
  faults.cancelled += cancelled;
  faults.failed += failed;
}

TEST(PoolFaults, RandomCancellationsFailuresAndBudgetExhaustion) {
  const std::pair<Policy, Mode> runs[] = {
      {Policy::None, Mode::Block},         {Policy::None, Mode::Full},
      {Policy::Prefix, Mode::Full},        {Policy::Positional, Mode::Block},
      {Policy::Materialized, Mode::Block}, {Policy::Lazy, Mode::Block}};
  Faults faults;
  for (uint32_t seed = 1; seed <= 4; ++seed) {
    for (auto [policy, mode] : runs) {
      SCOPED_TRACE(std::string(to_string(policy)) + " seed " + std::to_string(seed));
      run_faulty_workload(seed, policy, mode, faults);
      if (HasFatalFailure()) return;
    }
  }
  // Every kind of fault happened, or the test checked less than it claims.
  EXPECT_GT(faults.refused, 0);
  EXPECT_GT(faults.decode_refused, 0);
  EXPECT_GT(faults.cancelled, 0);
  EXPECT_GT(faults.failed, 0);
  std::printf("faults: %d refused plans, %d refused decode steps, %d cancellations, %d failed encodes\n",
              faults.refused, faults.decode_refused, faults.cancelled, faults.failed);
}

}  // namespace
}  // namespace lazyscope

// KvCacheManager::estimate_admission counts exactly the blocks plan() then allocates, changes
// nothing, and says how many blocks the request could use.
#include <gtest/gtest.h>

#include <random>

#include "engine/kv/cache_manager.h"
#include "engine/serving/serving_engine.h"

namespace lazyscope {
namespace {

TEST(AdmissionEstimate, MatchesWhatPlanAllocates) {
  std::mt19937 rng(11);
  std::vector<std::vector<int32_t>> docs;
  for (int d = 0; d < 6; ++d) {
    std::vector<int32_t> doc(1 + rng() % 50);
    for (auto& t : doc) t = int32_t(10 + rng() % 400);
    docs.push_back(doc);
  }
  for (Policy p : all_policies()) {
    SCOPED_TRACE(to_string(p));
    KvCacheManager cache(4000, 16, 1024, "m");  // no eviction: the estimate must be exact
    std::vector<RequestPlan> open;
    for (int r = 0; r < 80; ++r) {
      PromptLayout l;
      const int P = int(rng() % 3) * 7;
      for (int i = 0; i < P; ++i) l.prefix.push_back(1 + i);
      const int k = 1 + int(rng() % 4);
      for (int j = 0; j < k; ++j) l.documents.push_back(docs[rng() % docs.size()]);  // repeats allowed
      l.query.assign(1 + rng() % 20, int32_t(500 + r));
      const int free_before = cache.free_blocks();
      const AdmissionEstimate e = cache.estimate_admission(l, mode_for(p), p);
      EXPECT_EQ(cache.free_blocks(), free_before);
      const PoolUsage u = cache.usage();
      EXPECT_LE(e.blocks_available, u.free + u.cached);
      EXPECT_GE(e.blocks_available, u.free);
      RequestPlan plan = cache.plan(l, mode_for(p), p);
      EXPECT_EQ(e.blocks_needed, plan.stats.blocks_allocated) << "request " << r;
      open.push_back(std::move(plan));
      if (open.size() > 3 || rng() % 2) {
        const std::size_t i = rng() % open.size();
        cache.finish(open[i], rng() % 5 != 0);
        open.erase(open.begin() + std::ptrdiff_t(i));
      }
    }
    for (auto& plan : open) cache.finish(plan, true);
    cache.check_invariants();
  }
}

}  // namespace
}  // namespace lazyscope

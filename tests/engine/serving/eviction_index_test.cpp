// The indexed LRU eviction chooses exactly what the former scan over every unreferenced segment
// chose (least recent use, ties to the lowest id): same block events, same results, on seeded
// workloads that evict, for every policy.
#include <gtest/gtest.h>

#include <map>

#include "engine/serving/scheduler.h"
#include "engine/serving/serving_engine.h"
#include "engine/serving/step_time_model.h"
#include "kernels/synthetic_shapes.h"

namespace lazyscope {
namespace {

constexpr int kBlock = 16;

// The reference: every choice scans all evictable segments.
class ScanLruEviction final : public EvictionPolicy {
 public:
  const char* name() const override { return "lru-scan"; }
  void insert(const CachedSegment& s) override { last_use_[s.id] = s.last_use; }
  void erase(const CachedSegment& s) override { last_use_.erase(s.id); }
  int64_t victim(const std::function<bool(int64_t)>& spared) const override {
    int64_t best = -1;
    uint64_t best_use = 0;
    for (const auto& [id, use] : last_use_) {  // id order: the first minimum is the lowest id
      if (spared(id)) continue;
      if (best < 0 || use < best_use) {
        best = id;
        best_use = use;
      }
    }
    return best;
  }

 private:
  std::map<int64_t, uint64_t> last_use_;
};

class BlockLog final : public EventSink {
 public:
  void on_block(const BlockEvent& e) override { events.push_back(e); }
  std::vector<BlockEvent> events;
};

TEST(EvictionIndex, ChoosesWhatAScanChooses) {
  const ModelShape shape = synthetic_shape("llama-3.2-1b");
  const StepTimeModel model(shape, 2, StepTimeConstants::h200());
  const std::size_t per_block = shape.kv_bytes_per_block(kBlock, 2);
  for (int trial = 0; trial < 3; ++trial) {
    WorkloadOptions o;
    o.documents = 40;
    o.doc_tokens = 256 + 64 * trial;
    o.docs_per_request = 3 + trial;
    o.zipf = 0.9 + 0.4 * trial;
    o.requests = 150;
    o.concurrency = 4 + 2 * trial;
    o.layout = trial == 1 ? DocumentLayout::Window : DocumentLayout::Zipf;
    o.seed = 11 + trial;
    const Workload w = make_workload(o);
    const int blocks = 3 * o.docs_per_request * (o.doc_tokens / kBlock) * 2 + 40;
    for (Policy p : all_policies()) {
      SCOPED_TRACE(std::string(to_string(p)) + " trial " + std::to_string(trial));
      SchedulerOptions so;
      so.mode = mode_for(p);
      so.policy = p;
      BlockLog indexed_log, scan_log;
      KvCacheManager indexed(blocks, kBlock, per_block, "m", &indexed_log);
      KvCacheManager scanned(blocks, kBlock, per_block, "m", &scan_log, std::make_unique<ScanLruEviction>());
      auto e1 = make_accounting_executor(model);
      auto e2 = make_accounting_executor(model);
      const ServingResult a = run_scheduler(w, indexed, *e1, so);
      const ServingResult b = run_scheduler(w, scanned, *e2, so);
      if (p != Policy::None) {
        EXPECT_GT(a.evictions, 0) << "the pool must evict for the comparison to mean anything";
      }
      EXPECT_EQ(a.evictions, b.evictions);
      EXPECT_DOUBLE_EQ(a.hit_ratio_tokens, b.hit_ratio_tokens);
      EXPECT_DOUBLE_EQ(a.ttft_ms.p50, b.ttft_ms.p50);
      ASSERT_EQ(indexed_log.events.size(), scan_log.events.size());
      for (std::size_t i = 0; i < indexed_log.events.size(); ++i) {
        const BlockEvent& x = indexed_log.events[i];
        const BlockEvent& y = scan_log.events[i];
        ASSERT_TRUE(x.action == y.action && x.block == y.block && x.segment == y.segment && x.refcount == y.refcount)
            << "block event " << i << " differs";
      }
      indexed.check_invariants();
    }
  }
}

}  // namespace
}  // namespace lazyscope

// The scheduler on the real CPU backend (tiny synthetic model): the accounting mode's hit ratios
// and block events are the real run's; batched decode gives each sequence its own logits.
#include <gtest/gtest.h>

#include <cmath>

#include "engine/serving/scheduler.h"
#include "engine/serving/serving_engine.h"
#include "engine/serving/step_time_model.h"
#include "kernels/cpu/cpu_backend.h"
#include "kernels/synthetic_shapes.h"

namespace lazyscope {
namespace {

constexpr int kBlock = 16;

class BlockLog final : public EventSink {
 public:
  void on_block(const BlockEvent& e) override { events.push_back(e); }
  std::vector<BlockEvent> events;
};

bool same(const BlockEvent& a, const BlockEvent& b) {
  return a.action == b.action && a.block == b.block && a.segment == b.segment && a.refcount == b.refcount &&
         a.shift == b.shift;
}

TEST(SchedulerOnCpu, AccountingModeMatchesTheRealRun) {
  const ModelShape shape = synthetic_shape("tiny");
  CpuBackend cpu(2);
  cpu.load_synthetic(shape, 3);
  const StepTimeModel model(shape, cpu.kv_element_bytes(), StepTimeConstants::h200());
  WorkloadOptions o;
  o.documents = 6;
  o.doc_tokens = 40;
  o.docs_per_request = 2;
  o.zipf = 1.0;
  o.requests = 14;
  o.concurrency = 3;
  o.query_tokens = 5;
  o.output_tokens = 4;
  o.prefix_tokens = 3;
  o.vocab_size = shape.vocab_size;
  const Workload w = make_workload(o);
  const std::size_t per_block = shape.kv_bytes_per_block(kBlock, cpu.kv_element_bytes());
  const int blocks = 20;  // small enough to evict
  for (Policy p : all_policies()) {
    SCOPED_TRACE(to_string(p));
    SchedulerOptions so;
    so.mode = mode_for(p);
    so.policy = p;
    so.step_tokens = 48;
    BlockLog real_log, model_log;
    KvCacheManager real_cache(blocks, kBlock, per_block, "tiny", &real_log);
    KvCacheManager model_cache(blocks, kBlock, per_block, "tiny", &model_log);
    cpu.allocate_pool(blocks, kBlock);
    auto real_exec = make_backend_executor(cpu);
    auto model_exec = make_accounting_executor(model);
    const ServingResult real = run_scheduler(w, real_cache, *real_exec, so);
    const ServingResult sim = run_scheduler(w, model_cache, *model_exec, so);
    EXPECT_EQ(real.backend, "cpu");
    EXPECT_EQ(sim.backend, "accounting");
    EXPECT_EQ(real.requests, o.requests);
    EXPECT_DOUBLE_EQ(real.hit_ratio_tokens, sim.hit_ratio_tokens);
    EXPECT_DOUBLE_EQ(real.hit_ratio_documents, sim.hit_ratio_documents);
    EXPECT_EQ(real.evictions, sim.evictions);
    EXPECT_EQ(real.bytes_copied, sim.bytes_copied);
    EXPECT_EQ(real.steps, sim.steps);
    ASSERT_EQ(real_log.events.size(), model_log.events.size());
    for (std::size_t i = 0; i < real_log.events.size(); ++i) {
      ASSERT_TRUE(same(real_log.events[i], model_log.events[i])) << "block event " << i << " differs";
    }
    if (p != Policy::None) {
      EXPECT_GT(real.hit_ratio_documents, 0.0);
    }
    EXPECT_GT(real.evictions + (p == Policy::None ? 1 : 0), 0) << "the pool never filled: the test is too easy";
  }
}

TEST(SchedulerOnCpu, BatchedDecodeGivesEachSequenceItsOwnLogits) {
  const ModelShape shape = synthetic_shape("tiny");
  CpuBackend cpu(2);
  cpu.load_synthetic(shape, 4);
  const int blocks = 64;
  cpu.allocate_pool(blocks, kBlock);
  KvCacheManager cache(blocks, kBlock, shape.kv_bytes_per_block(kBlock, 4), "tiny");
  // Three sequences sharing documents at different shifts (lazy), each prefilled on its own.
  std::vector<std::vector<int32_t>> docs = {std::vector<int32_t>(20, 7), std::vector<int32_t>(33, 9)};
  for (int i = 0; i < 20; ++i) docs[0][i] = 5 + i;
  for (int i = 0; i < 33; ++i) docs[1][i] = 100 + 3 * i;
  std::vector<RequestPlan> plans;
  std::vector<int32_t> first;
  for (int s = 0; s < 3; ++s) {
    PromptLayout l;
    l.prefix = {1, 2};
    l.documents = s == 0 ? docs : std::vector<std::vector<int32_t>>{docs[1], docs[0]};
    if (s == 2) l.documents.push_back(docs[1]);
    l.query = {300 + s, 301, 302};
    RequestPlan plan = cache.plan(l, Mode::Block, Policy::Lazy);
    for (const SegmentTask& t : plan.encodes) {
      cpu.forward(ForwardStep{t.tokens, t.positions, t.slots, t.table, t.lazy, false}, nullptr);
    }
    const SegmentTask& pt = plan.prompt;
    first.push_back(cpu.forward_greedy(ForwardStep{pt.tokens, pt.positions, pt.slots, pt.table, pt.lazy, false}));
    plans.push_back(std::move(plan));
  }
  std::vector<SegmentTask> tasks;
  for (int s = 0; s < 3; ++s) tasks.push_back(cache.next_decode_step(plans[s], first[s]));
  std::vector<ForwardStep> steps;
  for (const SegmentTask& t : tasks) steps.push_back(ForwardStep{t.tokens, t.positions, t.slots, t.table, t.lazy, false});
  std::vector<float> batched;
  cpu.forward_batch(steps, &batched);
  ASSERT_EQ(batched.size(), 3u * shape.vocab_size);
  std::vector<int32_t> greedy(3);
  cpu.forward_batch_greedy(steps, greedy);
  for (int s = 0; s < 3; ++s) {
    std::vector<float> single;
    ForwardStep one = steps[s];
    one.want_logits = true;
    cpu.forward(one, &single);
    ASSERT_EQ(single.size(), std::size_t(shape.vocab_size));
    double worst = 0;
    int best = 0;
    for (int v = 0; v < shape.vocab_size; ++v) {
      worst = std::max(worst, double(std::fabs(single[v] - batched[std::size_t(s) * shape.vocab_size + v])));
      if (single[v] > single[best]) best = v;
    }
    EXPECT_LE(worst, 1e-5) << "sequence " << s;
    EXPECT_EQ(greedy[s], best) << "sequence " << s;
  }
  // The sequences differ, so equal rows would mean the batch mixed them up.
  EXPECT_NE(std::vector<float>(batched.begin(), batched.begin() + shape.vocab_size),
            std::vector<float>(batched.begin() + shape.vocab_size, batched.begin() + 2 * shape.vocab_size));
  for (auto& p : plans) cache.finish(p, true);
}

}  // namespace
}  // namespace lazyscope

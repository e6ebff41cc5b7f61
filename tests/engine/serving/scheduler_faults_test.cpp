// The scheduler under faults, on a cache that outlives the run (as a Session's pool does): the
// machine fails at a random step, an observer throws, the user cancels at a random step. After
// each, no request holds a block, the pool's invariants hold, and the next run on the same cache
// serves its whole workload.
#include <gtest/gtest.h>

#include <atomic>
#include <random>
#include <stdexcept>

#include "base/error.h"
#include "engine/serving/scheduler.h"
#include "engine/serving/serving_engine.h"
#include "engine/serving/step_time_model.h"
#include "kernels/synthetic_shapes.h"

namespace lazyscope {
namespace {

constexpr int kBlock = 16;

// The accounting executor that fails on its `fail_at`-th step (1-based; 0: never).
class FailingExecutor final : public StepExecutor {
 public:
  FailingExecutor(std::unique_ptr<StepExecutor> inner, int fail_at) : inner_(std::move(inner)), fail_at_(fail_at) {}
  std::string mode() const override { return inner_->mode(); }
  double now_s() override { return inner_->now_s(); }
  void start() override { inner_->start(); }
  void wait_until(double t_s) override { inner_->wait_until(t_s); }
  void run(StepWork& work) override {
    if (++steps_ == fail_at_) throw Error("the device failed (injected at step " + std::to_string(steps_) + ")");
    inner_->run(work);
  }
  double busy_s() const override { return inner_->busy_s(); }

 private:
  std::unique_ptr<StepExecutor> inner_;
  int fail_at_ = 0, steps_ = 0;
};

// Throws from on_step at step `throw_at`, or cancels there.
class FaultyObserver final : public ServingObserver {
 public:
  void on_step(const StepSample&) override {
    ++steps;
    if (steps == throw_at) throw std::runtime_error("observer failed");
    if (steps == cancel_at) cancel.store(true);
  }
  int steps = 0, throw_at = 0, cancel_at = 0;
  std::atomic<bool> cancel{false};
};

struct Fixture {
  ModelShape shape = synthetic_shape("tiny");
  StepTimeModel model{shape, 2, StepTimeConstants::h200()};
  std::size_t bytes_per_block = shape.kv_bytes_per_block(kBlock, 2);
};

Workload random_workload(std::mt19937& rng, int vocab) {
  WorkloadOptions o;
  o.documents = 3 + int(rng() % 10);
  o.doc_tokens = 5 + int(rng() % 50);
  o.docs_per_request = 1 + int(rng() % std::min(4, o.documents));
  o.requests = 20 + int(rng() % 30);
  o.query_tokens = 1 + int(rng() % 16);
  o.output_tokens = 1 + int(rng() % 24);
  o.prefix_tokens = int(rng() % 20);
  o.vocab_size = vocab;
  o.layout = rng() % 3 == 0 ? DocumentLayout::Window : DocumentLayout::Zipf;
  if (rng() % 2) {
    o.rate = 200.0 + double(rng() % 2000);
  } else {
    o.concurrency = 1 + int(rng() % 8);
  }
  o.seed = rng();
  return make_workload(o);
}

void expect_nothing_held(const KvCacheManager& cache, int blocks) {
  ASSERT_NO_THROW(cache.check_invariants());
  const PoolUsage u = cache.usage();
  EXPECT_EQ(u.in_use, 0) << "a failed or cancelled run left blocks referenced";
  EXPECT_EQ(u.free + u.cached, blocks);
  for (const CachedSegment& s : cache.segments()) {
    EXPECT_EQ(s.refcount, 0) << "segment " << s.id;
    EXPECT_TRUE(s.published) << "segment " << s.id << " outlived the run that encoded it";
  }
}

TEST(SchedulerFaults, FailuresAndCancellationsAtRandomStepsReturnEveryBlock) {
  Fixture f;
  std::mt19937 rng(17);
  int failed = 0, observer_failed = 0, cancelled = 0;
  for (int trial = 0; trial < 24; ++trial) {
    const Workload w = random_workload(rng, f.shape.vocab_size);
    const WorkloadOptions& o = w.options;
    const int one_request =
        (o.prefix_tokens + o.docs_per_request * (o.doc_tokens + kBlock) * 2 + o.query_tokens + o.output_tokens) /
            kBlock + 8;
    for (Policy p : all_policies()) {
      SCOPED_TRACE(std::string(to_string(p)) + " trial " + std::to_string(trial));
      const int blocks = one_request + int(rng() % (3 * one_request));
      KvCacheManager cache(blocks, kBlock, f.bytes_per_block, "tiny");
      SchedulerOptions so;
      so.mode = mode_for(p);
      so.policy = p;
      so.step_tokens = 8 + int(rng() % 100);
      so.max_running = 1 + int(rng() % 6);
      so.keep_samples = false;
      // A clean run first: how many steps this workload takes, so that the fault lands inside it.
      int steps = 0;
      {
        KvCacheManager probe(blocks, kBlock, f.bytes_per_block, "tiny");
        auto exec = make_accounting_executor(f.model);
        steps = run_scheduler(w, probe, *exec, so).steps;
      }
      ASSERT_GT(steps, 1);
      const int at = 1 + int(rng() % uint32_t(steps - 1));
      FaultyObserver obs;
      const unsigned fault = rng() % 3;
      FailingExecutor exec(make_accounting_executor(f.model), fault == 0 ? at : 0);
      if (fault == 1) obs.throw_at = at;
      if (fault == 2) obs.cancel_at = at;
      if (fault == 0) {
        EXPECT_THROW(run_scheduler(w, cache, exec, so, &obs, &obs.cancel), Error);
        ++failed;
      } else if (fault == 1) {
        EXPECT_THROW(run_scheduler(w, cache, exec, so, &obs, &obs.cancel), std::runtime_error);
        ++observer_failed;
      } else {
        EXPECT_TRUE(run_scheduler(w, cache, exec, so, &obs, &obs.cancel).cancelled);
        ++cancelled;
      }
      expect_nothing_held(cache, blocks);
      if (HasFailure()) return;
      // The same cache serves the next run whole.
      auto next = make_accounting_executor(f.model);
      const ServingResult r = run_scheduler(w, cache, *next, so);
      EXPECT_EQ(r.requests, o.requests);
      expect_nothing_held(cache, blocks);
      if (HasFailure()) return;
    }
  }
  // Every kind of fault happened, or the test checked less than it claims.
  EXPECT_GT(failed, 0);
  EXPECT_GT(observer_failed, 0);
  EXPECT_GT(cancelled, 0);
}

}  // namespace
}  // namespace lazyscope

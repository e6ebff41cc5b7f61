// Session::serve: a workload through the serving scheduler on one policy's pool of a session.
#include <gtest/gtest.h>

#include "engine/runtime/session.h"
#include "engine/serving/scheduler.h"
#include "engine/workload/workload.h"
#include "support/tiny_model.h"

namespace lazyscope {
namespace {

Workload two_requests() {
  Workload w;
  w.options.requests = 2;
  w.options.concurrency = 2;
  w.options.vocab_size = 64;
  w.prefix = {1, 2, 3};
  w.documents = {{10, 11, 12, 13, 14}, {20, 21, 22, 23}};
  for (int i = 0; i < 2; ++i) {
    WorkloadRequest r;
    r.index = i;
    r.documents = i == 0 ? std::vector<int>{0, 1} : std::vector<int>{1, 0};
    r.query = {30 + i, 31};
    r.output_tokens = 5;
    w.requests.push_back(r);
  }
  return w;
}

TEST(SessionServe, GivesEachRequestTheTokensItGetsAlone) {
  SessionOptions so;
  so.model = testing::tiny_model_dir();
  so.backend = BackendKind::Cpu;
  so.cpu_precision = CpuPrecision::Exact;
  so.policies = {Policy::None, Policy::Lazy};  // the lazy pool is the second share of the backend's
  Session session(so);
  const Workload w = two_requests();
  SchedulerOptions options;
  options.mode = Mode::Block;
  options.policy = Policy::Lazy;
  options.keep_tokens = true;
  const ServingResult served = session.serve(w, options);
  ASSERT_EQ(served.records.size(), 2u);

  Session alone_session(so);
  for (int i = 0; i < 2; ++i) {
    const RequestRecord& rec = served.records[std::size_t(i)];
    ASSERT_EQ(rec.tokens.size(), 5u);
    EXPECT_EQ(rec.output_tokens, 5);
    PreparedRequest prepared;
    prepared.layout = w.layout(w.requests[std::size_t(i)]);
    RunOptions run;
    run.mode = Mode::Block;
    run.policy = Policy::Lazy;
    run.max_new_tokens = 5;
    const RunResult alone = alone_session.submit(prepared, run);
    EXPECT_EQ(rec.tokens, alone.generated_ids) << "request " << i;
  }
  // The pool keeps its history between serve calls: a second run finds every document cached.
  const ServingResult again = session.serve(w, options);
  for (const RequestRecord& rec : again.records) {
    EXPECT_EQ(rec.document_hits, 2);
    EXPECT_EQ(rec.tokens, served.records[std::size_t(rec.index)].tokens);
  }
}

TEST(SessionServe, AStopTokenEndsARequestEarly) {
  SessionOptions so;
  so.model = testing::tiny_model_dir();
  so.backend = BackendKind::Cpu;
  so.policies = {Policy::Lazy};
  Session session(so);
  const Workload w = two_requests();
  SchedulerOptions options;
  options.mode = Mode::Block;
  options.policy = Policy::Lazy;
  options.keep_tokens = true;
  const ServingResult first = session.serve(w, options);
  ASSERT_EQ(first.records[0].tokens.size(), 5u);
  // Stop on request 0's third token: it ends there, the stop token included.
  const int32_t stop = first.records[0].tokens[2];
  options.stop_tokens = {stop};
  const ServingResult stopped = session.serve(w, options);
  const std::vector<int32_t>& t = stopped.records[0].tokens;
  ASSERT_FALSE(t.empty());
  EXPECT_EQ(t.back(), stop);
  EXPECT_LE(t.size(), 3u);
  EXPECT_EQ(stopped.records[0].output_tokens, int(t.size()));
  // Without keep_tokens nothing is kept.
  options.keep_tokens = false;
  EXPECT_TRUE(session.serve(w, options).records[0].tokens.empty());
}

}  // namespace
}  // namespace lazyscope

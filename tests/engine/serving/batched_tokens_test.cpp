// Through the scheduler, a request served in a batch (batched decode, shared and in-flight
// documents, chunked prefill) generates the greedy tokens it generates alone, and lazy's tokens
// are materialized's: on the exact CPU backend, and on the CUDA backend when a GPU is visible.
#include <gtest/gtest.h>

#include <cstdio>

#include "engine/serving/scheduler.h"
#include "engine/serving/serving_engine.h"
#include "kernels/backend.h"
#include "kernels/synthetic_shapes.h"
#include "support/progress.h"

namespace lazyscope {
namespace {

constexpr int kBlock = 16;
constexpr int kBlocks = 256;

Workload shared_documents_workload(int vocab) {
  WorkloadOptions o;
  o.documents = 5;
  o.doc_tokens = 40;
  o.docs_per_request = 3;
  o.zipf = 1.2;
  o.requests = 8;
  o.concurrency = 8;
  o.query_tokens = 6;
  o.output_tokens = 10;
  o.prefix_tokens = 2;
  o.vocab_size = vocab;
  o.seed = 3;
  return make_workload(o);
}

std::vector<std::vector<int32_t>> serve(Backend& backend, const Workload& w, Policy policy) {
  KvCacheManager cache(kBlocks, kBlock, 1, "tokens-test");
  backend.allocate_pool(kBlocks, kBlock);
  SchedulerOptions so;
  so.mode = mode_for(policy);
  so.policy = policy;
  so.step_tokens = 64;  // chunked prefill beside the decodes
  so.keep_tokens = true;
  auto exec = make_backend_executor(backend);
  const ServingResult r = run_scheduler(w, cache, *exec, so);
  test::progress(policy == Policy::Lazy ? "served, lazy: requests" : "served, materialized: requests",
                 int(w.requests.size()));
  std::vector<std::vector<int32_t>> out;
  for (const RequestRecord& rec : r.records) out.push_back(rec.tokens);
  return out;
}

// Each request alone: a workload of that one request on a fresh pool.
std::vector<std::vector<int32_t>> serve_alone(Backend& backend, const Workload& w, Policy policy) {
  std::vector<std::vector<int32_t>> out;
  for (const WorkloadRequest& req : w.requests) {
    Workload one = w;
    one.requests = {req};
    one.options.requests = 1;
    one.options.concurrency = 1;
    out.push_back(serve(backend, one, policy).at(0));
  }
  return out;
}

int differing(const std::vector<std::vector<int32_t>>& a, const std::vector<std::vector<int32_t>>& b,
              const char* what) {
  int n = 0;
  for (std::size_t r = 0; r < a.size(); ++r) {
    EXPECT_EQ(a[r].size(), 10u) << what << ", request " << r;
    if (a[r] != b[r]) {
      ++n;
      std::printf("%s: request %zu differs\n", what, r);
    }
  }
  return n;
}

void check_backend(Backend& backend, const ModelShape& shape, int allowed_near_ties) {
  const Workload w = shared_documents_workload(shape.vocab_size);
  const auto lazy_batched = serve(backend, w, Policy::Lazy);
  const auto lazy_alone = serve_alone(backend, w, Policy::Lazy);
  const auto mat_batched = serve(backend, w, Policy::Materialized);
  const auto mat_alone = serve_alone(backend, w, Policy::Materialized);
  EXPECT_LE(differing(lazy_batched, lazy_alone, "lazy batched vs alone"), allowed_near_ties);
  EXPECT_LE(differing(mat_batched, mat_alone, "materialized batched vs alone"), allowed_near_ties);
  EXPECT_LE(differing(lazy_batched, mat_batched, "lazy vs materialized, batched"), allowed_near_ties);
  EXPECT_LE(differing(lazy_alone, mat_alone, "lazy vs materialized, alone"), allowed_near_ties);
  // The requests differ (distinct queries): equal outputs would mean the batch mixed them up.
  int distinct = 0;
  for (std::size_t r = 1; r < lazy_batched.size(); ++r) distinct += lazy_batched[r] != lazy_batched[0] ? 1 : 0;
  EXPECT_GT(distinct, 0);
}

TEST(BatchedTokens, CpuBatchEqualsAloneAndLazyEqualsMaterialized) {
  const ModelShape shape = synthetic_shape("tiny");
  std::unique_ptr<Backend> cpu = make_backend(BackendKind::Cpu, 2);
  cpu->load_synthetic(shape, 5);
  check_backend(*cpu, shape, 0);  // fp32 reference: exactly the same tokens
}

TEST(BatchedTokens, CudaBatchEqualsAloneAndLazyEqualsMaterialized) {
  if (cuda_device_count() == 0) GTEST_SKIP() << "no CUDA GPU visible: this GPU test needs one (skipped, not passed)";
  const ModelShape shape = synthetic_shape("small");
  std::unique_ptr<Backend> gpu = make_backend(BackendKind::Cuda);
  gpu->load_synthetic(shape, 5);
  // bf16: a greedy flip where the top-2 logits are within rounding may happen; at most one of
  // the eight requests per comparison.
  check_backend(*gpu, shape, 1);
}

}  // namespace
}  // namespace lazyscope

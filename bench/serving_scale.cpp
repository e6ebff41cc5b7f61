// bench_serving_scale: accounting mode at scale on one core. Serves 10,000 requests of the
// Llama-3.1-70B shape (the paper preset's documents: 100 x 2,048 tokens, 5 per request, alpha 2.1,
// concurrency 16) per policy, at a budget of 16 documents (10 GiB), and prints the host seconds
// (wall and CPU of this thread) per policy, beside the target of 10 s.
// Usage: bench_serving_scale [--requests N] [--shape NAME] [--budget-gib G]
#include <chrono>
#include <cstdio>
#include <ctime>
#include <string>

#include "base/error.h"
#include "engine/serving/serving_engine.h"

using namespace lazyscope;

namespace {

double thread_cpu_s() {
  timespec t{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return double(t.tv_sec) + 1e-9 * double(t.tv_nsec);
}

}  // namespace

int main(int argc, char** argv) {
  int requests = 10000;
  std::string shape = "llama-3.1-70b";
  double budget_gib = 10;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (i + 1 >= argc) {
      std::fprintf(stderr, "usage: bench_serving_scale [--requests N] [--shape NAME] [--budget-gib G]\n");
      return 2;
    }
    const std::string v = argv[++i];
    if (a == "--requests") requests = std::stoi(v);
    else if (a == "--shape") shape = v;
    else if (a == "--budget-gib") budget_gib = std::stod(v);
    else {
      std::fprintf(stderr, "unknown option %s\n", a.c_str());
      return 2;
    }
  }
  try {
    ServingConfig config;
    config.synthetic = shape;
    ServingEngine engine(config);
    WorkloadOptions o;  // the paper preset's documents and arrivals
    o.requests = requests;
    o.vocab_size = engine.shape().vocab_size;
    const Workload w = make_workload(o);
    const int64_t budget = int64_t(budget_gib * double(1ll << 30));
    std::printf("### accounting mode, %s, %d requests, %.0f GiB per policy, one thread\n\n", shape.c_str(), requests,
                budget_gib);
    std::printf("| policy | host wall s | host CPU s | target s | simulated makespan s | tok-hit %% | evicted blocks | steps |\n");
    std::printf("|---|---:|---:|---:|---:|---:|---:|---:|\n");
    for (Policy p : all_policies()) {
      SchedulerOptions so;
      so.keep_samples = false;
      const auto t0 = std::chrono::steady_clock::now();
      const double c0 = thread_cpu_s();
      const ServingResult r = engine.run(w, budget, p, so);
      const double cpu = thread_cpu_s() - c0;
      const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      std::printf("| %s | %.2f | %.2f | 10 | %.1f | %.2f | %lld | %lld |\n", r.policy.c_str(), wall, cpu, r.makespan_s,
                  100 * r.hit_ratio_tokens, (long long)r.evictions, (long long)r.steps);
      std::fflush(stdout);
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
  return 0;
}

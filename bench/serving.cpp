// bench_serving: the serving engine end to end on the GPU (continuous batching through the
// scheduler), per policy, with the accounting model of the same workload beside each real run.
//   1. TTFT p50/p99 and throughput vs concurrency (closed loop) and vs request rate (open loop),
//      Llama-3.2-1B and Llama-3.1-8B synthetic shapes, lazy / materialized ratios from the same run;
//   2. decode tokens/s vs batch size (1-64) through the scheduler, against the weight + KV
//      bandwidth bound, and the scheduler's host time per step;
//   3. accounting-mode TTFT and throughput over the real run's, per row.
// Usage: bench_serving [--backend cuda|cpu] [--shapes a,b] [--seconds N] (a soft time limit)
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "base/error.h"
#include "engine/serving/serving_engine.h"

using namespace lazyscope;

namespace {

using Clock = std::chrono::steady_clock;
Clock::time_point g_start = Clock::now();
double g_limit_s = 400;
double elapsed() { return std::chrono::duration<double>(Clock::now() - g_start).count(); }

std::vector<std::string> split(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream ss(s);
  std::string item;
  while (std::getline(ss, item, ',')) out.push_back(item);
  return out;
}

struct Pair {
  ServingResult real, model;
};

Pair run_both(ServingEngine& real, ServingEngine& model, const Workload& w, int64_t budget, Policy p) {
  SchedulerOptions so;
  Pair out;
  out.real = real.run(w, budget, p, so);
  out.model = model.run(w, budget, p, so);
  return out;
}

double ratio(double a, double b) { return b > 0 ? a / b : 0.0; }

void print_header(const char* first) {
  std::printf("| %s | policy | tok-hit %% | TTFT p50 ms | TTFT p99 ms | TPOT p50 ms | out tok/s | all tok/s | "
              "preempt | host %% | model TTFT p50 / real | model all tok/s / real |\n",
              first);
  std::printf("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n");
}

void print_row(const std::string& point, const Pair& r) {
  std::printf("| %s | %s | %.2f | %.1f | %.1f | %.2f | %.1f | %.0f | %lld | %.2f | %.2f | %.2f |\n", point.c_str(),
              r.real.policy.c_str(), 100 * r.real.hit_ratio_tokens, r.real.ttft_ms.p50, r.real.ttft_ms.p99,
              r.real.tpot_ms.p50, r.real.output_tok_s, r.real.throughput_tok_s, (long long)r.real.preemptions,
              100 * r.real.host_fraction, ratio(r.model.ttft_ms.p50, r.real.ttft_ms.p50),
              ratio(r.model.throughput_tok_s, r.real.throughput_tok_s));
  std::fflush(stdout);
}

void print_ratios(const std::string& point, const std::map<std::string, Pair>& by_policy) {
  auto lazy = by_policy.find("lazy"), mat = by_policy.find("materialized");
  if (lazy == by_policy.end() || mat == by_policy.end()) return;
  std::printf("| %s | lazy / materialized | %.2fx hit | %.2fx lower | %.2fx lower | | %.2fx | %.2fx | | | | |\n",
              point.c_str(), ratio(lazy->second.real.hit_ratio_tokens, mat->second.real.hit_ratio_tokens),
              ratio(mat->second.real.ttft_ms.p50, lazy->second.real.ttft_ms.p50),
              ratio(mat->second.real.ttft_ms.p99, lazy->second.real.ttft_ms.p99),
              ratio(lazy->second.real.output_tok_s, mat->second.real.output_tok_s),
              ratio(lazy->second.real.throughput_tok_s, mat->second.real.throughput_tok_s));
}

WorkloadOptions rag(const ModelShape& shape, int doc_tokens, int requests) {
  WorkloadOptions o;
  o.documents = 100;
  o.doc_tokens = doc_tokens;
  o.docs_per_request = 5;
  o.zipf = 2.1;
  o.requests = requests;
  o.query_tokens = 16;
  o.output_tokens = 32;
  o.vocab_size = shape.vocab_size;
  return o;
}

void serving_tables(const std::string& backend, const std::string& shape_name) {
  ServingConfig rc;
  rc.backend = backend;
  rc.synthetic = shape_name;
  ServingEngine real(rc);
  ServingConfig mc;
  mc.backend = "accounting";
  mc.synthetic = shape_name;
  ServingEngine model(mc);
  const ModelShape& shape = real.shape();
  const bool big = shape.hidden_size >= 4096;
  // 1B: the paper's 1 GiB; 8B: a budget that holds 16 documents of 2,048 tokens.
  const int64_t budget = big ? int64_t(16) * (2048 / 16) * int64_t(real.bytes_per_block()) : int64_t(1) << 30;
  const int requests = big ? 48 : 96;
  const std::vector<Policy> policies = {Policy::Materialized, Policy::Lazy};
  {  // warm-up: graphs, cuBLAS handles, first-touch of the pool
    WorkloadOptions o = rag(shape, 256, 8);
    o.concurrency = 4;
    real.run(make_workload(o), budget, Policy::Lazy, SchedulerOptions{});
  }
  std::printf("\n### %s on %s: closed loop, 100 docs x 2048 tokens, 5 per request, alpha 2.1, %d requests, "
              "16-token queries, 32 output tokens, KV budget %.2f GiB per policy\n\n",
              shape_name.c_str(), backend.c_str(), requests, double(budget) / double(1 << 30));
  print_header("concurrency");
  for (int c : big ? std::vector<int>{4, 16} : std::vector<int>{1, 4, 16, 32}) {
    if (elapsed() > g_limit_s) {
      std::printf("| %d | skipped: the bench's time limit | | | | | | | | | | |\n", c);
      continue;
    }
    WorkloadOptions o = rag(shape, 2048, requests);
    o.concurrency = c;
    const Workload w = make_workload(o);
    std::map<std::string, Pair> by;
    for (Policy p : policies) {
      by[to_string(p)] = run_both(real, model, w, budget, p);
      print_row(std::to_string(c), by[to_string(p)]);
    }
    print_ratios(std::to_string(c), by);
  }
  const int open_requests = big ? 24 : 48;  // an open-loop run lasts at least requests / rate
  std::printf("\n### %s on %s: open loop (Poisson), same documents and budget, %d requests\n\n", shape_name.c_str(),
              backend.c_str(), open_requests);
  print_header("rate req/s");
  for (double rate : big ? std::vector<double>{4, 8} : std::vector<double>{8, 24, 64}) {
    if (elapsed() > g_limit_s) {
      std::printf("| %.0f | skipped: the bench's time limit | | | | | | | | | | |\n", rate);
      continue;
    }
    WorkloadOptions o = rag(shape, 2048, open_requests);
    o.rate = rate;
    const Workload w = make_workload(o);
    std::map<std::string, Pair> by;
    for (Policy p : policies) {
      by[to_string(p)] = run_both(real, model, w, budget, p);
      print_row(std::to_string(int(rate)), by[to_string(p)]);
    }
    print_ratios(std::to_string(int(rate)), by);
  }
}

void decode_table(const std::string& backend, const std::string& shape_name) {
  ServingConfig rc;
  rc.backend = backend;
  rc.synthetic = shape_name;
  ServingEngine real(rc);
  const ModelShape& shape = real.shape();
  const double weight_bytes =
      2.0 * (double(shape.num_layers) * (double(shape.hidden_size) * (2.0 * shape.q_dim() + 2.0 * shape.kv_dim()) +
                                         3.0 * shape.hidden_size * shape.intermediate_size) +
             double(shape.vocab_size) * shape.hidden_size);
  const double kv_per_token = 2.0 * shape.num_layers * shape.kv_dim() * 2.0;
  const double bandwidth = 4.26e12;  // device-to-device copy, bench/cuda/NOTES.md round 5
  std::printf("\n### decode tokens/s vs batch size, %s on %s, through the scheduler (lazy; one 16-token document "
              "+ 16-token query per sequence, 128 output tokens; median over pure-decode steps)\n\n",
              shape_name.c_str(), backend.c_str());
  std::printf("| batch | decode tok/s | vs batch 1 | bound tok/s (weights + KV at 4.26 TB/s) | %% of bound | step ms | "
              "scheduler host %% of step |\n|---:|---:|---:|---:|---:|---:|---:|\n");
  double base = 0;
  for (int b : {1, 2, 4, 8, 16, 32, 64}) {
    if (elapsed() > g_limit_s) {
      std::printf("| %d | skipped: the bench's time limit | | | | | |\n", b);
      continue;
    }
    WorkloadOptions o;
    o.documents = b;
    o.doc_tokens = 16;
    o.docs_per_request = 1;
    o.zipf = 0;
    o.requests = b;
    o.concurrency = b;
    o.query_tokens = 16;
    o.output_tokens = 128;
    o.vocab_size = shape.vocab_size;
    SchedulerOptions so;
    const ServingResult r = real.run(make_workload(o), int64_t(1) << 30, Policy::Lazy, so);
    std::vector<double> step_s;
    double context = 0;
    for (const StepSample& s : r.samples) {
      if (s.prefill_tokens == 0 && s.decode_batch == b) step_s.push_back(s.duration_s);
    }
    if (step_s.empty()) continue;
    std::sort(step_s.begin(), step_s.end());
    const double step = step_s[step_s.size() / 2];
    context = 1 + 16 + 16 + 64;  // mean attended tokens per sequence over the run
    const double tok_s = b / step;
    if (b == 1) base = tok_s;
    const double bound = b / ((weight_bytes + b * context * kv_per_token) / bandwidth);
    std::printf("| %d | %.1f | %.2fx | %.0f | %.0f %% | %.3f | %.2f |\n", b, tok_s, base > 0 ? tok_s / base : 0, bound,
                100 * tok_s / bound, 1e3 * step, 100 * r.host_fraction);
    std::fflush(stdout);
  }
}

}  // namespace

int main(int argc, char** argv) {
  std::string backend = "cuda";
  std::vector<std::string> shapes = {"llama-3.2-1b", "llama-3.1-8b"};
  bool serving = true, decode = true;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) throw Error(a + " needs a value");
      return argv[++i];
    };
    if (a == "--backend") backend = value();
    else if (a == "--shapes") shapes = split(value());
    else if (a == "--seconds") g_limit_s = std::stod(value());
    else if (a == "--decode-only") serving = false;
    else if (a == "--serving-only") decode = false;
    else {
      std::fprintf(stderr, "usage: bench_serving [--backend cuda|cpu] [--shapes a,b] [--seconds N] [--decode-only|--serving-only]\n");
      return 2;
    }
  }
  try {
    if (decode) decode_table(backend, shapes.front());
    if (serving) {
      for (const std::string& s : shapes) serving_tables(backend, s);
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
  std::printf("\ntotal %.1f s\n", elapsed());
  return 0;
}

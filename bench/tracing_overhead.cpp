// What a device trace costs: decode tokens/s and TTFT of the same RAG request through the engine
// (Session::submit, CUDA backend, synthetic Llama shapes), untraced and with the CUPTI tracer of
// `generate --trace-gpu` (kernels, memcpys, memsets, runtime API and driver launches), in one process,
// timed in alternation (ABBA within every repeat, flipped on odd repeats). The trace is drained after
// each traced request, outside submit's timers as in the engine; its flush is timed and shown. Every
// request starts from an empty KV cache, so TTFT covers every document encode and the prompt's
// prefill. Both arms keep the engine's always-on NVTX ranges. Prints a table; run on the GPU machine.
//
//   bench_tracing_overhead [--shapes llama-3.2-1b,llama-3.1-8b] [--context 10240] [--steps 64] [--repeats 6]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <sstream>
#include <string>
#include <vector>

#include "engine/model/config.h"
#include "engine/runtime/session.h"
#include "kernels/backend.h"
#include "kernels/device_trace.h"

using namespace lazyscope;

namespace {

struct Run {
  double ttft_ms = 0.0;
  double decode_tps = 0.0;
  double flush_ms = 0.0;
  std::size_t records = 0;
  uint64_t dropped = 0;
};

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n == 0 ? 0.0 : n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

double quantile(std::vector<double> v, double q) {
  std::sort(v.begin(), v.end());
  const double at = q * double(v.size() - 1);
  const std::size_t lo = std::size_t(at), hi = std::min(v.size() - 1, lo + 1);
  return v[lo] + (v[hi] - v[lo]) * (at - double(lo));
}

Request rag_request(int context, int steps, int vocab) {
  Request r;
  r.prefix_ids = std::vector<int32_t>{1, 2, 3, 4, 5, 6, 7, 8};
  const int documents = std::max(1, context / 1024);
  for (int d = 0; d < documents; ++d) {
    std::vector<int32_t> doc(std::size_t(context / documents - 16));
    for (std::size_t i = 0; i < doc.size(); ++i) doc[i] = int32_t((100 + d * 7919 + int(i) * 31) % (vocab - 1) + 1);
    r.document_ids.push_back(std::move(doc));
  }
  r.query_ids = std::vector<int32_t>(32, 42);
  r.max_new_tokens = steps + 1;
  return r;
}

Run run_once(Session& session, const Request& request, bool traced) {
  std::string why;
  std::unique_ptr<DeviceTracer> tracer;
  if (traced) {
    tracer = make_device_tracer(&why);
    if (!tracer) throw std::runtime_error("no device trace: " + why);
  }
  session.clear_cache();
  RunOptions options;
  options.keep_logits = false;
  const RunResult result = session.submit(request, options);
  Run run;
  run.ttft_ms = result.ttft_ms;
  run.decode_tps = result.decode_ms_per_token > 0.0 ? 1000.0 / result.decode_ms_per_token : 0.0;
  if (tracer) {
    const auto t0 = std::chrono::steady_clock::now();
    const DeviceActivity activity = tracer->drain();
    run.flush_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    run.records = activity.kernels.size() + activity.memcpys.size() + activity.memsets.size() + activity.api_calls.size();
    run.dropped = activity.dropped_records;
  }
  return run;
}

std::vector<std::string> split(const std::string& list) {
  std::vector<std::string> out;
  std::stringstream ss(list);
  for (std::string item; std::getline(ss, item, ',');) {
    if (!item.empty()) out.push_back(item);
  }
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    std::vector<std::string> shapes{"llama-3.2-1b", "llama-3.1-8b"};
    int context = 10240, steps = 64, repeats = 6;
    for (int i = 1; i + 1 < argc; i += 2) {
      if (!std::strcmp(argv[i], "--shapes")) shapes = split(argv[i + 1]);
      else if (!std::strcmp(argv[i], "--context")) context = std::atoi(argv[i + 1]);
      else if (!std::strcmp(argv[i], "--steps")) steps = std::atoi(argv[i + 1]);
      else if (!std::strcmp(argv[i], "--repeats")) repeats = std::atoi(argv[i + 1]);
      else throw std::runtime_error(std::string("unknown option ") + argv[i]);
    }
    if (context < 1024 || steps < 2 || repeats < 2) throw std::runtime_error("need --context >= 1024, --steps >= 2, --repeats >= 2");
    if (cuda_device_count() == 0) {
      std::printf("no CUDA GPU visible: nothing to measure\n");
      return 0;
    }
    std::printf("# Device-trace overhead (CUPTI: kernels, memcpy, memset, runtime API, driver launches)\n\n");
    std::printf("Same request per shape: prefix 8 + %d documents + query 32 tokens (~%d prompt tokens), %d decode steps, "
                "empty KV cache before every request; %d repeats, each ABBA (untraced, traced, traced, untraced; "
                "flipped on odd repeats). Slowdown = median over repeats of the per-repeat ratio, with min..max.\n\n",
                std::max(1, context / 1024), context, steps, repeats);
    std::printf("| shape | untraced decode tok/s | traced decode tok/s | decode slowdown | min..max | untraced TTFT ms | "
                "traced TTFT ms | TTFT slowdown | min..max | records / request | dropped | flush ms | untraced before CUPTI, tok/s |\n");
    std::printf("|---|---:|---:|---:|---|---:|---:|---:|---|---:|---:|---:|---:|\n");
    for (const std::string& shape : shapes) {
      SessionOptions o;
      o.synthetic = shape;
      o.backend = BackendKind::Cuda;
      o.kv_budget_bytes = 4ull << 30;
      Session session(o, nullptr);
      const Request request = rag_request(context, steps, session.config().shape.vocab_size);
      // Warm-up without CUPTI ever loaded (graph capture, cuBLAS heuristics), then one traced run.
      run_once(session, request, false);
      const Run before = run_once(session, request, false);
      run_once(session, request, true);
      std::vector<double> decode_ratio, ttft_ratio, plain_tps, traced_tps, plain_ttft, traced_ttft, flush, records;
      uint64_t dropped = 0;
      for (int r = 0; r < repeats; ++r) {
        const bool traced_first = r % 2 == 1;
        Run runs[4];
        for (int k = 0; k < 4; ++k) runs[k] = run_once(session, request, (k == 0 || k == 3) == traced_first);
        const Run& a1 = runs[0];
        const Run& b1 = runs[1];
        const Run& b2 = runs[2];
        const Run& a2 = runs[3];
        const Run p1 = traced_first ? b1 : a1, p2 = traced_first ? b2 : a2;
        const Run t1 = traced_first ? a1 : b1, t2 = traced_first ? a2 : b2;
        const double p_tps = 0.5 * (p1.decode_tps + p2.decode_tps), t_tps = 0.5 * (t1.decode_tps + t2.decode_tps);
        const double p_ttft = 0.5 * (p1.ttft_ms + p2.ttft_ms), t_ttft = 0.5 * (t1.ttft_ms + t2.ttft_ms);
        plain_tps.push_back(p_tps);
        traced_tps.push_back(t_tps);
        plain_ttft.push_back(p_ttft);
        traced_ttft.push_back(t_ttft);
        decode_ratio.push_back(p_tps / t_tps - 1.0);  // time per token, traced over untraced
        ttft_ratio.push_back(t_ttft / p_ttft - 1.0);
        flush.push_back(0.5 * (t1.flush_ms + t2.flush_ms));
        records.push_back(0.5 * double(t1.records + t2.records));
        dropped += t1.dropped + t2.dropped;
      }
      std::printf("| %s | %.1f | %.1f | %+.2f %% | %+.2f .. %+.2f %% | %.1f | %.1f | %+.2f %% | %+.2f .. %+.2f %% | %.0f | "
                  "%llu | %.2f | %.1f |\n",
                  shape.c_str(), median(plain_tps), median(traced_tps), 100.0 * median(decode_ratio),
                  100.0 * quantile(decode_ratio, 0.0), 100.0 * quantile(decode_ratio, 1.0), median(plain_ttft),
                  median(traced_ttft), 100.0 * median(ttft_ratio), 100.0 * quantile(ttft_ratio, 0.0),
                  100.0 * quantile(ttft_ratio, 1.0), median(records), static_cast<unsigned long long>(dropped),
                  median(flush), before.decode_tps);
      std::fflush(stdout);
    }
    std::printf("\nDecode slowdown compares time per token (untraced tok/s / traced tok/s - 1); target <= 3 %%.\n");
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
  return 0;
}

// What a device trace costs: decode tokens/s and TTFT of the same RAG request through the engine
// (Session::submit, CUDA backend, synthetic Llama shapes), untraced and with the CUPTI tracer of
// `generate --trace-gpu`, in one process, timed in alternation (a palindrome A B C C B A in every
// repeat, the arms rotated from repeat to repeat). Two traced arms: the default (every kernel of the
// encodes, copies, prefill and first decode step; one graph-level record per CUDA graph launch for
// the later decode steps; memcpy, memset, runtime and driver API records throughout) and every
// kernel of every step. The session drains the trace after each request, outside its timers as in
// the engine; the drain's time is shown. Each timed request follows an untimed warm-up under the
// same arm (see run_once). Every request starts from an empty KV cache, so TTFT covers
// every document encode and the prompt's prefill. Every arm keeps the engine's always-on NVTX
// ranges. The tracer detaches CUPTI when it goes (cuptiFinalize), so untraced arms after traced ones
// run without CUPTI; the median of three untraced runs before CUPTI was first loaded is shown beside
// them as the check. Prints a table; run on the GPU machine.
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
  std::size_t kernels = 0, graphs = 0, records = 0;
  uint64_t dropped = 0;
};

// Keeps the last request's device activity (the session hands it over before the request ends).
class ActivitySink final : public EventSink {
 public:
  void on_device_activity(const DeviceActivity& a) override { last = a; }
  DeviceActivity last;
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

enum Arm { kUntraced = 0, kDefault = 1, kEveryKernel = 2 };

// One timed request on `session` with the arm's tracer installed (none for the untraced arm).
// Installing a tracer drops the backend's CUDA graphs; an untimed warm-up request (the same prompt,
// four tokens) captures them again under it, for every arm alike, so the timed request replays
// graphs instantiated under its own tracer, as in a traced session.
Run run_once(Session& session, ActivitySink& sink, const Request& request, int arm) {
  session.set_device_tracer(nullptr);  // the previous arm's tracer goes first (one CUPTI tracer at a time)
  std::unique_ptr<DeviceTracer> tracer;
  if (arm != kUntraced) {
    DeviceTraceOptions options;
    if (arm == kEveryKernel) options.kernel_steps = -1;
    std::string why;
    tracer = make_device_tracer(options, &why);
    if (!tracer) throw std::runtime_error("no device trace: " + why);
  }
  if (tracer) session.set_device_tracer(std::move(tracer));
  RunOptions options;
  options.keep_logits = false;
  Request warm = request;
  warm.max_new_tokens = 4;
  session.clear_cache();
  session.submit(warm, options);
  session.clear_cache();
  const RunResult result = session.submit(request, options);
  Run run;
  run.ttft_ms = result.ttft_ms;
  run.decode_tps = result.decode_ms_per_token > 0.0 ? 1000.0 / result.decode_ms_per_token : 0.0;
  if (arm != kUntraced) {
    const DeviceActivity& a = sink.last;
    run.flush_ms = a.flush_ms;
    run.kernels = a.kernels.size();
    run.graphs = a.graphs.size();
    run.records = a.kernels.size() + a.graphs.size() + a.memcpys.size() + a.memsets.size() + a.api_calls.size();
    run.dropped = a.dropped_records;
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
    std::printf("# Device-trace overhead (CUPTI: kernels, CUDA graphs, memcpy, memset, runtime and driver API)\n\n");
    std::printf("Same request per shape: prefix 8 + %d documents + query 32 tokens (~%d prompt tokens), %d decode steps, "
                "empty KV cache before every request; %d repeats, each timing every arm twice in a palindrome (A B C C B A, "
                "the arms rotated every repeat). Slowdown = median over repeats of the per-repeat ratio to the untraced "
                "arm, with min..max. Default = what generate --trace-gpu records (kernel detail for the encodes, prefill "
                "and decode step 1, one graph record per later decode step); every kernel = --trace-kernel-steps all.\n\n",
                std::max(1, context / 1024), context, steps, repeats);
    std::printf("| shape | untraced decode tok/s | default: decode tok/s | decode slowdown | min..max | every kernel: decode "
                "slowdown | untraced TTFT ms | default: TTFT ms | TTFT slowdown | min..max | every kernel: TTFT slowdown | "
                "default: kernels + graphs / records per request | every kernel: kernels / records | dropped | drain ms "
                "(default / every kernel) | untraced before CUPTI was loaded, tok/s | default vs before CUPTI |\n");
    std::printf("|---|---:|---:|---:|---|---:|---:|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|\n");
    for (const std::string& shape : shapes) {
      SessionOptions o;
      o.synthetic = shape;
      o.backend = BackendKind::Cuda;
      o.kv_budget_bytes = 4ull << 30;
      ActivitySink sink;
      Session session(o, &sink);
      const Request request = rag_request(context, steps, session.config().shape.vocab_size);
      // Untraced runs before CUPTI was ever loaded (the first one warms cuBLAS up).
      run_once(session, sink, request, kUntraced);
      std::vector<double> before_tps;
      for (int i = 0; i < 3; ++i) before_tps.push_back(run_once(session, sink, request, kUntraced).decode_tps);
      const double before = median(before_tps);
      std::vector<double> tps[3], ttft[3], decode_ratio[3], ttft_ratio[3], flush[3], kernels[3], graphs[3], records[3];
      uint64_t dropped = 0;
      for (int r = 0; r < repeats; ++r) {
        const int order[3] = {r % 3, (r + 1) % 3, (r + 2) % 3};
        Run sum[3];
        for (int k = 0; k < 6; ++k) {
          const int arm = order[k < 3 ? k : 5 - k];
          const Run run = run_once(session, sink, request, arm);
          sum[arm].decode_tps += 0.5 * run.decode_tps;
          sum[arm].ttft_ms += 0.5 * run.ttft_ms;
          sum[arm].flush_ms += 0.5 * run.flush_ms;
          sum[arm].kernels += run.kernels / 2;
          sum[arm].graphs += run.graphs / 2;
          sum[arm].records += run.records / 2;
          sum[arm].dropped += run.dropped;
        }
        for (int arm = 0; arm < 3; ++arm) {
          tps[arm].push_back(sum[arm].decode_tps);
          ttft[arm].push_back(sum[arm].ttft_ms);
          decode_ratio[arm].push_back(sum[kUntraced].decode_tps / sum[arm].decode_tps - 1.0);  // time per token
          ttft_ratio[arm].push_back(sum[arm].ttft_ms / sum[kUntraced].ttft_ms - 1.0);
        }
        for (int arm = 1; arm < 3; ++arm) {
          flush[arm].push_back(sum[arm].flush_ms);
          kernels[arm].push_back(double(sum[arm].kernels));
          graphs[arm].push_back(double(sum[arm].graphs));
          records[arm].push_back(double(sum[arm].records));
        }
        dropped += sum[kDefault].dropped + sum[kEveryKernel].dropped;
      }
      std::printf("| %s | %.1f | %.1f | %+.2f %% | %+.2f .. %+.2f %% | %+.2f %% | %.1f | %.1f | %+.2f %% | %+.2f .. %+.2f %% | "
                  "%+.2f %% | %.0f + %.0f / %.0f | %.0f / %.0f | %llu | %.1f / %.1f | %.1f | %+.2f %% |\n",
                  shape.c_str(), median(tps[kUntraced]), median(tps[kDefault]), 100.0 * median(decode_ratio[kDefault]),
                  100.0 * quantile(decode_ratio[kDefault], 0.0), 100.0 * quantile(decode_ratio[kDefault], 1.0),
                  100.0 * median(decode_ratio[kEveryKernel]), median(ttft[kUntraced]), median(ttft[kDefault]),
                  100.0 * median(ttft_ratio[kDefault]), 100.0 * quantile(ttft_ratio[kDefault], 0.0),
                  100.0 * quantile(ttft_ratio[kDefault], 1.0), 100.0 * median(ttft_ratio[kEveryKernel]),
                  median(kernels[kDefault]), median(graphs[kDefault]), median(records[kDefault]),
                  median(kernels[kEveryKernel]), median(records[kEveryKernel]), static_cast<unsigned long long>(dropped),
                  median(flush[kDefault]), median(flush[kEveryKernel]), before,
                  100.0 * (before / median(tps[kDefault]) - 1.0));
      std::fflush(stdout);
    }
    std::printf("\nDecode slowdown compares time per token (untraced tok/s / traced tok/s - 1); target <= 3 %% for "
                "the default trace, decode and TTFT.\n");
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
  return 0;
}

#pragma once
// What a serving run measured, as plain structs (the CLI prints them, the workbench plots them).
#include <cstdint>
#include <string>
#include <vector>

namespace lazyscope {

struct Percentiles {
  double p50 = 0, p90 = 0, p99 = 0, mean = 0;
};
// Nearest-rank percentiles of `values` (all zero when empty).
Percentiles percentiles(std::vector<double> values);

// One request, times in seconds since the run started (the run's clock: wall or simulated).
struct RequestRecord {
  int index = 0;
  double arrival_s = 0, admitted_s = 0, first_token_s = 0, finish_s = 0;
  int prompt_tokens = 0;
  int prefix_tokens = 0;
  bool prefix_hit = false;
  int document_tokens = 0;         // every placed document's tokens
  int cached_document_tokens = 0;  // of those, served from KV that was in the pool at admission
  int documents = 0, document_hits = 0;
  int repeats = 0;                 // a document placed again in the same request (not a hit)
  int in_flight_hits = 0;          // of the hits, KV another running request was still encoding
  int output_tokens = 0;
  int preemptions = 0;
  int64_t bytes_copied = 0;
  std::vector<int32_t> tokens;     // generated tokens, when SchedulerOptions::keep_tokens
  double ttft_ms() const { return 1e3 * (first_token_s - arrival_s); }
  double e2e_ms() const { return 1e3 * (finish_s - arrival_s); }
  double tpot_ms() const { return output_tokens > 1 ? 1e3 * (finish_s - first_token_s) / (output_tokens - 1) : 0.0; }
};

// One scheduler step (for live plots and the session report).
struct StepSample {
  int64_t step = 0;
  double t_s = 0, duration_s = 0;
  int running = 0, waiting = 0;
  int decode_batch = 0, prefill_tokens = 0;
  int blocks_in_use = 0, blocks_cached = 0, blocks_free = 0;
};

struct ServingResult {
  std::string policy, mode, backend;  // mode: attention semantics; backend: cpu, cuda or accounting
  int64_t kv_budget_bytes = 0;        // 0: unlimited (accounting only)
  int num_blocks = 0, block_size = 0;
  int requests = 0;
  double hit_ratio_tokens = 0;     // cached document tokens / (document + query tokens)
  double hit_ratio_documents = 0;  // document uses served from cache / document uses
  double prefix_hit_ratio = 0;     // requests whose prefix was cached / requests
  // Of hit_ratio_documents: document uses that shared an encode still running at admission.
  double in_flight_hit_ratio_documents = 0;
  Percentiles ttft_ms, tpot_ms, e2e_ms;
  double throughput_tok_s = 0;  // (prompt + output tokens) / makespan
  double output_tok_s = 0;      // output tokens / makespan
  double makespan_s = 0;        // first arrival to last token, run's clock
  int64_t bytes_copied = 0, bytes_stored = 0;
  int64_t evictions = 0;  // blocks evicted
  int64_t preemptions = 0;
  int peak_blocks = 0;    // most blocks held by running requests at once
  int64_t steps = 0;
  double wall_s = 0;      // host seconds the run took
  double host_fraction = 0;  // scheduler host time / machine time (real backends)
  bool cancelled = false;
  std::vector<RequestRecord> records;
  std::vector<StepSample> samples;
};

}  // namespace lazyscope

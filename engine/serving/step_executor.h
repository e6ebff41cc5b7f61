#pragma once
// What one scheduler step asks of the machine, and the two machines that do it: a real backend
// (wall clock) or the accounting model (a simulated clock, no tensors).
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "kernels/backend.h"

namespace lazyscope {

class StepTimeModel;

// One piece of prefill work, run in order: a chunk of a segment's tokens, or a request's copies.
struct PrefillPiece {
  enum class Kind { Forward, Copy } kind = Kind::Forward;
  // Forward: `tokens` new tokens at the end of `table` (truncated to the chunk's end).
  std::vector<int32_t> tokens, positions, slots;
  std::vector<BlockRef> table;
  bool lazy = false;
  bool greedy = false;        // the prompt's last chunk: produces the request's first token
  int32_t token = -1;         // out: that token
  std::vector<BlockCopy> copies;  // Copy
  int64_t copy_bytes = 0;     // Copy: KV bytes written
};

struct StepWork {
  std::vector<PrefillPiece> prefill;
  // One batched decode launch: each step one token with its own table and shifts.
  std::vector<std::vector<int32_t>> decode_tokens, decode_positions, decode_slots;
  std::vector<std::vector<BlockRef>> decode_tables;
  std::vector<char> decode_lazy;
  std::vector<int32_t> decode_out;  // out: the next token of each
  int decode_batch() const { return int(decode_tokens.size()); }
  int prefill_tokens() const;
  int64_t decode_context() const;  // cached tokens the decode step attends to, all sequences
};

class StepExecutor {
 public:
  virtual ~StepExecutor() = default;
  virtual std::string mode() const = 0;  // "cpu", "cuda" or "accounting"
  virtual double now_s() = 0;            // seconds since start()
  virtual void start() = 0;
  virtual void wait_until(double t_s) = 0;  // idle until an arrival
  virtual void run(StepWork& work) = 0;     // fills the tokens; returns when they are on the host
  // Seconds of run() spent in the machine (device or model) so far; the rest is scheduler host time.
  virtual double busy_s() const = 0;
};

// Runs steps on `backend` (its pool already allocated); greedy tokens by the device argmax path.
std::unique_ptr<StepExecutor> make_backend_executor(Backend& backend);
// Advances a simulated clock by the model's time for each step; tokens are 0.
std::unique_ptr<StepExecutor> make_accounting_executor(const StepTimeModel& model);

}  // namespace lazyscope

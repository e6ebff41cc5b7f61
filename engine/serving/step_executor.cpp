#include "engine/serving/step_executor.h"

#include <chrono>
#include <span>
#include <thread>

#include "base/error.h"
#include "engine/serving/step_time_model.h"
#include "kernels/device_trace.h"

namespace lazyscope {

int StepWork::prefill_tokens() const {
  int n = 0;
  for (const PrefillPiece& p : prefill) n += int(p.tokens.size());
  return n;
}

int64_t StepWork::decode_context() const {
  int64_t n = 0;
  for (const auto& table : decode_tables) {
    for (const BlockRef& r : table) n += r.valid;
  }
  return n - decode_batch();
}

namespace {

using Clock = std::chrono::steady_clock;

class BackendExecutor final : public StepExecutor {
 public:
  explicit BackendExecutor(Backend& backend) : backend_(backend) {}
  std::string mode() const override { return backend_.name(); }
  void start() override { t0_ = Clock::now(); }
  double now_s() override { return std::chrono::duration<double>(Clock::now() - t0_).count(); }
  void wait_until(double t_s) override {
    const double dt = t_s - now_s();
    if (dt > 0) std::this_thread::sleep_for(std::chrono::duration<double>(dt));
  }
  void run(StepWork& work) override {
    const Clock::time_point begin = Clock::now();
    // NVTX ranges (domain LazyScope, always on; free when no tool listens): the step and its parts.
    const DeviceRange step_range(nullptr, "scheduler step " + std::to_string(++steps_) + " (" +
                                              std::to_string(work.prefill_tokens()) + " prefill tokens, decode batch " +
                                              std::to_string(work.decode_batch()) + ")");
    for (PrefillPiece& p : work.prefill) {
      if (p.kind == PrefillPiece::Kind::Copy) {
        const DeviceRange copy_range(nullptr, "copy " + std::to_string(p.copies.size()) + " blocks");
        backend_.copy_blocks(p.copies);
        continue;
      }
      const DeviceRange chunk_range(nullptr, "prefill chunk " + std::to_string(p.tokens.size()) + " tokens");
      ForwardStep step{p.tokens, p.positions, p.slots, p.table, p.lazy, false};
      if (p.greedy) {
        p.token = backend_.forward_greedy(step);
      } else {
        backend_.forward(step, nullptr);
      }
    }
    const int batch = work.decode_batch();
    if (batch > 0) {
      std::vector<ForwardStep> steps;
      steps.reserve(batch);
      for (int i = 0; i < batch; ++i) {
        steps.push_back(ForwardStep{work.decode_tokens[i], work.decode_positions[i], work.decode_slots[i],
                                    work.decode_tables[i], work.decode_lazy[i] != 0, false});
      }
      work.decode_out.assign(batch, 0);
      const DeviceRange decode_range(nullptr, "decode batch " + std::to_string(batch));
      backend_.forward_batch_greedy(steps, work.decode_out);
    }
    backend_.synchronize();
    busy_ += std::chrono::duration<double>(Clock::now() - begin).count();
  }
  double busy_s() const override { return busy_; }

 private:
  Backend& backend_;
  Clock::time_point t0_ = Clock::now();
  double busy_ = 0.0;
  int64_t steps_ = 0;
};

class AccountingExecutor final : public StepExecutor {
 public:
  explicit AccountingExecutor(const StepTimeModel& model) : model_(model) {}
  std::string mode() const override { return "accounting"; }
  void start() override { now_ = 0.0; }
  double now_s() override { return now_; }
  void wait_until(double t_s) override { now_ = std::max(now_, t_s); }
  void run(StepWork& work) override {
    double dt = model_.step_overhead_s();
    for (PrefillPiece& p : work.prefill) {
      if (p.kind == PrefillPiece::Kind::Copy) {
        dt += model_.copy_s(p.copy_bytes);
        continue;
      }
      int64_t visible = 0;
      for (const BlockRef& r : p.table) visible += r.valid;
      const int n = int(p.tokens.size());
      dt += model_.forward_s(n, visible - n, p.greedy ? 1 : 0);
      if (p.greedy) p.token = 0;
    }
    if (work.decode_batch() > 0) {
      dt += model_.decode_s(work.decode_batch(), work.decode_context());
      work.decode_out.assign(work.decode_batch(), 0);
    }
    now_ += dt;
    busy_ += dt;
  }
  double busy_s() const override { return busy_; }

 private:
  const StepTimeModel& model_;
  double now_ = 0.0, busy_ = 0.0;
};

}  // namespace

std::unique_ptr<StepExecutor> make_backend_executor(Backend& backend) {
  return std::make_unique<BackendExecutor>(backend);
}

std::unique_ptr<StepExecutor> make_accounting_executor(const StepTimeModel& model) {
  return std::make_unique<AccountingExecutor>(model);
}

}  // namespace lazyscope

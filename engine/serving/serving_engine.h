#pragma once
// One model on one machine (a real backend or the accounting model) serving workloads: every
// (budget, policy) run gets a fresh KV pool of that budget and a cache with no history.
#include <atomic>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "base/progress.h"
#include "engine/kv/policy.h"
#include "engine/serving/scheduler.h"
#include "kernels/model_shape.h"

namespace lazyscope {

class Backend;
class StepTimeModel;
struct LoadedModel;

struct ServingConfig {
  std::string backend = "accounting";  // cpu, cuda or accounting
  std::filesystem::path model;         // real backends: a checkpoint, or
  std::string synthetic;               // random weights of this shape; accounting: the shape
  uint64_t weight_seed = 1;
  int cpu_threads = 0;
  int tensor_parallel = 0;             // cuda: > 0 splits the backend over this many GPUs (--tp)
  int block_size = 16;
  std::size_t kv_element_bytes = 0;    // accounting: bytes per KV value (0: 2, a bf16 pool)
};

// The semantics a policy serves: prefix caches full attention, the others block attention.
Mode mode_for(Policy policy);
// "none,lazy" -> policies; throws Error naming the bad entry and the valid names.
std::vector<Policy> parse_policy_list(const std::string& text);

class ServingEngine {
 public:
  ServingEngine(const ServingConfig& config, const ProgressFn& progress = {});
  ~ServingEngine();
  const ModelShape& shape() const { return shape_; }
  std::size_t bytes_per_block() const { return bytes_per_block_; }
  const std::string& backend_name() const { return backend_name_; }
  // Blocks a budget buys (throws Error when it buys none). 0 bytes: unlimited, accounting only:
  // enough blocks that `workload` never evicts.
  int blocks_for_budget(int64_t budget_bytes, const Workload& workload) const;
  ServingResult run(const Workload& workload, int64_t budget_bytes, Policy policy, SchedulerOptions options,
                    ServingObserver* observer = nullptr, const std::atomic<bool>* cancel = nullptr);

 private:
  ServingConfig config_;
  ModelShape shape_;
  std::string identity_, backend_name_;
  std::size_t bytes_per_block_ = 0;
  // The loaded checkpoint: the CPU backend reads its weights in place, so they live as long as it
  // (declared before backend_, destroyed after it).
  std::unique_ptr<LoadedModel> loaded_;
  std::unique_ptr<Backend> backend_;
  std::unique_ptr<StepTimeModel> model_;
};

}  // namespace lazyscope

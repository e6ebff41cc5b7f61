#include "kernels/backend.h"

#include "base/error.h"

namespace lazyscope {

void Backend::load_synthetic(const ModelShape&, uint64_t) {
  throw Error("backend '" + name() + "' cannot make synthetic weights");
}

void Backend::forward_batch(std::span<const ForwardStep> steps, std::vector<float>* logits) {
  if (logits) logits->clear();
  std::vector<float> row;
  for (const ForwardStep& step : steps) {
    if (step.tokens.size() != 1) throw Error("forward_batch: every step must bring exactly one new token");
    ForwardStep one = step;
    one.want_logits = logits != nullptr;
    forward(one, logits ? &row : nullptr);
    if (logits) logits->insert(logits->end(), row.begin(), row.end());
  }
}

void Backend::forward_batch_greedy(std::span<const ForwardStep> steps, std::span<int32_t> tokens) {
  if (tokens.size() != steps.size()) throw Error("forward_batch_greedy: one output token per step");
  for (std::size_t i = 0; i < steps.size(); ++i) {
    if (steps[i].tokens.size() != 1) throw Error("forward_batch_greedy: every step must bring exactly one new token");
    tokens[i] = forward_greedy(steps[i]);
  }
}

BackendKind parse_backend_kind(const std::string& text) {
  if (text == "auto") return BackendKind::Auto;
  if (text == "cpu") return BackendKind::Cpu;
  if (text == "cuda") return BackendKind::Cuda;
  throw Error("unknown backend '" + text + "' (expected auto, cpu or cuda)");
}

CpuPrecision parse_cpu_precision(const std::string& text) {
  if (text == "fast") return CpuPrecision::Fast;
  if (text == "exact") return CpuPrecision::Exact;
  throw Error("--cpu-precision: unknown value '" + text + "' (expected fast or exact)");
}

}  // namespace lazyscope

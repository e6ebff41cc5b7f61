#include "kernels/step_validation.h"

#include <algorithm>
#include <string>
#include <vector>

#include "base/error.h"

namespace lazyscope {

int validate_step(const ForwardStep& step, const StepLimits& limits) {
  const std::size_t n = step.tokens.size();
  if (n == 0) throw Error("forward: the step has no tokens");
  if (step.positions.size() != n || step.slots.size() != n) {
    throw Error("forward: tokens, positions and slots differ in length (" + std::to_string(n) + ", " +
                std::to_string(step.positions.size()) + ", " + std::to_string(step.slots.size()) + ")");
  }
  for (int32_t id : step.tokens) {
    if (id < 0 || id >= limits.vocab_size) {
      throw Error("forward: token id " + std::to_string(id) + " is out of the vocabulary (0.." +
                  std::to_string(limits.vocab_size - 1) + ")");
    }
  }
  const int64_t pool_slots = int64_t(limits.num_blocks) * limits.block_size;
  for (int32_t slot : step.slots) {
    if (slot < 0 || slot >= pool_slots) {
      throw Error("forward: KV slot " + std::to_string(slot) + " is out of the pool (0.." +
                  std::to_string(pool_slots - 1) + ")");
    }
  }
  int64_t keys = 0;
  for (std::size_t i = 0; i < step.table.size(); ++i) {
    const BlockRef& ref = step.table[i];
    if (ref.block < 0 || ref.block >= limits.num_blocks) {
      throw Error("forward: table entry " + std::to_string(i) + " names block " + std::to_string(ref.block) +
                  ", out of the pool (0.." + std::to_string(limits.num_blocks - 1) + ")");
    }
    if (ref.valid < 1 || ref.valid > limits.block_size) {
      throw Error("forward: table entry " + std::to_string(i) + " (block " + std::to_string(ref.block) + ") has " +
                  std::to_string(ref.valid) + " valid slots (1.." + std::to_string(limits.block_size) + ")");
    }
    if (!step.lazy_rotation && ref.shift != 0) {
      throw Error("forward: table entry " + std::to_string(i) + " (block " + std::to_string(ref.block) +
                  ") is shifted by " + std::to_string(ref.shift) + " in a step without lazy rotation");
    }
    keys += ref.valid;
  }
  if (keys < int64_t(n)) {
    throw Error("forward: " + std::to_string(n) + " new tokens but the table holds only " + std::to_string(keys) +
                " keys (the new tokens are its last entries)");
  }
  return int(keys);
}

void validate_decode_batch(std::span<const ForwardStep> steps, const StepLimits& limits, const char* what) {
  std::vector<int32_t> slots;
  slots.reserve(steps.size());
  for (std::size_t i = 0; i < steps.size(); ++i) {
    if (steps[i].tokens.size() != 1) {
      throw Error(std::string(what) + ": step " + std::to_string(i) + " brings " +
                  std::to_string(steps[i].tokens.size()) + " new tokens (a batched decode step takes exactly one)");
    }
    validate_step(steps[i], limits);
    slots.push_back(steps[i].slots[0]);
  }
  std::sort(slots.begin(), slots.end());
  const auto twice = std::adjacent_find(slots.begin(), slots.end());
  if (twice != slots.end()) {
    throw Error(std::string(what) + ": two steps write KV slot " + std::to_string(*twice) +
                " (every sequence of a batch needs its own slot)");
  }
}

}  // namespace lazyscope

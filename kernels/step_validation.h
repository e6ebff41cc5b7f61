#pragma once
// The checks every backend makes before it runs a forward step, so a bad step from the engine
// fails the same way (an Error naming the field and the valid range) on the CPU and on the GPU.
#include <span>

#include "kernels/backend.h"

namespace lazyscope {

// What a step may address in the backend's model and pool.
struct StepLimits {
  int vocab_size = 0;
  int num_blocks = 0;
  int block_size = 0;
};

// Throws Error unless: tokens, positions and slots have one entry per new token (at least one);
// every token id is in the vocabulary; every slot and table block is in the pool; every table
// entry has 1..block_size valid slots; a plain step (lazy_rotation false) has no shifted entry;
// the table holds at least as many keys as there are new tokens. Returns the table's key count.
int validate_step(const ForwardStep& step, const StepLimits& limits);

// validate_step for each step of a batched decode, which must bring one new token each, and no
// two of which write the same KV slot. `what` names the caller in the messages.
void validate_decode_batch(std::span<const ForwardStep> steps, const StepLimits& limits, const char* what);

}  // namespace lazyscope

// The one step validation both backends make (kernels/step_validation): every bad field is refused
// with a message naming it and its valid range, and the CPU backend refuses the same steps.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "base/error.h"
#include "kernels/backend.h"
#include "kernels/cpu/cpu_backend.h"
#include "kernels/random_weights.h"
#include "kernels/step_validation.h"

namespace lazyscope {
namespace {

const StepLimits kLimits{64, 4, 8};  // vocabulary 64, 4 blocks of 8 slots

std::string why(const ForwardStep& step) {
  try {
    validate_step(step, kLimits);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(StepValidation, NamesEachBadFieldAndItsRange) {
  std::vector<int32_t> tokens{5, 9}, positions{0, 1}, slots{0, 1};
  std::vector<BlockRef> table{{0, 0, 2}};
  ForwardStep step{tokens, positions, slots, table, false, false};
  EXPECT_EQ(why(step), "");
  EXPECT_EQ(validate_step(step, kLimits), 2);

  ForwardStep empty = step;
  empty.tokens = {};
  EXPECT_NE(why(empty).find("no tokens"), std::string::npos) << why(empty);
  std::vector<int32_t> one_position{0};
  ForwardStep short_positions = step;
  short_positions.positions = one_position;
  EXPECT_NE(why(short_positions).find("differ in length (2, 1, 2)"), std::string::npos) << why(short_positions);
  std::vector<int32_t> bad_token{5, 64};
  ForwardStep token = step;
  token.tokens = bad_token;
  EXPECT_NE(why(token).find("token id 64 is out of the vocabulary (0..63)"), std::string::npos) << why(token);
  std::vector<int32_t> bad_slot{0, 32};
  ForwardStep slot = step;
  slot.slots = bad_slot;
  EXPECT_NE(why(slot).find("KV slot 32 is out of the pool (0..31)"), std::string::npos) << why(slot);
  std::vector<BlockRef> bad_block{{4, 0, 2}}, bad_valid{{0, 0, 9}}, zero_valid{{0, 0, 2}, {1, 0, 0}},
      shifted{{0, 3, 2}}, too_few{{0, 0, 1}};
  ForwardStep t = step;
  t.table = bad_block;
  EXPECT_NE(why(t).find("names block 4, out of the pool (0..3)"), std::string::npos) << why(t);
  t.table = bad_valid;
  EXPECT_NE(why(t).find("has 9 valid slots (1..8)"), std::string::npos) << why(t);
  t.table = zero_valid;
  EXPECT_NE(why(t).find("table entry 1 (block 1) has 0 valid slots"), std::string::npos) << why(t);
  t.table = shifted;
  EXPECT_NE(why(t).find("shifted by 3 in a step without lazy rotation"), std::string::npos) << why(t);
  t.lazy_rotation = true;
  EXPECT_EQ(why(t), "") << "a lazy step may attend to shifted blocks";
  t.table = too_few;
  EXPECT_NE(why(t).find("2 new tokens but the table holds only 1 keys"), std::string::npos) << why(t);
}

TEST(StepValidation, BatchedDecodeStepsBringOneTokenEachAndDistinctSlots) {
  std::vector<int32_t> one{1}, pos{0}, slot_a{0}, slot_b{8}, two{1, 2}, two_pos{0, 1}, two_slots{16, 17};
  std::vector<BlockRef> table_a{{0, 0, 1}}, table_b{{1, 0, 1}}, table_c{{2, 0, 2}};
  const ForwardStep a{one, pos, slot_a, table_a, false, false};
  const ForwardStep b{one, pos, slot_b, table_b, true, false};
  const ForwardStep prompt{two, two_pos, two_slots, table_c, false, false};
  EXPECT_NO_THROW(validate_decode_batch(std::vector<ForwardStep>{a, b}, kLimits, "test"));
  EXPECT_NO_THROW(validate_decode_batch(std::vector<ForwardStep>{}, kLimits, "test"));
  try {
    validate_decode_batch(std::vector<ForwardStep>{a, prompt}, kLimits, "forward_batch");
    FAIL() << "a two-token step was accepted in a batch";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("forward_batch: step 1 brings 2 new tokens"), std::string::npos) << e.what();
  }
  try {
    validate_decode_batch(std::vector<ForwardStep>{b, a, b}, kLimits, "forward_batch");
    FAIL() << "two steps writing one slot were accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("two steps write KV slot 8"), std::string::npos) << e.what();
  }
}

// The CPU backend runs the same validation before any arithmetic.
TEST(StepValidation, CpuBackendRefusesTheSameSteps) {
  ModelShape shape;
  shape.vocab_size = 64;
  shape.hidden_size = 32;
  shape.intermediate_size = 64;
  shape.num_layers = 1;
  shape.num_heads = 4;
  shape.num_kv_heads = 2;
  shape.head_dim = 8;
  HostWeights w = random_host_weights(shape, 3, {0.2f, false});
  CpuBackend cpu(1);
  cpu.load(shape, w.view);
  cpu.allocate_pool(4, 8);
  std::vector<int32_t> tokens{5, 9}, positions{0, 1}, slots{0, 1};
  std::vector<BlockRef> shifted{{0, 3, 2}};
  ForwardStep step{tokens, positions, slots, shifted, false, true};
  std::vector<float> logits;
  EXPECT_THROW(cpu.forward(step, &logits), Error);
  step.lazy_rotation = true;
  EXPECT_NO_THROW(cpu.forward(step, &logits));
  EXPECT_EQ(logits.size(), std::size_t(shape.vocab_size));
}

}  // namespace
}  // namespace lazyscope

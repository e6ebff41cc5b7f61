// Fuzzing found that a JSON number too large for a double (64E99999999) escaped the loaders as
// nlohmann's out_of_range instead of an Error naming the file. Every JSON loader now reports it.
#include <gtest/gtest.h>
#include <unistd.h>

#include <fstream>

#include "base/error.h"
#include "engine/model/config.h"
#include "engine/model/safetensors.h"
#include "engine/runtime/request.h"
#include "engine/tokenizer/tokenizer.h"

namespace lazyscope {
namespace {

std::string error_of(auto&& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  } catch (const std::exception& e) {
    return std::string("not a lazyscope::Error: ") + e.what();
  }
  return "";
}

void expect_named(const std::string& message, const std::string& file) {
  EXPECT_EQ(message.find("not a lazyscope::Error"), std::string::npos) << message;
  EXPECT_NE(message.find(file), std::string::npos) << message;
}

TEST(JsonNumberOverflow, ConfigJson) {
  expect_named(error_of([] {
                 parse_model_config(
                     R"({"architectures":["LlamaForCausalLM"],"hidden_size":64E99999999})",
                     "config.json");
               }),
               "config.json");
}

TEST(JsonNumberOverflow, RequestJson) {
  expect_named(
      error_of([] { parse_request_json(R"({"query_ids":[1],"max_new_tokens":2e333})", "r.json"); }),
      "r.json");
}

TEST(JsonNumberOverflow, TokenizerJson) {
  expect_named(error_of([] {
                 Tokenizer::from_json(R"({"model":{"type":"BPE","vocab":{"a":1e999}}})",
                                      "tok.json");
               }),
               "tok.json");
}

TEST(JsonNumberOverflow, SafetensorsHeaderAndIndex) {
  const auto dir =
      std::filesystem::temp_directory_path() / ("lazyscope-overflow-" + std::to_string(getpid()));
  std::filesystem::create_directories(dir);
  const std::string header = R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4e999]}})";
  {
    std::ofstream out(dir / "model.safetensors", std::ios::binary);
    const uint64_t n = header.size();
    out.write(reinterpret_cast<const char*>(&n), 8);
    out << header << "0000";
  }
  expect_named(error_of([&] { SafetensorsFile f(dir / "model.safetensors"); }),
               "model.safetensors");
  std::ofstream(dir / "model.safetensors.index.json")
      << R"({"metadata":{"total_size":1e400},"weight_map":{}})";
  expect_named(
      error_of([&] { SafetensorsCheckpoint::open_index(dir / "model.safetensors.index.json"); }),
      "model.safetensors.index.json");
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace lazyscope

// A prompt longer than the model's context is refused before any work, generation stops at the
// context's end, and max_new_tokens has a named range.
#include <gtest/gtest.h>
#include <unistd.h>

#include <fstream>
#include <nlohmann/json.hpp>

#include "base/error.h"
#include "engine/runtime/session.h"
#include "support/tiny_model.h"

namespace lazyscope {
namespace {

namespace fs = std::filesystem;

// The tiny test checkpoint with its context cut to `context` positions.
fs::path tiny_model_with_context(int context) {
  const fs::path dir = fs::temp_directory_path() / ("lazyscope-context-" + std::to_string(context) +
                                                    "-" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::copy(testing::tiny_model_dir(), dir, fs::copy_options::recursive);
  nlohmann::json config;
  std::ifstream(dir / "config.json") >> config;
  config["max_position_embeddings"] = context;
  std::ofstream(dir / "config.json") << config.dump();
  return dir;
}

Request ids_request(int prompt_tokens, int max_new) {
  Request r;
  r.prefix_ids = std::vector<int32_t>{1};
  r.document_ids = {std::vector<int32_t>(prompt_tokens - 3, 40)};
  r.query_ids = std::vector<int32_t>{7, 8};
  r.max_new_tokens = max_new;
  return r;
}

std::string error_of(auto&& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(ContextLimit, PromptLongerThanTheContextIsRefused) {
  const fs::path model = tiny_model_with_context(64);
  SessionOptions o;
  o.model = model;
  o.backend = BackendKind::Cpu;
  Session session(o);
  const std::string e = error_of([&] { session.submit(ids_request(65, 1), RunOptions{}); });
  EXPECT_NE(e.find("65 tokens"), std::string::npos) << e;
  EXPECT_NE(e.find("max_position_embeddings"), std::string::npos) << e;
  EXPECT_NE(e.find("64"), std::string::npos) << e;
  // Nothing was left holding KV: a prompt that fits still runs.
  EXPECT_EQ(session.submit(ids_request(64, 0), RunOptions{}).prompt_tokens, 64);
  fs::remove_all(model);
}

TEST(ContextLimit, GenerationStopsAtTheEndOfTheContext) {
  const fs::path model = tiny_model_with_context(64);
  SessionOptions o;
  o.model = model;
  o.backend = BackendKind::Cpu;
  Session session(o);
  RunOptions run;
  run.max_new_tokens = 1000000;  // the largest allowed; bounded by the context
  const RunResult r = session.submit(ids_request(60, 4), run);
  EXPECT_LE(r.generated_ids.size(), 4u);
  EXPECT_GE(r.generated_ids.size(), 1u);
  fs::remove_all(model);
}

TEST(ContextLimit, MaxNewTokensOutsideItsRangeIsRefused) {
  SessionOptions o;
  o.synthetic = "tiny";
  o.backend = BackendKind::Cpu;
  Session session(o);
  RunOptions run;
  run.max_new_tokens = 1000000000;
  const std::string e = error_of([&] { session.submit(ids_request(10, 1), run); });
  EXPECT_NE(e.find("max_new_tokens: 1000000000 is outside the valid range 0..1000000"),
            std::string::npos)
      << e;
}

}  // namespace
}  // namespace lazyscope

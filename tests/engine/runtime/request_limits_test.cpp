// Sizes from a request file are bounded: max_new_tokens and "order" have named limits.
#include <gtest/gtest.h>

#include "base/error.h"
#include "base/limits.h"
#include "engine/runtime/request.h"

namespace lazyscope {
namespace {

std::string error_of(auto&& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(RequestLimits, OrderRepeatingADocumentAMillionTimesIsRefused) {
  std::string order = "[0";
  for (int i = 1; i < 1000000; ++i) order += ",0";
  order += "]";
  const std::string e = error_of([&] {
    parse_request_json(R"({"document_ids":[[5,6]],"query_ids":[1],"order":)" + order + "}",
                       "r.json");
  });
  EXPECT_NE(e.find("r.json"), std::string::npos) << e;
  EXPECT_NE(e.find("at most " + std::to_string(limits::kMaxPlacedDocuments)), std::string::npos)
      << e;
}

TEST(RequestLimits, MaxNewTokensFieldNamesItsRange) {
  const std::string e = error_of(
      [] { parse_request_json(R"({"query_ids":[1],"max_new_tokens":2000000000})", "r.json"); });
  EXPECT_NE(e.find("0..1000000"), std::string::npos) << e;
}

}  // namespace
}  // namespace lazyscope

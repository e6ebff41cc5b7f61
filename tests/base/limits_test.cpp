// Range checks name the option, the value and the range, and refuse NaN and infinities.
#include "base/limits.h"

#include <gtest/gtest.h>

#include <limits>

#include "base/byte_size.h"

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

TEST(CheckRange, AcceptsTheRangeAndItsEnds) {
  EXPECT_EQ(check_range("--block-size", 1, 1, 1024), 1);
  EXPECT_EQ(check_range("--block-size", 1024, 1, 1024), 1024);
  EXPECT_DOUBLE_EQ(check_range("--zipf", 1.1, 0.0, 10.0), 1.1);
}

TEST(CheckRange, ErrorNamesOptionValueAndRange) {
  EXPECT_EQ(error_of([] { check_range("--block-size", 0, 1, 1024); }),
            "--block-size: 0 is outside the valid range 1..1024");
  EXPECT_EQ(error_of([] { check_range<int64_t>("max_new_tokens", 2000000000, 0, 1000000); }),
            "max_new_tokens: 2000000000 is outside the valid range 0..1000000");
}

TEST(CheckRange, RefusesNanAndInfinity) {
  EXPECT_NE(error_of([] { check_range("--zipf", std::nan(""), 0.0, 10.0); }), "");
  EXPECT_NE(
      error_of([] { check_range("--zipf", std::numeric_limits<double>::infinity(), 0.0, 1e308); }),
      "");
  EXPECT_NE(error_of([] {
              check_range("--zipf", -std::numeric_limits<double>::infinity(), -1e308, 1e308);
            }),
            "");
}

TEST(ByteSize, RefusesSizesBeyondSizeT) {
  EXPECT_NE(error_of([] { parse_byte_size("1e30TiB"); }).find("too large"), std::string::npos);
  EXPECT_NE(error_of([] { parse_byte_size("inf"); }), "");
  EXPECT_NE(error_of([] { parse_byte_size("nan"); }), "");
  EXPECT_EQ(parse_byte_size("16GiB"), std::size_t(16) << 30);
}

}  // namespace
}  // namespace lazyscope

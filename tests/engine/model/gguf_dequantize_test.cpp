// Every quantization type against the `gguf` Python package's reference dequantization.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>

#include "engine/model/dequantize.h"
#include "engine/model/gguf_file.h"
#include "engine/model/gguf_test_util.h"
#include "base/error.h"

namespace lazyscope {
namespace {

using testing_gguf::shell_quoted;

class GgufDequantize : public ::testing::TestWithParam<const char*> {
 protected:
  // ctest runs each case in its own process: the fixture file is shared between them, keyed by
  // the writer script's contents and published by an atomic rename.
  static void SetUpTestSuite() {
    const std::string script = testing_gguf::read_text(std::filesystem::path(LAZYSCOPE_SOURCE_DIR) /
                                                       "tests/engine/model/gguf_fixtures.py");
    path_ = new std::filesystem::path(
        std::filesystem::temp_directory_path() /
        ("lazyscope-gguf-quants-" + std::to_string(std::hash<std::string>{}(script)) + ".gguf"));
    if (std::filesystem::exists(*path_)) return;
    const auto dir = testing_gguf::scratch_dir("quants");
    if (testing_gguf::run_fixture("quants " + shell_quoted(dir / "quants.gguf"))) {
      std::error_code ec;
      std::filesystem::rename(dir / "quants.gguf", *path_, ec);
    }
    std::filesystem::remove_all(dir);
  }
  static void TearDownTestSuite() { delete path_; }
  static std::filesystem::path* path_;
};
std::filesystem::path* GgufDequantize::path_ = nullptr;

TEST_P(GgufDequantize, MatchesGgufPythonReference) {
  ASSERT_TRUE(std::filesystem::exists(*path_)) << "the Python fixture writer failed";
  const GgufFile file = GgufFile::open(*path_);
  const std::string type = GetParam();
  const GgufTensorInfo* quantized = file.find_tensor("q." + type);
  const GgufTensorInfo* reference = file.find_tensor("ref." + type);
  ASSERT_NE(quantized, nullptr);
  ASSERT_NE(reference, nullptr);
  EXPECT_EQ(ggml_type_name(quantized->type), type);
  EXPECT_EQ(reference->type, uint32_t(GgmlType::F32));
  ASSERT_EQ(quantized->elements, reference->elements);

  const std::vector<float> ours = file.dequantize(*quantized);
  const std::vector<float> expected = file.dequantize(*reference);
  int mismatches = 0;
  double worst = 0;
  for (std::size_t i = 0; i < ours.size(); ++i) {
    const double tolerance = 1e-6 * std::max(1.0, std::abs(double(expected[i])));
    const double diff = std::abs(double(ours[i]) - double(expected[i]));
    worst = std::max(worst, diff);
    if (!(diff <= tolerance)) ++mismatches;
  }
  EXPECT_EQ(mismatches, 0) << type << ": worst difference " << worst;
  // The fixture's values are not all zero, so a no-op dequantizer cannot pass.
  double magnitude = 0;
  for (float v : expected) magnitude += std::abs(v);
  EXPECT_GT(magnitude, 1.0);
}

INSTANTIATE_TEST_SUITE_P(GgufAllTypes, GgufDequantize,
                         ::testing::Values("F32", "F16", "BF16", "Q8_0", "Q4_0", "Q4_1", "Q5_0",
                                           "Q5_1", "Q4_K", "Q5_K", "Q6_K"),
                         [](const auto& info) { return std::string(info.param); });

TEST(GgufHalf, ConvertsSpecialValuesExactly) {
  EXPECT_EQ(half_to_float(0x3C00), 1.0f);
  EXPECT_EQ(half_to_float(0xC000), -2.0f);
  EXPECT_EQ(half_to_float(0x7BFF), 65504.0f);
  EXPECT_EQ(half_to_float(0x0001), std::ldexp(1.0f, -24));  // smallest subnormal
  EXPECT_EQ(half_to_float(0x03FF), std::ldexp(1023.0f, -24));
  EXPECT_TRUE(std::isinf(half_to_float(0x7C00)));
  EXPECT_TRUE(std::isnan(half_to_float(0x7E00)));
  EXPECT_TRUE(std::signbit(half_to_float(0x8000)));
  EXPECT_EQ(bfloat16_to_float(0x3F80), 1.0f);
  EXPECT_EQ(bfloat16_to_float(0xC0A0), -5.0f);
}

TEST(GgufDequantizeErrors, RefusesTypesItCannotConvert) {
  std::vector<uint8_t> block(84);
  std::vector<float> out(256);
  try {
    dequantize_row(GgmlType::Q2_K, block.data(), out.data(), 256);
    FAIL() << "Q2_K should be refused";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("Q2_K"), std::string::npos) << e.what();
  }
  EXPECT_THROW(dequantize_row(GgmlType::Q4_0, block.data(), out.data(), 31), Error);
  EXPECT_EQ(ggml_type_info(99), nullptr);
  EXPECT_EQ(ggml_type_name(99), "type 99");
}

}  // namespace
}  // namespace lazyscope

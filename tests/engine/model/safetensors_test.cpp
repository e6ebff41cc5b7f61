// Safetensors reading: validation of every malformed input, exact dtype conversion, writer.
#include "engine/model/safetensors.h"

#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "engine/model/safetensors_writer.h"
#include "base/error.h"
#include "model_test_util.h"

namespace lazyscope {
namespace {

using testing::safetensors_bytes;
using testing::ScratchDir;
using testing::write_bytes;

// Error text of opening a file holding `bytes`, or "" when it opened.
std::string open_error(const ScratchDir& dir, const std::string& bytes) {
  const auto path = dir / "bad.safetensors";
  write_bytes(path, bytes);
  try {
    SafetensorsFile file(path);
  } catch (const Error& e) {
    std::string what = e.what();
    EXPECT_NE(what.find("bad.safetensors"), std::string::npos)
        << "error must name the file: " << what;
    return what;
  }
  return "";
}

void expect_open_error(const std::string& bytes, const std::string& expected) {
  ScratchDir dir;
  std::string err = open_error(dir, bytes);
  EXPECT_NE(err.find(expected), std::string::npos)
      << "expected '" << expected << "' in: '" << err << "'";
}

std::string f32_bytes(const std::vector<float>& v) {
  return std::string(reinterpret_cast<const char*>(v.data()), v.size() * 4);
}

TEST(Safetensors, ReadsValidFile) {
  ScratchDir dir;
  const std::string header =
      R"({"__metadata__": {"format": "pt"},
          "a": {"dtype": "F32", "shape": [2, 2], "data_offsets": [0, 16]},
          "b": {"dtype": "BF16", "shape": [3], "data_offsets": [16, 22]},
          "e": {"dtype": "F32", "shape": [0], "data_offsets": [22, 22]}})";
  std::string data = f32_bytes({1.0f, -2.0f, 3.5f, 0.25f});
  for (uint16_t v : {uint16_t(0x3f80), uint16_t(0xc000), uint16_t(0x7f80)}) {
    data.append(reinterpret_cast<const char*>(&v), 2);
  }
  write_bytes(dir / "m.safetensors", safetensors_bytes(header, data));
  SafetensorsFile file(dir / "m.safetensors");
  ASSERT_EQ(file.tensors().size(), 3u);
  EXPECT_EQ(file.metadata().at("format"), "pt");
  const TensorInfo* a = file.find("a");
  ASSERT_NE(a, nullptr);
  EXPECT_EQ(a->shape, (std::vector<int64_t>{2, 2}));
  std::vector<float> out;
  file.read_f32(*a, out);
  EXPECT_EQ(out, (std::vector<float>{1.0f, -2.0f, 3.5f, 0.25f}));
  file.read_f32(*file.find("b"), out);
  ASSERT_EQ(out.size(), 3u);
  EXPECT_EQ(out[0], 1.0f);
  EXPECT_EQ(out[1], -2.0f);
  EXPECT_TRUE(std::isinf(out[2]));
  file.read_f32(*file.find("e"), out);
  EXPECT_TRUE(out.empty());
  EXPECT_EQ(file.find("missing"), nullptr);
}

TEST(Safetensors, RejectsTruncatedFiles) {
  expect_open_error("", "truncated");
  expect_open_error("abc", "truncated");
  expect_open_error(std::string(7, '\0'), "truncated");
}

TEST(Safetensors, RejectsHeaderLengthPastEnd) {
  const std::string header = R"({"a": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]}})";
  expect_open_error(safetensors_bytes(header, f32_bytes({1.0f}), int64_t(header.size()) + 5),
                    "runs past the end of the file");
  // A file cut in the middle of its header.
  std::string cut = safetensors_bytes(header, "");
  expect_open_error(cut.substr(0, cut.size() - 10), "runs past the end of the file");
}

TEST(Safetensors, RejectsAbsurdHeaderLength) {
  expect_open_error(safetensors_bytes("{}", "", int64_t(1) << 40), "absurd");
}

TEST(Safetensors, RejectsHeaderThatIsNotAJsonObject) {
  expect_open_error(safetensors_bytes("{\"a\": ", ""), "not valid JSON");
  expect_open_error(safetensors_bytes("[1, 2, 3]", ""), "JSON object");
  expect_open_error(safetensors_bytes(R"({"a": 5})", ""), "tensor 'a': entry must be an object");
  expect_open_error(safetensors_bytes(R"({"__metadata__": {"k": 1}})", ""), "__metadata__");
}

TEST(Safetensors, RejectsUnknownDtype) {
  expect_open_error(
      safetensors_bytes(R"({"w": {"dtype": "F13", "shape": [1], "data_offsets": [0, 4]}})",
                        f32_bytes({1.0f})),
      "tensor 'w': unknown dtype 'F13'");
}

TEST(Safetensors, KnownButUnloadableDtypeFailsOnRead) {
  ScratchDir dir;
  write_bytes(dir / "m.safetensors",
              safetensors_bytes(R"({"w": {"dtype": "F64", "shape": [1], "data_offsets": [0, 8]}})",
                                std::string(8, '\0')));
  SafetensorsFile file(dir / "m.safetensors");
  std::vector<float> out;
  try {
    file.read_f32(*file.find("w"), out);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    std::string err = e.what();
    EXPECT_NE(err.find("tensor 'w': dtype F64 cannot be loaded"), std::string::npos) << err;
  }
}

TEST(Safetensors, RejectsOffsetsOutOfRange) {
  expect_open_error(
      safetensors_bytes(R"({"w": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}})",
                        f32_bytes({1.0f})),
      "tensor 'w': data_offsets [0, 8) run past the data section (4 bytes)");
  expect_open_error(
      safetensors_bytes(R"({"w": {"dtype": "F32", "shape": [1], "data_offsets": [8, 4]}})",
                        f32_bytes({1.0f, 2.0f, 3.0f})),
      "begin 8 > end 4");
  expect_open_error(
      safetensors_bytes(R"({"w": {"dtype": "F32", "shape": [1], "data_offsets": [-4, 0]}})",
                        f32_bytes({1.0f})),
      "non-negative");
  expect_open_error(
      safetensors_bytes(R"({"w": {"dtype": "F32", "shape": [1], "data_offsets": [0]}})",
                        f32_bytes({1.0f})),
      "two integers");
}

TEST(Safetensors, RejectsOverlappingTensors) {
  expect_open_error(
      safetensors_bytes(R"({"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]},
                            "b": {"dtype": "F32", "shape": [2], "data_offsets": [4, 12]}})",
                        f32_bytes({1, 2, 3})),
      "overlap");
}

TEST(Safetensors, RejectsShapeByteSizeMismatch) {
  expect_open_error(
      safetensors_bytes(R"({"w": {"dtype": "F32", "shape": [3], "data_offsets": [0, 8]}})",
                        f32_bytes({1, 2})),
      "tensor 'w': shape [3] of F32 needs 12 bytes but data_offsets span 8");
  expect_open_error(
      safetensors_bytes(
          R"({"w": {"dtype": "F32", "shape": [4294967296, 4294967296], "data_offsets": [0, 8]}})",
          f32_bytes({1, 2})),
      "too many");
  expect_open_error(
      safetensors_bytes(R"({"w": {"dtype": "F32", "shape": [-1], "data_offsets": [0, 4]}})",
                        f32_bytes({1})),
      "shape entries");
}

TEST(Safetensors, MissingFileIsAnError) {
  ScratchDir dir;
  EXPECT_THROW(SafetensorsFile(dir / "absent.safetensors"), Error);
}

// Independent reference: value = (-1)^s * 2^(e-15) * (1 + m/1024), subnormals 2^-14 * m/1024.
double f16_reference(uint16_t h) {
  const int s = h >> 15, e = (h >> 10) & 0x1f, m = h & 0x3ff;
  double v;
  if (e == 0) {
    v = std::ldexp(double(m), -24);
  } else if (e == 31) {
    v = m == 0 ? INFINITY : NAN;
  } else {
    v = std::ldexp(1.0 + m / 1024.0, e - 15);
  }
  return s ? -v : v;
}

TEST(DtypeConversion, F16IsExactForAllValues) {
  for (uint32_t h = 0; h <= 0xffff; ++h) {
    const float got = f16_to_f32(uint16_t(h));
    const double want = f16_reference(uint16_t(h));
    if (std::isnan(want)) {
      ASSERT_TRUE(std::isnan(got)) << std::hex << h;
      // The NaN payload and sign survive.
      const uint32_t bits = std::bit_cast<uint32_t>(got);
      EXPECT_EQ(bits >> 31, h >> 15) << std::hex << h;
      EXPECT_EQ((bits >> 13) & 0x3ff, h & 0x3ff) << std::hex << h;
    } else {
      ASSERT_EQ(double(got), want) << std::hex << h;
      ASSERT_EQ(std::signbit(got), bool(h >> 15)) << std::hex << h;  // -0.0 stays negative
    }
  }
  EXPECT_EQ(f16_to_f32(0x0001), std::ldexp(1.0f, -24));     // smallest subnormal
  EXPECT_EQ(f16_to_f32(0x03ff), std::ldexp(1023.0f, -24));  // largest subnormal
  EXPECT_EQ(f16_to_f32(0x7bff), 65504.0f);
  EXPECT_EQ(f16_to_f32(0x3c00), 1.0f);
  EXPECT_EQ(f16_to_f32(0xfc00), -INFINITY);
}

// Independent reference for BF16: the same exponent range as fp32, 7 explicit mantissa bits.
double bf16_reference(uint16_t b) {
  const int s = b >> 15, e = (b >> 7) & 0xff, m = b & 0x7f;
  double v;
  if (e == 0) {
    v = std::ldexp(double(m), -133);  // 2^-126 * m / 128
  } else if (e == 255) {
    v = m == 0 ? INFINITY : NAN;
  } else {
    v = std::ldexp(1.0 + m / 128.0, e - 127);
  }
  return s ? -v : v;
}

TEST(DtypeConversion, BF16IsExactForAllValues) {
  for (uint32_t b = 0; b <= 0xffff; ++b) {
    const float got = bf16_to_f32(uint16_t(b));
    const double want = bf16_reference(uint16_t(b));
    if (std::isnan(want)) {
      ASSERT_TRUE(std::isnan(got)) << std::hex << b;
    } else {
      ASSERT_EQ(double(got), want) << std::hex << b;
      ASSERT_EQ(std::signbit(got), bool(b >> 15)) << std::hex << b;
    }
  }
}

TEST(DtypeConversion, F32ToBF16RoundsToNearestEven) {
  EXPECT_EQ(f32_to_bf16(1.0f), 0x3f80);
  // 1 + 2^-8 lies halfway between 1 and 1 + 2^-7: ties to even (1.0).
  EXPECT_EQ(f32_to_bf16(1.0f + std::ldexp(1.0f, -8)), 0x3f80);
  // 1 + 3 * 2^-8 lies halfway between 1 + 2^-7 and 1 + 2^-6: ties to even (1 + 2^-6).
  EXPECT_EQ(f32_to_bf16(1.0f + 3 * std::ldexp(1.0f, -8)), 0x3f82);
  EXPECT_EQ(f32_to_bf16(1.0f + std::ldexp(1.0f, -8) + std::ldexp(1.0f, -20)), 0x3f81);
  EXPECT_TRUE(std::isnan(bf16_to_f32(f32_to_bf16(NAN))));
  EXPECT_EQ(bf16_to_f32(f32_to_bf16(INFINITY)), INFINITY);
  // Every bf16 value survives a round trip through fp32.
  for (uint32_t b = 0; b <= 0xffff; ++b) {
    if (std::isnan(bf16_to_f32(uint16_t(b)))) continue;
    ASSERT_EQ(f32_to_bf16(bf16_to_f32(uint16_t(b))), b) << std::hex << b;
  }
}

TEST(SafetensorsWriter, RoundTripsF32AndBF16) {
  ScratchDir dir;
  std::vector<TensorWithValues> tensors = {
      {{"x", TensorDtype::F32, {2, 3}}, {1, 2, 3, 4, 5, 6.5f}},
      {{"y", TensorDtype::BF16, {3}}, {1.0f, -0.5f, 1.0f + std::ldexp(1.0f, -7)}},
      {{"z", TensorDtype::F32, {1}}, {-7.25f}},
  };
  write_safetensors_file(dir / "w.safetensors", tensors, {{"format", "pt"}});
  SafetensorsFile file(dir / "w.safetensors");
  EXPECT_EQ(file.header_bytes().size() % 8, 0u);  // data starts aligned
  EXPECT_EQ(file.metadata().at("format"), "pt");
  ASSERT_EQ(file.tensors().size(), 3u);
  EXPECT_EQ(file.tensors()[0].name, "x");  // file order is write order
  std::vector<float> out;
  for (const TensorWithValues& t : tensors) {
    const TensorInfo* info = file.find(t.info.name);
    ASSERT_NE(info, nullptr);
    EXPECT_EQ(info->dtype, t.info.dtype);
    EXPECT_EQ(info->shape, t.info.shape);
    file.read_f32(*info, out);
    EXPECT_EQ(out, t.values) << t.info.name;
  }
  EXPECT_FALSE(std::filesystem::exists(dir / "w.safetensors.tmp"));
}

TEST(SafetensorsWriter, LargeTensorsConvertAcrossThreads) {
  ScratchDir dir;
  const std::size_t n = (std::size_t(1) << 22) + 77;  // above the threading threshold
  std::vector<float> values(n);
  for (std::size_t i = 0; i < n; ++i) values[i] = float(i % 65521) * 0.001f - 30.0f;
  write_safetensors_file(
      dir / "big.safetensors",
      std::vector<TensorWithValues>{{{"big", TensorDtype::BF16, {int64_t(n)}}, values}});
  SafetensorsFile file(dir / "big.safetensors");
  std::vector<float> out;
  file.read_f32(*file.find("big"), out);
  ASSERT_EQ(out.size(), n);
  for (std::size_t i = 0; i < n; ++i) ASSERT_EQ(out[i], bf16_to_f32(f32_to_bf16(values[i]))) << i;
}

TEST(SafetensorsWriter, ShardsAndIndex) {
  ScratchDir dir;
  std::vector<TensorToWrite> tensors;
  for (int i = 0; i < 5; ++i) tensors.push_back({"t" + std::to_string(i), TensorDtype::F32, {4}});
  // A stale single file from an earlier run must not survive a sharded write.
  write_bytes(dir / "model.safetensors", "stale");
  auto produce = [](std::size_t i, std::vector<float>& v) {
    for (std::size_t k = 0; k < v.size(); ++k) v[k] = float(i * 10 + k);
  };
  auto files = write_safetensors_checkpoint(dir.path(), tensors, produce, 40);
  EXPECT_FALSE(std::filesystem::exists(dir / "model.safetensors"));
  ASSERT_EQ(files.size(), 4u);  // 3 shards (2 + 2 + 1 tensors of 16 bytes) + index
  EXPECT_TRUE(std::filesystem::exists(dir / "model-00001-of-00003.safetensors"));
  SafetensorsCheckpoint ckpt = SafetensorsCheckpoint::open_directory(dir.path());
  EXPECT_EQ(ckpt.files().size(), 3u);
  std::vector<float> out;
  for (int i = 0; i < 5; ++i) {
    const auto* e = ckpt.find("t" + std::to_string(i));
    ASSERT_NE(e, nullptr);
    e->file->read_f32(*e->tensor, out);
    EXPECT_EQ(out, (std::vector<float>{i * 10.0f, i * 10.0f + 1, i * 10.0f + 2, i * 10.0f + 3}));
  }
  // Writing again unsharded removes the shards and the index.
  write_safetensors_checkpoint(dir.path(), tensors, produce, 0);
  EXPECT_FALSE(std::filesystem::exists(dir / "model.safetensors.index.json"));
  EXPECT_FALSE(std::filesystem::exists(dir / "model-00001-of-00003.safetensors"));
  EXPECT_EQ(SafetensorsCheckpoint::open_directory(dir.path()).files().size(), 1u);
}

TEST(SafetensorsCheckpoint, ShardIndexPointingAtMissingFile) {
  ScratchDir dir;
  write_safetensors_file(dir / "model-00001-of-00002.safetensors",
                         std::vector<TensorWithValues>{{{"a", TensorDtype::F32, {1}}, {1.0f}}});
  write_bytes(dir / "model.safetensors.index.json",
              R"({"metadata": {}, "weight_map": {"a": "model-00001-of-00002.safetensors",
                                                  "b": "model-00002-of-00002.safetensors"}})");
  try {
    SafetensorsCheckpoint::open_directory(dir.path());
    FAIL() << "expected an error";
  } catch (const Error& e) {
    std::string err = e.what();
    EXPECT_NE(err.find("model.safetensors.index.json"), std::string::npos) << err;
    EXPECT_NE(err.find("tensor 'b'"), std::string::npos) << err;
    EXPECT_NE(err.find("model-00002-of-00002.safetensors"), std::string::npos) << err;
    EXPECT_NE(err.find("does not exist"), std::string::npos) << err;
  }
}

TEST(SafetensorsCheckpoint, IndexErrors) {
  ScratchDir dir;
  write_safetensors_file(dir / "s1.safetensors",
                         std::vector<TensorWithValues>{{{"a", TensorDtype::F32, {1}}, {1.0f}}});
  auto index_error = [&](const std::string& text) {
    write_bytes(dir / "model.safetensors.index.json", text);
    try {
      SafetensorsCheckpoint::open_directory(dir.path());
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  EXPECT_NE(index_error("{").find("not valid JSON"), std::string::npos);
  EXPECT_NE(index_error(R"({"metadata": {}})").find("weight_map"), std::string::npos);
  EXPECT_NE(index_error(R"({"weight_map": {"zz": "s1.safetensors"}})").find("does not contain it"),
            std::string::npos);
  EXPECT_NE(index_error(R"({"weight_map": {"a": "../s1.safetensors"}})").find("invalid shard"),
            std::string::npos);
  EXPECT_NE(index_error(R"({"weight_map": {"a": 3}})").find("not a string"), std::string::npos);
  // A shard name longer than a file name may be (fuzz_safetensors_index found it escaping as a
  // std::filesystem_error, which ended the fuzzer as an uncaught exception).
  const std::string long_name(300, 'x');
  const std::string too_long = index_error(R"({"weight_map": {"a": ")" + long_name + R"("}})");
  EXPECT_NE(too_long.find("cannot be read"), std::string::npos) << too_long;
  EXPECT_NE(too_long.find("tensor 'a'"), std::string::npos) << too_long;
  EXPECT_EQ(index_error(R"({"weight_map": {"a": "s1.safetensors"}})"), "");
}

TEST(SafetensorsCheckpoint, EmptyDirectoryIsAnError) {
  ScratchDir dir;
  try {
    SafetensorsCheckpoint::open_directory(dir.path());
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("no model.safetensors"), std::string::npos);
  }
}

}  // namespace
}  // namespace lazyscope

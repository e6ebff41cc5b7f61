// The GGUF container: every metadata type, tensor infos, alignment, and every malformed file
// giving a clear error that names the file (and the tensor or key when there is one).
#include "engine/model/gguf_file.h"

#include <gtest/gtest.h>

#include <cstring>
#include <fstream>

#include "engine/model/gguf_test_util.h"
#include "base/error.h"

namespace lazyscope {
namespace {

// Writes GGUF bytes by hand so that each field can be made wrong on purpose.
class GgufBytes {
 public:
  GgufBytes& raw(const void* data, std::size_t size) {
    bytes_.append(static_cast<const char*>(data), size);
    return *this;
  }
  template <typename T>
  GgufBytes& put(T value) {
    return raw(&value, sizeof(T));
  }
  GgufBytes& str(const std::string& text) {
    put<uint64_t>(text.size());
    return raw(text.data(), text.size());
  }
  GgufBytes& kv_u32(const std::string& key, uint32_t value) {
    str(key).put<uint32_t>(uint32_t(GgufValueType::Uint32));
    return put(value);
  }
  GgufBytes& kv_str(const std::string& key, const std::string& value) {
    str(key).put<uint32_t>(uint32_t(GgufValueType::String));
    return str(value);
  }
  GgufBytes& tensor(const std::string& name, std::vector<uint64_t> dims, uint32_t type,
                    uint64_t offset) {
    str(name).put<uint32_t>(uint32_t(dims.size()));
    for (uint64_t d : dims) put(d);
    put(type);
    return put(offset);
  }
  GgufBytes& pad_to(std::size_t alignment) {
    while (bytes_.size() % alignment) bytes_.push_back('\0');
    return *this;
  }
  GgufBytes& zeros(std::size_t count) {
    bytes_.append(count, '\0');
    return *this;
  }
  std::string& bytes() { return bytes_; }

 private:
  std::string bytes_;
};

GgufBytes header(uint64_t tensors, uint64_t kvs, uint32_t version = 3) {
  GgufBytes b;
  b.raw("GGUF", 4).put<uint32_t>(version).put<uint64_t>(tensors).put<uint64_t>(kvs);
  return b;
}

class GgufFileTest : public ::testing::Test {
 protected:
  void SetUp() override { dir_ = testing_gguf::scratch_dir("file"); }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  std::filesystem::path write(const std::string& bytes, const std::string& name = "t.gguf") {
    const auto path = dir_ / name;
    std::ofstream(path, std::ios::binary) << bytes;
    return path;
  }
  // Opens and expects an Error whose message contains the file name and every fragment.
  void expect_error(const std::string& bytes, std::vector<std::string> fragments) {
    const auto path = write(bytes, "bad.gguf");
    try {
      GgufFile::open(path);
      ADD_FAILURE() << "no error for a file that should be rejected (" << fragments[0] << ")";
    } catch (const Error& e) {
      const std::string message = e.what();
      EXPECT_NE(message.find(path.string()), std::string::npos) << message;
      for (const std::string& fragment : fragments) {
        EXPECT_NE(message.find(fragment), std::string::npos)
            << "'" << fragment << "' missing from: " << message;
      }
    }
  }
  // A valid file: two F32 tensors (4 and 8 floats), alignment 32.
  static GgufBytes valid(uint64_t second_offset = 32, uint32_t second_type = 0,
                         std::vector<uint64_t> second_dims = {8}) {
    GgufBytes b = header(2, 1);
    b.kv_str("general.architecture", "llama");
    b.tensor("a.weight", {4}, 0, 0).tensor("b.weight", second_dims, second_type, second_offset);
    b.pad_to(32).zeros(64);
    return b;
  }
  std::filesystem::path dir_;
};

TEST_F(GgufFileTest, ReadsEveryMetadataTypeWrittenByThePythonPackage) {
  ASSERT_TRUE(testing_gguf::run_fixture("llama " + testing_gguf::shell_quoted(dir_ / "m.gguf") +
                                        " " + testing_gguf::shell_quoted(dir_)));
  const GgufFile file = GgufFile::open(dir_ / "m.gguf");
  EXPECT_EQ(file.version(), 3u);
  EXPECT_EQ(file.alignment(), 32u);
  EXPECT_EQ(file.data_offset() % 32, 0u);
  EXPECT_EQ(file.get_string("general.architecture"), "llama");
  EXPECT_EQ(file.get_int("llama.block_count"), 2);
  EXPECT_FLOAT_EQ(float(*file.get_float("llama.attention.layer_norm_rms_epsilon")), 1e-6f);
  EXPECT_EQ(file.get_bool("test.flag"), true);
  EXPECT_EQ(file.get_int("test.int64"), -(int64_t(1) << 40));
  EXPECT_DOUBLE_EQ(*file.get_float("test.f64"), 0.125);
  const GgufValue* nested = file.find("test.nested");
  ASSERT_NE(nested, nullptr);
  ASSERT_EQ(nested->type, GgufValueType::Array);
  ASSERT_EQ(nested->element_type, GgufValueType::Array);
  ASSERT_EQ(nested->elements.size(), 2u);
  EXPECT_EQ(nested->elements[0].elements.size(), 2u);
  EXPECT_EQ(nested->elements[1].elements[0].int_value +
                int64_t(nested->elements[1].elements[0].uint_value),
            3);
  const GgufValue* floats = file.find("test.floats");
  ASSERT_NE(floats, nullptr);
  ASSERT_EQ(floats->elements.size(), 2u);
  EXPECT_EQ(floats->elements[1].float_value, -2.25);
  const auto tokens = file.get_string_array("tokenizer.ggml.tokens");
  ASSERT_TRUE(tokens.has_value());
  EXPECT_EQ((*tokens)[1], "<|im_start|>");
  EXPECT_FALSE(file.get_int("no.such.key").has_value());
  // Asking for the wrong type is an error naming the key.
  try {
    file.get_string("llama.block_count");
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("llama.block_count"), std::string::npos);
  }
  const GgufTensorInfo* embed = file.find_tensor("token_embd.weight");
  ASSERT_NE(embed, nullptr);
  EXPECT_EQ(embed->dims, (std::vector<int64_t>{64, 420}));
  EXPECT_EQ(embed->bytes, 64u * 420u * 4u);
}

TEST_F(GgufFileTest, ValidHandWrittenFileOpens) {
  const auto path = write(valid().bytes());
  const GgufFile file = GgufFile::open(path);
  ASSERT_EQ(file.tensors().size(), 2u);
  EXPECT_EQ(file.tensors()[1].offset, 32u);
  EXPECT_EQ(file.dequantize(file.tensors()[1]).size(), 8u);
  // Version 2 has the same layout (64-bit counts) and is accepted too.
  GgufBytes v2 = valid();
  v2.bytes()[4] = 2;
  EXPECT_EQ(GgufFile::open(write(v2.bytes(), "v2.gguf")).version(), 2u);
}

TEST_F(GgufFileTest, HonoursGeneralAlignment) {
  GgufBytes b = header(1, 1);
  b.kv_u32("general.alignment", 64).tensor("a.weight", {4}, 0, 0).pad_to(64).zeros(16);
  const GgufFile file = GgufFile::open(write(b.bytes()));
  EXPECT_EQ(file.alignment(), 64u);
  EXPECT_EQ(file.data_offset() % 64, 0u);
}

TEST_F(GgufFileTest, RejectsBadMagic) {
  GgufBytes b = valid();
  std::memcpy(b.bytes().data(), "GGML", 4);
  expect_error(b.bytes(), {"not a GGUF file", "magic"});
}

TEST_F(GgufFileTest, RejectsUnsupportedVersions) {
  expect_error(header(0, 0, 1).bytes(), {"version 1", "not supported"});
  expect_error(header(0, 0, 4).bytes(), {"version 4"});
}

TEST_F(GgufFileTest, RejectsTruncatedFilesAtEveryStage) {
  const std::string full = valid().bytes();
  expect_error(full.substr(0, 2), {"truncated"});
  expect_error(full.substr(0, 12), {"truncated", "tensor count"});
  expect_error(full.substr(0, 40), {"truncated"});  // inside the metadata
  expect_error(full.substr(0, 90), {"truncated"});  // inside the tensor infos
  expect_error(full.substr(0, full.size() - 8), {"b.weight", "past the end"});  // data cut short
}

TEST_F(GgufFileTest, RejectsTensorOffsetsPastTheEndMisalignedOrOverlapping) {
  expect_error(valid(4096).bytes(), {"b.weight", "past the end"});
  expect_error(valid(8).bytes(), {"b.weight", "not a multiple of the alignment"});
  GgufBytes overlap = header(2, 0);
  overlap.tensor("a.weight", {16}, 0, 0).tensor("b.weight", {8}, 0, 32).pad_to(32).zeros(128);
  expect_error(overlap.bytes(), {"a.weight", "b.weight", "overlap"});
}

TEST_F(GgufFileTest, RejectsUnknownTensorTypesAndBadShapes) {
  expect_error(valid(32, 99).bytes(), {"b.weight", "unknown type id 99"});
  expect_error(valid(32, uint32_t(GgmlType::Q4_0), {20}).bytes(), {"b.weight", "Q4_0 blocks"});
  expect_error(valid(32, 0, {1, 1, 1, 1, 8}).bytes(), {"b.weight", "5 dimensions"});
  expect_error(valid(32, 0, {0}).bytes(), {"b.weight", "invalid dimension"});
}

TEST_F(GgufFileTest, RejectsLyingLengthsAndCounts) {
  GgufBytes long_string = header(0, 1);
  long_string.put<uint64_t>(1ull << 40).zeros(16);
  expect_error(long_string.bytes(), {"implausible length"});
  GgufBytes long_array = header(0, 1);
  long_array.str("big")
      .put<uint32_t>(uint32_t(GgufValueType::Array))
      .put<uint32_t>(uint32_t(GgufValueType::Uint64))
      .put<uint64_t>(1ull << 50);
  expect_error(long_array.bytes(), {"big", "array elements"});
  expect_error(header(1ull << 60, 0).bytes(), {"tensors"});
  expect_error(header(0, 1ull << 60).bytes(), {"metadata entries"});
  GgufBytes bad_type = header(0, 1);
  bad_type.str("k").put<uint32_t>(77).put<uint32_t>(0);
  expect_error(bad_type.bytes(), {"'k'", "unknown value type 77"});
}

TEST_F(GgufFileTest, RejectsDuplicatesAndBadAlignment) {
  GgufBytes dup_key = header(0, 2);
  dup_key.kv_u32("x", 1).kv_u32("x", 2);
  expect_error(dup_key.bytes(), {"'x'", "twice"});
  GgufBytes dup_tensor = header(2, 0);
  dup_tensor.tensor("a", {8}, 0, 0).tensor("a", {8}, 0, 32).pad_to(32).zeros(64);
  expect_error(dup_tensor.bytes(), {"'a'", "twice"});
  GgufBytes alignment = header(0, 1);
  alignment.kv_u32("general.alignment", 24);
  expect_error(alignment.bytes(), {"general.alignment", "power of two"});
}

TEST_F(GgufFileTest, MissingFileIsAClearError) {
  try {
    GgufFile::open(dir_ / "nope.gguf");
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("nope.gguf"), std::string::npos);
  }
}

}  // namespace
}  // namespace lazyscope

// lazyscope-cli make-model: the command writes what write_model_checkpoint writes, and fails
// clearly on bad arguments.
#include <gtest/gtest.h>

#include <string>

#include "engine/model/presets.h"
#include "tests/engine/model/model_test_util.h"

namespace lazyscope {
namespace {

using testing::read_bytes;
using testing::ScratchDir;

// Runs lazyscope-cli with `args`; stdout+stderr go to `log`.
int run_cli(const std::string& args, const std::filesystem::path& log) {
  std::string command = "'";
  command += LAZYSCOPE_CLI;
  command += "' ";
  command += args;
  command += " >'";
  command += log.string();
  command += "' 2>&1";
  return testing::run_shell(command);
}

TEST(MakeModelCli, WritesTheSameCheckpointAsTheLibrary) {
  ScratchDir dir;
  std::string args = "make-model --preset tiny --seed 11 --out '";
  args += (dir / "cli").string();
  args += "'";
  ASSERT_EQ(run_cli(args, dir / "log.txt"), 0) << read_bytes(dir / "log.txt");
  CheckpointWriteOptions options;
  options.text_dir = std::filesystem::path(LAZYSCOPE_SOURCE_DIR) / "resources" / "text";
  write_model_checkpoint(find_model_preset("tiny"), 11, dir / "lib", options);
  for (const char* name : {"config.json", "model.safetensors", "tokenizer.json",
                           "tokenizer_config.json", "generation_config.json"}) {
    EXPECT_EQ(read_bytes(dir / "cli" / name), read_bytes(dir / "lib" / name)) << name;
  }
}

TEST(MakeModelCli, F32Dtype) {
  ScratchDir dir;
  std::string args = "make-model --preset tiny --dtype f32 --out '";
  args += (dir / "m").string();
  args += "'";
  ASSERT_EQ(run_cli(args, dir / "log.txt"), 0) << read_bytes(dir / "log.txt");
  SafetensorsFile file(dir / "m" / "model.safetensors");
  EXPECT_EQ(file.find("model.norm.weight")->dtype, TensorDtype::F32);
}

TEST(MakeModelCli, RejectsBadArguments) {
  ScratchDir dir;
  std::string out = " --out '";
  out += (dir / "m").string();
  out += "'";
  EXPECT_NE(run_cli("make-model --preset huge" + out, dir / "log.txt"), 0);
  EXPECT_NE(read_bytes(dir / "log.txt").find("unknown model preset 'huge'"), std::string::npos)
      << read_bytes(dir / "log.txt");
  EXPECT_NE(run_cli("make-model --dtype f16" + out, dir / "log.txt"), 0);
  EXPECT_NE(run_cli("make-model --preset tiny", dir / "log.txt"), 0);  // --out is required
  EXPECT_NE(read_bytes(dir / "log.txt").find("--out"), std::string::npos);
  EXPECT_NE(run_cli("make-model --text-dir /nonexistent/texts" + out, dir / "log.txt"), 0);
  EXPECT_NE(read_bytes(dir / "log.txt").find("/nonexistent/texts"), std::string::npos);
  EXPECT_FALSE(std::filesystem::exists(dir / "m" / "model.safetensors"));
  EXPECT_EQ(run_cli("make-model --help", dir / "log.txt"), 0);
  EXPECT_NE(read_bytes(dir / "log.txt").find("llama-3.1-8b"), std::string::npos);
}

}  // namespace
}  // namespace lazyscope

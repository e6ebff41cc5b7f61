// The one maker of the generated models: what the CLI's `tiny` and the workbench's fallback use.
#include <gtest/gtest.h>

#include <unistd.h>

#include "engine/model/config.h"
#include "engine/runtime/default_model.h"
#include "kernels/synthetic_shapes.h"

namespace lazyscope {
namespace {

TEST(GeneratedModel, WritesTheCatalogueShapeOnceAndKeepsIt) {
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() / ("ls-generated-" + std::to_string(getpid())) / "tiny";
  write_generated_model("tiny", dir);
  const ModelConfig config = load_model_config(dir / "config.json");
  const ModelShape catalogue = synthetic_shape("tiny");
  EXPECT_EQ(config.shape.hidden_size, catalogue.hidden_size);
  EXPECT_EQ(config.shape.num_layers, catalogue.num_layers);
  EXPECT_EQ(config.shape.vocab_size, catalogue.vocab_size);
  const auto written = std::filesystem::last_write_time(dir / "config.json");
  write_generated_model("tiny", dir);  // already there: kept as it is
  EXPECT_EQ(std::filesystem::last_write_time(dir / "config.json"), written);
  for (const auto& entry : std::filesystem::directory_iterator(dir.parent_path())) {
    EXPECT_EQ(entry.path().filename(), "tiny") << "a temporary was left behind: " << entry.path();
  }
  std::filesystem::remove_all(dir.parent_path());
}

}  // namespace
}  // namespace lazyscope

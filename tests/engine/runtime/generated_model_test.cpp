// The one maker of the generated models: what the CLI's `tiny` and the workbench's fallback use.
#include <gtest/gtest.h>

#include <unistd.h>

#include "base/progress.h"
#include "engine/model/config.h"
#include "engine/runtime/session.h"
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

TEST(GeneratedModel, ACancelledWriteLeavesNothingAndALoadStopsAtTheNextReport) {
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() / ("ls-cancelled-" + std::to_string(getpid())) / "tiny";
  std::atomic<bool> cancel{false};
  int reports = 0;
  // Cancel after the second report, as a Cancel button pressed mid-way would.
  ProgressFn press = [&](double, std::string_view) {
    if (++reports == 2) cancel.store(true);
  };
  EXPECT_THROW(write_generated_model("tiny", dir, cancellable(press, &cancel)), Cancelled);
  EXPECT_EQ(reports, 2);
  EXPECT_FALSE(std::filesystem::exists(dir));
  for (const auto& entry : std::filesystem::directory_iterator(dir.parent_path())) {
    ADD_FAILURE() << "a cancelled write left " << entry.path();
  }
  write_generated_model("tiny", dir);  // the next start writes it whole
  SessionOptions options;
  options.model = dir;
  options.backend = BackendKind::Cpu;
  reports = 0;
  cancel.store(false);
  EXPECT_THROW(Session(options, nullptr, cancellable(press, &cancel)), Cancelled);
  EXPECT_EQ(reports, 2);  // stopped at the report after the press, not at the end
  cancel.store(false);
  Session loaded(options, nullptr, cancellable({}, &cancel));  // uncancelled, it loads
  EXPECT_GT(loaded.config().shape.num_layers, 0);
  std::filesystem::remove_all(dir.parent_path());
}

}  // namespace
}  // namespace lazyscope

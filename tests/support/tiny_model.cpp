#include "support/tiny_model.h"

#include <unistd.h>

#include <mutex>
#include <string>

#include "engine/model/presets.h"

namespace lazyscope::testing {

const std::filesystem::path& tiny_model_dir() {
  static std::once_flag once;
  static std::filesystem::path dir;
  std::call_once(once, [] {
    dir = std::filesystem::temp_directory_path() / ("lazyscope-tiny-" + std::to_string(getpid()));
    CheckpointWriteOptions options;
    options.dtype = TensorDtype::F32;
    options.text_dir = std::filesystem::path(LAZYSCOPE_SOURCE_DIR) / "resources" / "text";
    write_model_checkpoint(find_model_preset("tiny"), 7, dir, options);
    std::atexit([] {
      std::error_code ec;
      std::filesystem::remove_all(dir, ec);
    });
  });
  return dir;
}

}  // namespace lazyscope::testing

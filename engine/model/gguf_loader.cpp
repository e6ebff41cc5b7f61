// Placeholder until the GGUF issue lands.
#include "engine/model/gguf_loader.h"

#include "kernels/error.h"

namespace lazyscope {

LoadedModel load_gguf_model(const std::filesystem::path& gguf_file, const ProgressFn&) {
  throw Error(gguf_file.string() + ": GGUF loading is not built yet");
}

}  // namespace lazyscope

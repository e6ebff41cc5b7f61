#include "kernels/backend.h"

#include "kernels/error.h"

namespace lazyscope {

void Backend::load_synthetic(const ModelShape&, uint64_t) {
  throw Error("backend '" + name() + "' cannot make synthetic weights");
}

BackendKind parse_backend_kind(const std::string& text) {
  if (text == "auto") return BackendKind::Auto;
  if (text == "cpu") return BackendKind::Cpu;
  if (text == "cuda") return BackendKind::Cuda;
  throw Error("unknown backend '" + text + "' (expected auto, cpu or cuda)");
}

}  // namespace lazyscope

#include "kernels/cuda/tool_switches.h"

#include <cstdlib>
#include <cstring>

namespace lazyscope::cuda {
namespace {

bool switched_on(const char* name) {
  const char* value = std::getenv(name);
  return value != nullptr && std::strcmp(value, "1") == 0;
}

}  // namespace

const ToolSwitches& tool_switches() {
  static const ToolSwitches switches = [] {
    ToolSwitches s;
    s.zero_gemm_outputs = switched_on("LAZYSCOPE_CUDA_ZERO_GEMM_OUTPUTS");
    s.no_programmatic_launch = switched_on("LAZYSCOPE_CUDA_NO_PDL");
    s.no_graphs = switched_on("LAZYSCOPE_CUDA_NO_GRAPHS");
    return s;
  }();
  return switches;
}

}  // namespace lazyscope::cuda

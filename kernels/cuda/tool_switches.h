#pragma once
// Process-wide switches for running the CUDA backend under compute-sanitizer, read once from the
// environment. They change only how work is launched or which bytes are known to be written,
// never what a step computes; the product never sets them (scripts/device/sanitize_all.sh does).
namespace lazyscope::cuda {

struct ToolSwitches {
  // LAZYSCOPE_CUDA_ZERO_GEMM_OUTPUTS=1: before each cuBLAS GEMM that overwrites its output, the
  // m x n output it is about to write is zeroed on the stream. initcheck does not see cuBLAS's
  // Hopper kernels store (TMA), so without this every read of a GEMM result reports as
  // uninitialised; bytes outside the GEMM's output stay unmarked, so our own reads past it still do.
  bool zero_gemm_outputs = false;
  // LAZYSCOPE_CUDA_NO_PDL=1: every kernel launches without programmatic dependent launch.
  bool no_programmatic_launch = false;
  // LAZYSCOPE_CUDA_NO_GRAPHS=1: one-token steps run on the stream, never from CUDA graphs (tests
  // that count graph replays then expect none: tests/kernels/cuda/gpu_test_util.h).
  bool no_graphs = false;
};

const ToolSwitches& tool_switches();

}  // namespace lazyscope::cuda

// --tp (generate, workload): refused while parsing, with why, when the size is outside 1..the
// GPUs of this machine or when the build has no NCCL (tensor parallelism compiled out).
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <string>

#include "kernels/backend.h"

namespace {

struct Outcome {
  int status = -1;
  std::string output;
};

Outcome run(const std::string& args) {
  Outcome o;
  FILE* pipe =
      popen(("timeout 60 " + std::string(LAZYSCOPE_CLI) + " " + args + " 2>&1").c_str(), "r");
  if (!pipe) return o;
  std::array<char, 4096> buffer;
  while (fgets(buffer.data(), buffer.size(), pipe)) o.output += buffer.data();
  const int status = pclose(pipe);
  o.status = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return o;
}

TEST(TensorParallelOption, SizesThisMachineCannotRunAreRefusedWithWhy) {
  const int gpus = lazyscope::cuda_device_count();
  for (int ranks : {0, gpus + 1, 2}) {
    const std::string why = lazyscope::tensor_parallel_error(ranks);
    if (why.empty()) continue;  // --tp 2 on a machine with two GPUs and NCCL runs
    for (const std::string command :
         {"generate --synthetic tiny", "workload --backend cuda --synthetic tiny"}) {
      SCOPED_TRACE(command + " --tp " + std::to_string(ranks));
      const Outcome o = run(command + " --tp " + std::to_string(ranks));
      EXPECT_NE(o.status, 0) << o.output;
      EXPECT_NE(o.status, 124) << "timed out: " << o.output;
      EXPECT_NE(o.output.find(why), std::string::npos) << o.output;
    }
  }
  EXPECT_NE(lazyscope::tensor_parallel_error(0), "");
  EXPECT_NE(lazyscope::tensor_parallel_error(gpus + 1), "");
}

}  // namespace

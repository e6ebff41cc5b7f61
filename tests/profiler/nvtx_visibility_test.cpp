// NVTX is always on: a tool attached through NVTX's injection interface (what Nsight Systems uses,
// here tests/profiler/nvtx_probe) sees the engine's ranges in the "LazyScope" domain on a plain
// CPU run, without --trace-gpu or --record, each with the request's number as its int64 payload.
// Skipped where the build has no nvtx3 headers.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "kernels/nvtx_ranges.h"

namespace lazyscope {
namespace {

TEST(NvtxAlwaysOn, AnInjectedToolSeesTheEngineRangesWithoutADeviceTrace) {
#ifndef LAZYSCOPE_NVTX_PROBE
  GTEST_SKIP() << "this build has no nvtx3 headers: NVTX ranges are compiled out";
#else
  ASSERT_TRUE(nvtx_compiled());
  const auto dir = std::filesystem::temp_directory_path() / ("ls-nvtx-" + std::to_string(getpid()));
  std::filesystem::create_directories(dir);
  const auto request = dir / "request.json";
  const auto log = dir / "nvtx.log";
  std::ofstream(request) << R"({"prefix_ids":[1,2],"document_ids":[[30,30,30,30,30,30,30,30,30,30,30,30,30,30,30,30,30,30],[31,31,31,31,31,31,31]],"query_ids":[4,5],"max_new_tokens":3})";
  const std::string command = "NVTX_INJECTION64_PATH=" + std::string(LAZYSCOPE_NVTX_PROBE) + " LAZYSCOPE_NVTX_LOG=" +
                              log.string() + " " + LAZYSCOPE_CLI + " generate --synthetic tiny --backend cpu --request " +
                              request.string() + " > " + (dir / "out.txt").string() + " 2>&1";
  ASSERT_EQ(std::system(command.c_str()), 0) << command;
  std::ifstream in(log);
  std::vector<std::string> lines;
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  ASSERT_GE(lines.size(), 3u) << "the injected tool saw nothing";
  EXPECT_EQ(lines[0], "attached");
  EXPECT_EQ(lines[1], "create\tLazyScope");
  EXPECT_EQ(lines[2], "push\tLazyScope\trequest (lazy)\t1");
  int pushes = 0, pops = 0, encodes = 0, prefills = 0, decodes = 0;
  for (const std::string& l : lines) {
    if (l.rfind("push\tLazyScope\t", 0) == 0) {
      ++pushes;
      const std::size_t tab = l.rfind('\t');
      ASSERT_GT(tab, 15u) << "a range without the request's payload: " << l;
      EXPECT_EQ(l.substr(tab + 1), "1") << l;  // the session's first (and only) request
      const std::string name = l.substr(15, tab - 15);
      encodes += name.rfind("encode segment", 0) == 0;
      prefills += name.rfind("prefill", 0) == 0;
      decodes += name.rfind("decode step", 0) == 0;
    }
    pops += l == "pop\tLazyScope";
  }
  EXPECT_EQ(encodes, 3);  // prefix and two documents
  EXPECT_EQ(prefills, 1);
  EXPECT_EQ(decodes, 2);
  EXPECT_EQ(pushes, pops);
  std::filesystem::remove_all(dir);
#endif
}

TEST(NvtxAlwaysOn, AnInjectedToolSeesTheServingEnginesSchedulerSteps) {
#ifndef LAZYSCOPE_NVTX_PROBE
  GTEST_SKIP() << "this build has no nvtx3 headers: NVTX ranges are compiled out";
#else
  const auto dir = std::filesystem::temp_directory_path() / ("ls-nvtx-wl-" + std::to_string(getpid()));
  std::filesystem::create_directories(dir);
  const auto log = dir / "nvtx.log";
  const std::string command = "NVTX_INJECTION64_PATH=" + std::string(LAZYSCOPE_NVTX_PROBE) + " LAZYSCOPE_NVTX_LOG=" +
                              log.string() + " " + LAZYSCOPE_CLI +
                              " workload --backend cpu --synthetic tiny --documents 6 --doc-tokens 20 "
                              "--docs-per-request 2 --requests 4 --concurrency 2 --output-tokens 3 --policies lazy "
                              "--kv-budget 8MiB > " + (dir / "out.txt").string() + " 2>&1";
  ASSERT_EQ(std::system(command.c_str()), 0) << command;
  std::ifstream in(log);
  int steps = 0, chunks = 0, decodes = 0, pushes = 0, pops = 0;
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("push\tLazyScope\t", 0) == 0) {
      ++pushes;
      const std::string name = line.substr(15);
      steps += name.rfind("scheduler step ", 0) == 0;
      chunks += name.rfind("prefill chunk ", 0) == 0;
      decodes += name.rfind("decode batch ", 0) == 0;
    }
    pops += line == "pop\tLazyScope";
  }
  EXPECT_GT(steps, 0);
  EXPECT_GT(chunks, 0);
  EXPECT_GT(decodes, 0);
  EXPECT_GE(steps, decodes);  // at most one decode launch per step
  EXPECT_EQ(pushes, pops);
  std::filesystem::remove_all(dir);
#endif
}

}  // namespace
}  // namespace lazyscope

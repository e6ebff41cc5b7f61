// Device traces in session reports: CUPTI records and host ranges also become rows of `spans` (the
// timeline's and the Chrome trace's source) on the recorder's clock, with a "GPU" process in the
// Chrome trace; asking for a trace on the CPU backend says why there is none and changes nothing else.
#include <gtest/gtest.h>

#include <chrono>

#include "engine/runtime/session.h"
#include "profiler/session_recorder.h"

namespace lazyscope {
namespace {

int64_t steady_now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

TEST(DeviceTrace, SpansAreRecordedOnTheRecorderClock) {
  SessionRecorder rec;
  const int64_t t = steady_now_ns() + 2'000'000;  // 2 ms after the recorder started (at least)
  DeviceActivity a;
  a.device_traced = true;
  a.ranges = {{"prefill 64 tokens (lazy)", t, t + 5'000'000, 1, 0}};
  KernelRecord k;
  k.start_ns = t + 1'000'000;
  k.end_ns = t + 1'250'000;
  k.stream_id = 7;
  k.mangled_name = "_ZN9lazyscope4cuda12_GLOBAL__N_113decode_kernelILi128ELi4ELb1EEEvNS0_12DecodeParamsE";
  a.kernels = {k};
  a.memcpys = {{t + 4'000'000, t + 4'001'000, 0, 1, 7, 9, 4, 2, 0, 0, 0}};
  rec.on_device_activity(a);
  RequestFinishedEvent done;
  done.policy = "lazy";
  rec.on_request_finished(done);
  const SessionRecording r = rec.snapshot();
  std::vector<RecordedSpan> device;
  for (const RecordedSpan& s : r.spans) {
    if (s.category == "kernel" || s.category == "memcpy" || s.category == "range") device.push_back(s);
  }
  ASSERT_EQ(device.size(), 3u);
  EXPECT_EQ(device[1].name, "decode_kernel<128, 4, true>");
  EXPECT_EQ(device[1].request, 1);
  EXPECT_GE(device[0].start_ms, 2.0);
  EXPECT_NEAR(device[1].start_ms - device[0].start_ms, 1.0, 1e-6);
  EXPECT_NEAR(device[1].duration_ms, 0.25, 1e-6);
  EXPECT_NEAR(device[0].duration_ms, 5.0, 1e-6);

  const std::string trace = chrome_trace_json(r);
  EXPECT_NE(trace.find("\"GPU\""), std::string::npos);
  EXPECT_NE(trace.find("NVTX ranges"), std::string::npos);
  EXPECT_NE(trace.find("decode_kernel<128, 4, true>"), std::string::npos);
}

TEST(DeviceTrace, HostOnlyTraceHasNoGpuProcess) {
  SessionRecorder rec;
  RequestFinishedEvent done;
  rec.on_request_finished(done);
  EXPECT_EQ(chrome_trace_json(rec.snapshot()).find("\"GPU\""), std::string::npos);
}

TEST(DeviceTrace, CpuSessionSaysWhyThereIsNoTrace) {
  SessionRecorder rec;
  SessionOptions o;
  o.synthetic = "tiny";
  o.backend = BackendKind::Cpu;
  o.trace_device = true;
  Session session(o, &rec);
  EXPECT_NE(session.device_trace_note().find("CUDA backend"), std::string::npos) << session.device_trace_note();
  Request r;
  r.document_ids = {std::vector<int32_t>(18, 30)};
  r.query_ids = std::vector<int32_t>{4, 5};
  r.max_new_tokens = 2;
  const RunResult result = session.submit(r, RunOptions{});
  EXPECT_EQ(result.generated_ids.size(), 2u);
  for (const RecordedSpan& s : rec.snapshot().spans) EXPECT_NE(s.category, "kernel");
}

}  // namespace
}  // namespace lazyscope

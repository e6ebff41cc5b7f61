// The timeline's GPU lane: a session traced on the GPU (--trace-gpu) shows its kernels and copies
// on a fourth lane, colour-coded, hoverable; NVTX ranges stay out (they repeat the host lanes).
#include <gtest/gtest.h>

#include <QImage>

#include "app/workbench/views/timeline_view.h"
#include "workbench_test_support.h"

namespace lazyscope::workbench {
namespace {

// A prefill and three decode steps as a traced CUDA session records them.
SessionRecording traced_session() {
  SessionRecording r;
  r.spans.push_back({1, "request 1 (lazy)", "request", 0.0, 9.0});
  r.spans.push_back({1, "prefill + first token", "prefill", 0.0, 6.0});
  r.spans.push_back({1, "prefill 1235 tokens (lazy)", "range", 0.05, 5.9});
  double t = 0.1;
  for (int layer = 0; layer < 16; ++layer) {
    r.spans.push_back({1, "gemm_bf16", "kernel", t, 0.12});
    r.spans.push_back({1, "kv_write_kernel", "kernel", t + 0.13, 0.01});
    r.spans.push_back({1, "prefill_kernel<128, 2, true>", "kernel", t + 0.15, 0.09});
    r.spans.push_back({1, "gemm_bf16", "kernel", t + 0.25, 0.08});
    t += 0.35;
  }
  r.spans.push_back({1, "memcpy DtoH 4 B", "memcpy", 5.95, 0.004});
  for (int step = 1; step <= 3; ++step) {
    const double s0 = 6.0 + (step - 1);
    r.spans.push_back({1, "decode step " + std::to_string(step), "decode", s0, 1.0});
    r.spans.push_back({1, "decode step " + std::to_string(step), "range", s0 + 0.01, 0.95});
    r.spans.push_back({1, "gemv_bf16", "kernel", s0 + 0.05, 0.5});
    r.spans.push_back({1, "decode_kernel<128, 4, true>", "kernel", s0 + 0.56, 0.02});
    r.spans.push_back({1, "gemv_bf16", "kernel", s0 + 0.6, 0.3});
  }
  return r;
}

TEST(TimelineGpuLane, KernelsGetTheirOwnLane) {
  TimelineView view;
  view.resize(1200, 190);
  view.show();
  const SessionRecording r = traced_session();
  view.setRecording(r);
  EXPECT_EQ(view.laneCount(), int(TimelineView::kLaneCount));
  int ranges = 0;
  for (const RecordedSpan& s : r.spans) ranges += s.category == "range" ? 1 : 0;
  EXPECT_EQ(view.spanCount(), int(r.spans.size()) - ranges);  // ranges are not drawn
  int gpu = 0;
  for (const RecordedSpan& s : view.spans()) gpu += TimelineView::laneOf(s) == TimelineView::kGpuLane ? 1 : 0;
  EXPECT_EQ(gpu, 16 * 4 + 1 + 3 * 3);
  const QImage image = view.grab().toImage();
  image.save(testing::artifact_path("timeline_gpu_lane.png"));
  EXPECT_GT(view.lastPaintedBars(), 40);

  // Zoom into the first decode step: its attention kernel is a hoverable bar on the GPU lane.
  view.setZoom(900.0);
  view.scrollToTime(6.4);
  int attention = -1;
  for (int x = 118; x < view.viewport()->width() && attention < 0; ++x) {
    for (int y = 0; y < view.viewport()->height() && attention < 0; y += 3) {
      const int index = view.spanAt(QPoint(x, y));
      if (index >= 0 && view.spans()[size_t(index)].name.rfind("decode_kernel", 0) == 0) attention = index;
    }
  }
  ASSERT_GE(attention, 0);
  EXPECT_NE(view.spanToolTip(attention).indexOf(QStringLiteral("on the GPU (kernel)")), -1);
}

TEST(TimelineGpuLane, HostOnlySessionsKeepThreeLanes) {
  TimelineView view;
  SessionRecording r;
  r.spans.push_back({1, "request 1 (lazy)", "request", 0.0, 2.0});
  r.spans.push_back({1, "prefill + first token", "prefill", 0.0, 1.0});
  view.setRecording(r);
  EXPECT_EQ(view.laneCount(), int(TimelineView::kGpuLane));
}

}  // namespace
}  // namespace lazyscope::workbench

// The GPU timeline: rows per thread (NVTX by depth, runtime, driver) and per stream, the
// launch → kernel link, the level-of-detail walk (every record accounted for, at most a bar or two
// per pixel), scroll bars that reach every row, zoom and pan, and the Kernel Statistics panel
// following the selected range.
#include <gtest/gtest.h>

#include <QKeyEvent>
#include <QScrollBar>
#include <QSignalSpy>
#include <QSortFilterProxyModel>
#include <QTest>

#include "app/workbench/views/gpu_timeline_view.h"
#include "app/workbench/views/kernel_stats_view.h"
#include "workbench_test_support.h"

namespace lazyscope::workbench {
namespace {

KernelRecord kernel(const std::string& name, int64_t start, int64_t end, uint32_t stream, uint32_t corr) {
  KernelRecord k;
  k.display_name = name;
  k.start_ns = start;
  k.end_ns = end;
  k.stream_id = stream;
  k.correlation_id = corr;
  k.grid[0] = 4;
  k.block[0] = 128;
  k.registers_per_thread = 32;
  return k;
}

ApiRecord call(const std::string& name, int64_t start, int64_t end, uint32_t thread, uint32_t corr, bool driver = false) {
  ApiRecord a;
  a.name = name;
  a.start_ns = start;
  a.end_ns = end;
  a.thread_id = thread;
  a.correlation_id = corr;
  a.driver = driver;
  return a;
}

RecordedRange range(const std::string& name, int64_t start, int64_t end, uint32_t thread, int depth) {
  RecordedRange r;
  r.range = {name, start, end, thread, depth};
  return r;
}

// Thread 11: request > decode step (depth 0, 1), two launches and a graph launch; thread 12: one
// range. Stream 7: two kernels; stream 9: a graph's three kernels and a copy.
SessionRecording small_trace() {
  SessionRecording r;
  r.ranges = {range("request 1 (lazy)", 0, 100000, 11, 0), range("decode step 1", 1000, 90000, 11, 1),
              range("encode segment", 5000, 6000, 12, 0)};
  r.api_calls = {call("cudaLaunchKernel_v7000", 2000, 2500, 11, 1), call("cudaLaunchKernel_v7000", 3000, 3500, 11, 2),
                 call("cudaGraphLaunch_v10000", 4000, 4800, 11, 3), call("cuLaunchKernelEx", 2100, 2400, 11, 1, true)};
  r.kernels = {kernel("gemv_bf16", 10000, 30000, 7, 1), kernel("decode_kernel<64, 3, true>", 31000, 35000, 7, 2),
               kernel("graph_a", 40000, 41000, 9, 3), kernel("graph_b", 41000, 42000, 9, 3),
               kernel("graph_c", 42000, 43000, 9, 3)};
  MemcpyRecord m;
  m.start_ns = 50000;
  m.end_ns = 51000;
  m.stream_id = 9;
  m.correlation_id = 4;
  m.copy_kind = 2;
  m.bytes = 4;
  r.memcpys = {m};
  return r;
}

TEST(GpuTimelineData, RowsPerThreadDepthAndStream) {
  const GpuTimelineData d(small_trace());
  std::vector<std::string> titles;
  for (const TimelineRow& row : d.rows()) titles.push_back(row.title);
  EXPECT_EQ(titles, (std::vector<std::string>{"NVTX · thread 11", "NVTX · depth 1", "CUDA runtime · thread 11",
                                              "CUDA driver · thread 11", "NVTX · thread 12", "GPU 0 · stream 7",
                                              "GPU 0 · stream 9"}));
  EXPECT_EQ(d.itemCount(), 3u + 4u + 5u + 1u);
  EXPECT_EQ(d.beginNs(), 0);
  EXPECT_EQ(d.endNs(), 100000);
  EXPECT_EQ(d.rows()[6].items.size(), 4u);  // the graph's kernels and the copy
}

TEST(GpuTimelineData, LaunchAndKernelAreLinkedBothWays) {
  const GpuTimelineData d(small_trace());
  // The decode kernel (stream 7, second item) was launched by the second runtime call.
  const TimelineRef k = d.itemAt(5, 33000, 0);
  ASSERT_TRUE(k.valid());
  EXPECT_EQ(d.labels()[d.item(k).label], "decode_kernel<64, 3, true>");
  const std::vector<TimelineRef> launch = d.correlated(k);
  ASSERT_EQ(launch.size(), 1u);
  EXPECT_EQ(launch[0].row, 2);
  EXPECT_EQ(d.item(launch[0]).start_ns, 3000);
  EXPECT_NE(d.describe(k).find("launched by cudaLaunchKernel_v7000"), std::string::npos);
  // The graph launch reaches its three kernels; the runtime and driver call of id 1 both link
  // to the GEMV.
  const TimelineRef graph = d.itemAt(2, 4400, 0);
  ASSERT_TRUE(graph.valid());
  EXPECT_EQ(d.correlated(graph).size(), 3u);
  EXPECT_NE(d.describe(graph).find("and 2 more"), std::string::npos);
  const TimelineRef gemv = d.itemAt(5, 20000, 0);
  EXPECT_EQ(d.correlated(gemv).size(), 2u);
  // NVTX ranges have no correlation id; nothing under an empty spot.
  EXPECT_TRUE(d.correlated(d.itemAt(0, 500, 0)).empty());
  EXPECT_FALSE(d.itemAt(5, 36000, 100).valid());
  EXPECT_TRUE(d.itemAt(5, 36000, 2000).valid());  // within the slack of the decode kernel's end
}

TEST(GpuTimelineData, LevelOfDetailAccountsForEveryRecord) {
  SessionRecording r;
  constexpr int kKernels = 200000;
  for (int i = 0; i < kKernels; ++i) r.kernels.push_back(kernel(i % 2 ? "a" : "b", i * 100LL, i * 100LL + 60, 7, 0));
  const GpuTimelineData d(r);
  const int width = 800;
  for (const double ns_per_px : {d.endNs() / double(width), 1000.0, 50.0}) {
    for (const double t0 : {0.0, 7.3e6, 1.99e7 - width * ns_per_px}) {
      size_t merged = 0, lod_bars = 0;
      const size_t bars = d.visit(0, t0, ns_per_px, width, true, [&](const TimelineBar& b) {
        merged += b.count;
        ++lod_bars;
        EXPECT_GE(b.x1, b.x0);
        EXPECT_LT(b.x0, width);
      });
      EXPECT_EQ(bars, lod_bars);
      size_t every = 0;
      d.visit(0, t0, ns_per_px, width, false, [&](const TimelineBar&) { ++every; });
      // The same records, merged or not; at most about one bar per pixel column with LOD.
      EXPECT_EQ(merged, every) << ns_per_px << " ns/px at " << t0;
      EXPECT_LE(lod_bars, size_t(width) + 2);
      if (ns_per_px == 50.0) {
        EXPECT_EQ(lod_bars, every);  // 1.2 px wide kernels: nothing merged
      }
    }
  }
  // Fully zoomed out every record is in view, in about one bar per pixel.
  size_t all = 0, bars = 0;
  d.visit(0, 0, d.endNs() / double(width), width, true, [&](const TimelineBar& b) {
    all += b.count;
    ++bars;
  });
  EXPECT_EQ(all, size_t(kKernels));
  EXPECT_LE(bars, size_t(width) + 1);
}

TEST(GpuTimelineView, ScrollBarsReachEveryRow) {
  SessionRecording r = small_trace();
  for (uint32_t s = 20; s < 60; ++s) r.kernels.push_back(kernel("k", 1000 * s, 1000 * s + 500, s, 0));
  GpuTimelineView view;
  view.resize(900, 260);
  view.show();
  view.setRecording(r);
  ASSERT_EQ(view.rowCount(), 7 + 40);
  QScrollBar* v = view.verticalScrollBar();
  EXPECT_GT(v->maximum(), 0);
  v->setValue(v->maximum());
  const int last = view.rowCount() - 1;
  EXPECT_GE(view.rowTop(last), GpuTimelineView::kAxisHeight);
  EXPECT_LE(view.rowTop(last) + GpuTimelineView::kRowHeight, view.viewport()->height());
  EXPECT_EQ(view.rowAt(view.rowTop(last) + 5), last);
  view.grab().save(testing::artifact_path("gpu_timeline_rows.png"));
  EXPECT_GT(view.lastPaintedRows(), 5u);
  EXPECT_LT(view.lastPaintedRows(), size_t(view.rowCount()));  // only the visible rows are drawn
}

TEST(GpuTimelineView, ZoomPanAndHoverLink) {
  GpuTimelineView view;
  view.resize(1000, 300);
  view.show();
  view.setRecording(small_trace());
  const double fit = view.nsPerPixel();
  QTest::keyClick(&view, Qt::Key_Plus);
  EXPECT_LT(view.nsPerPixel(), fit);
  QTest::keyClick(&view, Qt::Key_Right);
  const double start = view.viewStartNs();
  EXPECT_GT(start, 0.0);
  QTest::keyClick(&view, Qt::Key_Left);
  EXPECT_LT(view.viewStartNs(), start);
  QTest::keyClick(&view, Qt::Key_Home);
  EXPECT_DOUBLE_EQ(view.nsPerPixel(), fit);
  // Drag pans: zoomed in, dragging left moves the view later in time.
  view.setNsPerPixel(20.0);
  view.scrollToNs(10000);
  const double before = view.viewStartNs();
  QTest::mousePress(view.viewport(), Qt::LeftButton, {}, QPoint(600, 150));
  QMouseEvent move(QEvent::MouseMove, QPointF(500, 150), view.viewport()->mapToGlobal(QPointF(500, 150)),
                   Qt::NoButton, Qt::LeftButton, Qt::NoModifier);
  QApplication::sendEvent(view.viewport(), &move);
  QTest::mouseRelease(view.viewport(), Qt::LeftButton, {}, QPoint(500, 150));
  EXPECT_NEAR(view.viewStartNs() - before, 100 * 20.0, 1e-6);

  // Hover the decode kernel: one link, to the runtime call that launched it.
  view.setNsPerPixel(40.0);
  view.scrollToNs(0);
  const int y = view.rowTop(5) + GpuTimelineView::kRowHeight / 2;
  const int x = int(view.xOfNs(33000));
  const TimelineRef k = view.itemAt(QPoint(x, y));
  ASSERT_TRUE(k.valid());
  view.setHovered(k);
  ASSERT_EQ(view.links().size(), 1u);
  EXPECT_EQ(view.links()[0].row, 2);
  EXPECT_NE(view.itemToolTip(k).indexOf(QStringLiteral("launched by cudaLaunchKernel_v7000")), -1);
  view.grab().save(testing::artifact_path("gpu_timeline_hover.png"));
}

TEST(GpuTimelineView, KernelStatisticsFollowTheSelection) {
  const SessionRecording r = small_trace();
  GpuTimelineView view;
  view.resize(1000, 300);
  view.show();
  view.setRecording(r);
  KernelStatsView stats;
  stats.setKernels(r.kernels, view.data().beginNs());
  QObject::connect(&view, &GpuTimelineView::selectionChanged, &stats, &KernelStatsView::setRange);
  EXPECT_EQ(stats.model()->rowCount(), 5);
  // Shift+drag over 39 µs .. 44 µs: the three graph kernels.
  QSignalSpy selected(&view, &GpuTimelineView::selectionChanged);
  const int y = view.rowTop(6) + 5;
  QTest::mousePress(view.viewport(), Qt::LeftButton, Qt::ShiftModifier, QPoint(int(view.xOfNs(39000)), y));
  QMouseEvent move(QEvent::MouseMove, QPointF(view.xOfNs(44000), y), view.viewport()->mapToGlobal(QPointF(view.xOfNs(44000), y)),
                   Qt::NoButton, Qt::LeftButton, Qt::ShiftModifier);
  QApplication::sendEvent(view.viewport(), &move);
  QTest::mouseRelease(view.viewport(), Qt::LeftButton, Qt::ShiftModifier, QPoint(int(view.xOfNs(44000)), y));
  ASSERT_GE(selected.count(), 1);
  EXPECT_TRUE(view.hasSelection());
  EXPECT_EQ(stats.model()->stats().kernels, 3);
  EXPECT_EQ(stats.model()->rowCount(), 3);
  EXPECT_NE(stats.summary().indexOf(QStringLiteral("Selected range")), -1);
  // A double click clears it: every kernel again.
  QTest::mouseDClick(view.viewport(), Qt::LeftButton, {}, QPoint(500, y));
  EXPECT_FALSE(view.hasSelection());
  EXPECT_EQ(stats.model()->stats().kernels, 5);
}

TEST(KernelStatsView, SortsNumericallyByAnyColumn) {
  std::vector<KernelRecord> k;
  // "a": 3 launches of 9 µs; "b": 1 launch of 100 µs; "c": 20 launches of 1 µs.
  for (int i = 0; i < 3; ++i) k.push_back(kernel("a", i * 1000000LL, i * 1000000LL + 9000, 7, 0));
  k.push_back(kernel("b", 5000000, 5100000, 7, 0));
  for (int i = 0; i < 20; ++i) k.push_back(kernel("c", 6000000 + i * 10000LL, 6000000 + i * 10000LL + 1000, 7, 0));
  KernelStatsView view;
  view.setKernels(k, 0);
  QSortFilterProxyModel* p = view.proxy();
  auto names = [&] {
    QStringList out;
    for (int r = 0; r < p->rowCount(); ++r) out << p->index(r, KernelStatsModel::kName).data().toString();
    return out;
  };
  EXPECT_EQ(names(), (QStringList{"b", "a", "c"}));  // total: 100, 27, 20 µs
  p->sort(KernelStatsModel::kCount, Qt::DescendingOrder);
  EXPECT_EQ(names(), (QStringList{"c", "a", "b"}));
  p->sort(KernelStatsModel::kMean, Qt::AscendingOrder);
  EXPECT_EQ(names(), (QStringList{"c", "a", "b"}));  // 1, 9, 100 µs: numbers, not text
  p->sort(KernelStatsModel::kMax, Qt::DescendingOrder);
  EXPECT_EQ(names(), (QStringList{"b", "a", "c"}));
  EXPECT_EQ(p->index(0, KernelStatsModel::kShare).data().toString(), QStringLiteral("68.0 %"));  // 100 / 147
}

}  // namespace
}  // namespace lazyscope::workbench

namespace lazyscope::workbench {
namespace {

TEST(GpuTimelineData, NvtxDepthFollowsTheNestingNotTheOverlap) {
  SessionRecording r;
  auto add = [&](const char* name, int64_t a, int64_t b) {
    RecordedRange x;
    x.range = {name, a, b, 5, 0};  // the depth as a report stores it: none
    r.ranges.push_back(x);
  };
  add("request", 0, 1000);
  add("decode step 1", 100, 400);
  add("inner", 150, 200);
  add("decode step 2", 400, 900);  // starts where step 1 ended: a sibling
  add("overlaps", 850, 1200);      // outlasts the request: beside it, not inside
  const GpuTimelineData d(r);
  ASSERT_EQ(d.rows().size(), 3u);
  EXPECT_EQ(d.rows()[0].items.size(), 2u);  // request, overlaps
  EXPECT_EQ(d.rows()[1].items.size(), 2u);  // the two decode steps
  EXPECT_EQ(d.rows()[2].items.size(), 1u);  // inner
  EXPECT_EQ(d.rows()[2].title, "NVTX · depth 2");
}

}  // namespace
}  // namespace lazyscope::workbench

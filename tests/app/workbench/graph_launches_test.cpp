// CUDA graph launches recorded as a whole (report schema 3, CUPTI_ACTIVITY_KIND_GRAPH_TRACE: the
// decode steps past the kernel-detail ones) in the workbench: a report written by the profiler's
// own recorder and writer, read back, shows them on the GPU timeline on their stream at their
// times, linked to their cudaGraphLaunch and placed in their decode step; the kernel statistics
// count them in rows of their own, in the GPU time share, with a note on which steps have kernel
// rows, and follow the selected range; the report browser replays them; the host timeline draws
// them on its GPU lane and scrolls to it in a short dock.
#include <gtest/gtest.h>

#include <QDir>
#include <QFile>
#include <QLabel>
#include <QMouseEvent>
#include <QScrollBar>
#include <QSignalSpy>
#include <QTemporaryDir>
#include <QTest>
#include <chrono>
#include <filesystem>

#include "app/workbench/main_window.h"
#include "app/workbench/views/gpu_timeline_view.h"
#include "app/workbench/views/kernel_stats_view.h"
#include "app/workbench/views/report_compare_window.h"
#include "app/workbench/views/report_window.h"
#include "app/workbench/views/timeline_view.h"
#include "profiler/kernel_stats.h"
#include "workbench_test_support.h"

namespace lazyscope::workbench {
namespace {

constexpr uint32_t kThread = 4242;
constexpr uint32_t kStream = 7;
constexpr int kGraphSteps = 3;

int64_t steady_now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// One request as the default trace records it, starting at t0: decode step 1 runs its two kernels
// one by one (kernel detail), decode steps 2..4 replay CUDA graph `graph_id` on stream 7, one
// GraphRecord each (GPU time 300, 400, 500 µs), launched by a cudaGraphLaunch inside the step's
// NVTX range. Correlation ids start at `corr`.
DeviceActivity request_activity(int64_t t0, int request, uint32_t graph_id, uint32_t corr) {
  DeviceActivity a;
  a.device_traced = true;
  a.kernel_detail_steps = 1;
  a.graph_level_steps = kGraphSteps;
  a.ranges.push_back({"request (lazy)", t0, t0 + 9'000'000, kThread, 0, request});
  a.ranges.push_back({"decode step 1", t0 + 1'000'000, t0 + 2'000'000, kThread, 1, request});
  for (int k = 0; k < 2; ++k) {
    const int64_t at = t0 + 1'100'000 + k * 300'000;
    a.api_calls.push_back({at, at + 10'000, false, kThread, corr, "cudaLaunchKernel_v7000", 0});
    KernelRecord kernel;
    kernel.start_ns = at + 50'000;
    kernel.end_ns = at + 250'000;  // 200 µs each
    kernel.stream_id = kStream;
    kernel.correlation_id = corr++;
    kernel.mangled_name = k == 0 ? "gemv_bf16" : "decode_kernel";
    kernel.grid[0] = 8;
    kernel.block[0] = 128;
    kernel.registers_per_thread = 40;
    a.kernels.push_back(kernel);
  }
  for (int s = 0; s < kGraphSteps; ++s) {
    const int64_t step0 = t0 + 2'000'000 + s * 2'000'000;
    a.ranges.push_back(
        {"decode step " + std::to_string(s + 2), step0, step0 + 1'000'000, kThread, 1, request});
    a.api_calls.push_back(
        {step0 + 100'000, step0 + 120'000, false, kThread, corr, "cudaGraphLaunch_v10000", 0});
    a.graphs.push_back({step0 + 200'000, step0 + 200'000 + (300'000 + s * 100'000), 0, 1, kStream,
                        corr, graph_id});
    ++corr;
  }
  return a;
}

struct Recorded {
  SessionRecording live;    // the recorder's snapshot
  SessionRecording loaded;  // the same, saved and read back
  QString path;
};

// Two requests through the recorder (graphs 5 and 6), saved with save_session_sqlite and loaded.
Recorded record(const QTemporaryDir& dir) {
  SessionRecorder recorder;
  recorder.set_metadata("backend", "cuda");
  const int64_t t0 = steady_now_ns() + 1'000'000;
  for (int request = 1; request <= 2; ++request) {
    recorder.on_device_activity(request_activity(t0 + (request - 1) * 20'000'000, request,
                                                 uint32_t(4 + request), uint32_t(100 * request)));
    RequestFinishedEvent done;
    done.policy = request == 1 ? "lazy" : "materialized";
    done.prompt_tokens = 64;
    done.generated_tokens = 1 + kGraphSteps;
    recorder.on_request_finished(done);
  }
  Recorded r;
  r.live = recorder.snapshot();
  r.path = dir.filePath(QStringLiteral("graphs.db"));
  save_session_sqlite(r.live, std::filesystem::path(r.path.toStdString()));
  r.loaded = load_session_sqlite(std::filesystem::path(r.path.toStdString()));
  return r;
}

int row_titled(const GpuTimelineData& d, const std::string& title) {
  for (int i = 0; i < int(d.rows().size()); ++i)
    if (d.rows()[size_t(i)].title == title) return i;
  return -1;
}

std::vector<TimelineRef> graph_items(const GpuTimelineData& d) {
  std::vector<TimelineRef> out;
  for (int r = 0; r < int(d.rows().size()); ++r)
    for (int i = 0; i < int(d.rows()[size_t(r)].items.size()); ++i)
      if (d.rows()[size_t(r)].items[size_t(i)].kind == TimelineItemKind::Graph)
        out.push_back({r, i});
  return out;
}

TEST(GraphLaunches, TimelineDrawsThemOnTheirStreamAtTheirTimes) {
  QTemporaryDir dir;
  const Recorded rec = record(dir);
  ASSERT_EQ(rec.live.graphs.size(), size_t(2 * kGraphSteps));
  ASSERT_EQ(rec.loaded.graphs.size(), rec.live.graphs.size());
  for (const SessionRecording* recording : {&rec.live, &rec.loaded}) {
    const GpuTimelineData d(*recording);
    const int stream = row_titled(d, "GPU 0 · stream 7");
    ASSERT_GE(stream, 0);
    const std::vector<TimelineRef> graphs = graph_items(d);
    ASSERT_EQ(graphs.size(), size_t(2 * kGraphSteps));
    // Every graph item is on stream 7's row, with the times the recorder stored (relative to its
    // request's range start: 2.2 ms, 4.2 ms, 6.2 ms in, lasting 300, 400, 500 µs).
    for (size_t g = 0; g < graphs.size(); ++g) {
      EXPECT_EQ(graphs[g].row, stream);
      const TimelineItem& it = d.item(graphs[g]);
      const GraphRecord& source = recording->graphs[it.source];
      EXPECT_EQ(it.start_ns, source.start_ns);
      EXPECT_EQ(it.end_ns, source.end_ns);
      const int step = int(g % kGraphSteps);
      const int64_t request_start =
          recording->ranges[g < size_t(kGraphSteps) ? 0 : recording->ranges.size() / 2]
              .range.start_ns;
      EXPECT_EQ(it.start_ns - request_start, 2'200'000 + step * 2'000'000) << g;
      EXPECT_EQ(it.end_ns - it.start_ns, 300'000 + step * 100'000) << g;
      EXPECT_EQ(d.labels()[it.label], g < size_t(kGraphSteps) ? "CUDA graph 5" : "CUDA graph 6");
    }
    // The stream's row holds the 4 kernels and the 6 graph launches, in time order.
    EXPECT_EQ(d.rows()[size_t(stream)].items.size(), 4u + 6u);
    // Graph launch ↔ cudaGraphLaunch, both ways; the tooltip says where it was launched.
    const TimelineRef first = graphs.front();
    const std::vector<TimelineRef> launch = d.correlated(first);
    ASSERT_EQ(launch.size(), 1u);
    EXPECT_EQ(d.labels()[d.item(launch[0]).label], "cudaGraphLaunch_v10000");
    ASSERT_EQ(d.correlated(launch[0]).size(), 1u);
    EXPECT_EQ(d.correlated(launch[0])[0], first);
    const std::string text = d.describe(first);
    EXPECT_NE(text.find("CUDA graph 5"), std::string::npos) << text;
    EXPECT_NE(text.find("duration 300 µs"), std::string::npos) << text;
    EXPECT_NE(text.find("launched in request 1: request (lazy) › decode step 2"), std::string::npos)
        << text;
    EXPECT_NE(text.find("launched by cudaGraphLaunch_v10000 (100 µs before the graph started)"),
              std::string::npos)
        << text;
    EXPECT_NE(text.find("not itemised"), std::string::npos) << text;
    EXPECT_NE(
        text.find("request 1: decode step 1 has kernel rows, 3 later steps ran as graph launches"),
        std::string::npos)
        << text;
    // The second request's last graph launch belongs to its decode step 4.
    EXPECT_NE(d.describe(graphs.back()).find("request 2: request (lazy) › decode step 4"),
              std::string::npos);
  }
}

TEST(GraphLaunches, LevelOfDetailAccountsForGraphItems) {
  QTemporaryDir dir;
  const GpuTimelineData d(record(dir).loaded);
  const int stream = row_titled(d, "GPU 0 · stream 7");
  ASSERT_GE(stream, 0);
  // Zoomed out so far that everything on the stream shares a few pixels: merged, yet all counted.
  for (const double ns_per_px : {double(d.endNs() - d.beginNs()) / 4.0, 1000.0, 10.0}) {
    size_t merged = 0, every = 0;
    d.visit(stream, double(d.beginNs()), ns_per_px, 40000, true,
            [&](const TimelineBar& b) { merged += b.count; });
    d.visit(stream, double(d.beginNs()), ns_per_px, 40000, false,
            [&](const TimelineBar&) { ++every; });
    EXPECT_EQ(merged, every) << ns_per_px;
  }
  size_t all = 0, graphs = 0, merged_with_graphs = 0;
  d.visit(stream, double(d.beginNs()), double(d.endNs() - d.beginNs()) / 4.0, 4, true,
          [&](const TimelineBar& b) {
            all += b.count;
            const size_t g = d.graphItemsIn(stream, b.first, b.count);
            graphs += g;
            merged_with_graphs += b.count > 1 && g > 0 ? 1 : 0;
          });
  EXPECT_EQ(all, 10u);
  EXPECT_EQ(graphs, 6u);  // every graph launch is in some bar, and the view colours those pink
  EXPECT_GE(merged_with_graphs, 1u);
  EXPECT_EQ(d.graphItemsIn(stream, 0, 0), 0u);
  EXPECT_EQ(d.graphItemsIn(stream, 0, 11), 0u);  // past the row: nothing, not a read out of range
  EXPECT_EQ(d.graphItemsIn(row_titled(d, "NVTX · thread 4242"), 0, 2), 0u);
}

TEST(GraphLaunches, StatisticsCountThemAndFollowTheSelection) {
  QTemporaryDir dir;
  const Recorded rec = record(dir);
  GpuTimelineView view;
  view.resize(1400, 320);
  view.show();
  view.setRecording(rec.loaded);
  KernelStatsView stats;
  stats.resize(1400, 400);
  stats.show();
  stats.setRecording(rec.loaded, view.data().beginNs());
  QObject::connect(&view, &GpuTimelineView::selectionChanged, &stats, &KernelStatsView::setRange);

  // 4 kernels of 200 µs; graph 5 and graph 6: 300 + 400 + 500 µs each.
  const KernelStats& s = stats.model()->stats();
  EXPECT_EQ(s.kernels, 4);
  EXPECT_EQ(s.total_ns, 800'000);
  EXPECT_EQ(s.graph_launches, 6);
  EXPECT_EQ(s.graph_total_ns, 2'400'000);
  ASSERT_EQ(s.rows.size(), 4u);  // gemv_bf16, decode_kernel, CUDA graph 5, CUDA graph 6
  double shares = 0.0;
  int graph_rows = 0;
  for (const KernelStatsRow& r : s.rows) {
    shares += r.share;
    if (!r.graph) continue;
    ++graph_rows;
    EXPECT_EQ(r.count, 3);
    EXPECT_EQ(r.total_ns, 1'200'000);
    EXPECT_DOUBLE_EQ(r.median_ns, 400'000.0);
    EXPECT_EQ(r.p95_ns, 500'000);
    EXPECT_DOUBLE_EQ(r.share, 1.2 / 3.2);
  }
  EXPECT_EQ(graph_rows, 2);
  EXPECT_NEAR(shares, 1.0, 1e-12);  // kernels and graphs together are the GPU busy time
  EXPECT_NE(stats.summary().indexOf(QStringLiteral("4 kernels (800 µs) and 6 CUDA graph launches "
                                                   "(2.4 ms): 3.2 ms of GPU busy time in 4 rows")),
            -1)
      << stats.summary().toStdString();
  const QString note = stats.detailNote();
  EXPECT_NE(note.indexOf(QStringLiteral("decode step 1 of each traced request has kernel rows")),
            -1)
      << note.toStdString();
  EXPECT_NE(note.indexOf(QStringLiteral("6 later decode steps ran as 6 graph launches")), -1)
      << note.toStdString();
  EXPECT_TRUE(stats.findChild<QLabel*>(QStringLiteral("kernel_detail_note"))->isVisible());
  // The graph rows read as graph rows.
  const QModelIndex graph_name = stats.model()->index(0, KernelStatsModel::kName);
  ASSERT_TRUE(s.rows[0].graph);
  EXPECT_NE(graph_name.data(Qt::ToolTipRole).toString().indexOf(QStringLiteral("not itemised")),
            -1);
  EXPECT_EQ(stats.model()->index(0, KernelStatsModel::kLaunch).data().toString(),
            QStringLiteral("whole graph launch"));
  stats.grab().save(testing::artifact_path("kernel_stats_graphs.png"));

  // Shift+drag over the first request's decode steps 3 and 4 (4.0 .. 8.0 ms after its start):
  // graph 5's launches of 400 and 500 µs, nothing else.
  const int64_t request_start = rec.loaded.ranges.front().range.start_ns;
  view.setNsPerPixel(20'000.0);
  view.scrollToNs(double(request_start));
  const int y = view.rowTop(row_titled(view.data(), "GPU 0 · stream 7")) + 5;
  const double x0 = view.xOfNs(double(request_start + 4'000'000)),
               x1 = view.xOfNs(double(request_start + 8'000'000));
  QSignalSpy selected(&view, &GpuTimelineView::selectionChanged);
  QTest::mousePress(view.viewport(), Qt::LeftButton, Qt::ShiftModifier, QPoint(int(x0), y));
  QMouseEvent move(QEvent::MouseMove, QPointF(x1, y), view.viewport()->mapToGlobal(QPointF(x1, y)),
                   Qt::NoButton, Qt::LeftButton, Qt::ShiftModifier);
  QApplication::sendEvent(view.viewport(), &move);
  QTest::mouseRelease(view.viewport(), Qt::LeftButton, Qt::ShiftModifier, QPoint(int(x1), y));
  ASSERT_GE(selected.count(), 1);
  const KernelStats& in_range = stats.model()->stats();
  EXPECT_EQ(in_range.kernels, 0);
  EXPECT_EQ(in_range.graph_launches, 2);
  EXPECT_EQ(in_range.graph_total_ns, 900'000);
  ASSERT_EQ(in_range.rows.size(), 1u);
  EXPECT_EQ(in_range.rows[0].name, "CUDA graph 5");
  EXPECT_DOUBLE_EQ(in_range.rows[0].share, 1.0);
  // Cleared: everything again.
  QTest::mouseDClick(view.viewport(), Qt::LeftButton, {}, QPoint(600, y));
  EXPECT_EQ(stats.model()->stats().graph_launches, 6);
}

TEST(GraphLaunches, HoverLinksTheLaunchAndTheBarIsDrawn) {
  QTemporaryDir dir;
  const Recorded rec = record(dir);
  GpuTimelineView view;
  view.resize(1400, 200);
  view.show();
  view.setRecording(rec.loaded);
  const int64_t request_start = rec.loaded.ranges.front().range.start_ns;
  view.setNsPerPixel(10'000.0);
  view.scrollToNs(double(request_start));
  const int stream = row_titled(view.data(), "GPU 0 · stream 7");
  const QPoint at(int(view.xOfNs(double(request_start + 2'350'000))),
                  view.rowTop(stream) + GpuTimelineView::kRowHeight / 2);
  const TimelineRef graph = view.itemAt(at);
  ASSERT_TRUE(graph.valid());
  EXPECT_EQ(view.data().item(graph).kind, TimelineItemKind::Graph);
  view.setHovered(graph);
  ASSERT_EQ(view.links().size(), 1u);
  EXPECT_EQ(view.data().rows()[size_t(view.links()[0].row)].kind, TimelineRowKind::Runtime);
  EXPECT_NE(view.itemToolTip(graph).indexOf(QStringLiteral("decode step 2")), -1);
  // The bar is painted in the graph colour (the hatch leaves some pixels of it).
  QApplication::processEvents();
  const QImage image = view.viewport()->grab().toImage();
  bool graph_colour = false;
  for (int dx = -4; dx <= 4 && !graph_colour; ++dx)
    graph_colour = image.pixelColor(at.x() + dx, at.y() + 3) == QColor(232, 128, 196);
  EXPECT_TRUE(graph_colour);
  view.grab().save(testing::artifact_path("gpu_timeline_graphs.png"));
}

TEST(GraphLaunches, TheReportBrowserReplaysThem) {
  QTemporaryDir dir;
  const Recorded rec = record(dir);
  ReportWindow window(rec.loaded, rec.path);
  window.show();
  EXPECT_NE(window.summary().indexOf(QStringLiteral("6 CUDA graph launches")), -1)
      << window.summary().toStdString();
  const GpuTimelineData live(rec.live);
  EXPECT_EQ(graph_items(window.gpuTimeline()->data()).size(), graph_items(live).size());
  EXPECT_EQ(window.gpuTimeline()->data().itemCount(), live.itemCount());
  // The same statistics as the live recording's, graph rows included.
  const KernelStats expected = kernel_stats(rec.live.kernels, rec.live.graphs);
  const KernelStats& shown = window.kernelStats()->model()->stats();
  ASSERT_EQ(shown.rows.size(), expected.rows.size());
  for (size_t i = 0; i < shown.rows.size(); ++i) {
    EXPECT_EQ(shown.rows[i].name, expected.rows[i].name);
    EXPECT_EQ(shown.rows[i].graph, expected.rows[i].graph);
    EXPECT_EQ(shown.rows[i].count, expected.rows[i].count);
    EXPECT_EQ(shown.rows[i].total_ns, expected.rows[i].total_ns);
  }
  EXPECT_EQ(shown.graph_launches, 6);
  EXPECT_FALSE(window.kernelStats()->detailNote().isEmpty());
  window.resize(1500, 950);
  window.grab().save(testing::artifact_path("report_graphs.png"));
  // The report itself, for opening in the workbench (lazyscope --open-report).
  QFile::remove(testing::artifact_path("report_graphs.db"));
  EXPECT_TRUE(QFile::copy(rec.path, testing::artifact_path("report_graphs.db")));
}

// Two sides with graph launches of different graph ids: both sides list them, the difference
// table puts them in one row, and the summary compares the GPU busy time.
TEST(GraphLaunches, TheComparisonCountsThemOnBothSides) {
  QTemporaryDir dir;
  const Recorded rec = record(dir);
  std::vector<GraphRecord> lazy, materialized;
  for (const GraphRecord& g : rec.loaded.graphs)
    (g.graph_id == 5 ? lazy : materialized).push_back(g);
  ASSERT_EQ(lazy.size(), 3u);
  ASSERT_EQ(materialized.size(), 3u);
  ReportCompareWindow window(rec.loaded.kernels, lazy, QStringLiteral("lazy"), {}, materialized,
                             QStringLiteral("materialized"));
  const std::vector<KernelDiffRow>& diff = window.diffModel()->rows();
  bool graphs = false;
  for (const KernelDiffRow& d : diff)
    if (d.name == kAllGraphsRowName) {
      graphs = true;
      EXPECT_EQ(d.count_a, 3);
      EXPECT_EQ(d.count_b, 3);
      EXPECT_EQ(d.diff_ns(), 0);  // 300 + 400 + 500 µs each
    }
  EXPECT_TRUE(graphs);
  EXPECT_NE(window.summary().indexOf(QStringLiteral(
                "4 kernels (800 µs) and 3 graph launches (1.2 ms): 2 ms of GPU busy time")),
            -1)
      << window.summary().toStdString();
  EXPECT_NE(window.summary().indexOf(QStringLiteral("B ÷ A = 0.600×")), -1)
      << window.summary().toStdString();
}

// --panel-shots writes the statistics' numbers beside their picture: the live recording and its
// reopened report give the same table, graph rows included.
TEST(GraphLaunches, PanelShotsOfTheLiveSessionAndTheReportAgree) {
  QTemporaryDir dir;
  const Recorded rec = record(dir);
  WorkbenchOptions options;
  options.restore_layout = false;
  options.load_default_model = false;
  MainWindow window(options);
  ASSERT_TRUE(QDir(dir.path()).mkpath(QStringLiteral("live")));
  ASSERT_TRUE(QDir(dir.path()).mkpath(QStringLiteral("report")));
  ASSERT_TRUE(window.savePanelShots(dir.filePath(QStringLiteral("live")), rec.live));
  ASSERT_TRUE(window.savePanelShots(dir.filePath(QStringLiteral("report")), rec.loaded));
  auto read = [&](const char* sub) {
    QFile f(
        QDir(dir.filePath(QString::fromLatin1(sub))).filePath(QStringLiteral("kernel_stats.tsv")));
    EXPECT_TRUE(f.open(QIODevice::ReadOnly));
    return QString::fromUtf8(f.readAll());
  };
  const QString live = read("live"), report = read("report");
  EXPECT_EQ(live, report);
  EXPECT_NE(live.indexOf(QStringLiteral("CUDA graph 5\t1\t3\t1200000\t")), -1)
      << live.toStdString();
  EXPECT_NE(live.indexOf(QStringLiteral("gemv_bf16\t0\t2\t400000\t")), -1) << live.toStdString();
}

TEST(HostTimeline, GraphSpansOnTheGpuLaneAndEveryLaneReachableInAShortDock) {
  QTemporaryDir dir;
  const Recorded rec = record(dir);
  TimelineView view;
  view.resize(1000, 90);  // shorter than the axis and four lanes
  view.show();
  view.setRecording(rec.loaded);
  ASSERT_EQ(view.laneCount(), int(TimelineView::kLaneCount));
  int graphs = 0;
  for (const RecordedSpan& s : view.spans())
    if (s.category == "graph") {
      ++graphs;
      EXPECT_EQ(TimelineView::laneOf(s), TimelineView::kGpuLane);
    }
  EXPECT_EQ(graphs, 2 * kGraphSteps);
  QApplication::processEvents();
  QScrollBar* v = view.verticalScrollBar();
  EXPECT_GT(v->maximum(), 0);
  EXPECT_TRUE(v->isVisible());  // the user can see and drag it
  const int gpu = TimelineView::kGpuLane;
  EXPECT_GT(view.laneTop(gpu) + 26, view.viewport()->height());  // out of sight before scrolling
  v->setValue(v->maximum());
  EXPECT_LE(view.laneTop(gpu) + 26, view.viewport()->height());  // in sight after
  EXPECT_GE(view.laneTop(gpu), 0);
  // A graph span can be hovered there.
  int found = -1;
  for (int x = 118; x < view.viewport()->width() && found < 0; ++x) {
    const int index = view.spanAt(QPoint(x, view.laneTop(gpu) + 10));
    if (index >= 0 && view.spans()[size_t(index)].category == "graph") found = index;
  }
  ASSERT_GE(found, 0);
  EXPECT_NE(view.spanToolTip(found).indexOf(QStringLiteral("not itemised")), -1);
  view.grab().save(testing::artifact_path("timeline_short_dock.png"));
}

}  // namespace
}  // namespace lazyscope::workbench

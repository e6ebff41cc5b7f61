// File ▸ Open Session Report replays every panel from a saved .db without a model or a GPU: runs,
// the generated tokens side by side, the block map scrubbed event by event, the GPU timeline and
// kernel statistics (the same as the live recording's), the overhead probe; lazy vs materialized
// kernels compared; malformed reports give a dialog and the workbench keeps running. Run ▸
// Measure Lazy Overhead measures the CPU kernels of the tiny model and stores them in the report.
#include <gtest/gtest.h>

#include <QFile>
#include <QMessageBox>
#include <QSignalSpy>
#include <QSlider>
#include <QTableWidget>
#include <QTemporaryDir>
#include <filesystem>

#include "app/workbench/main_window.h"
#include "app/workbench/models/block_map_model.h"
#include "app/workbench/views/block_map_view.h"
#include "app/workbench/views/gpu_timeline_view.h"
#include "app/workbench/views/kernel_stats_view.h"
#include "app/workbench/views/overhead_panel.h"
#include "app/workbench/views/report_compare_window.h"
#include "app/workbench/views/report_window.h"
#include "profiler/kernel_stats.h"
#include "workbench_test_support.h"

namespace lazyscope::workbench {
namespace {

RecordedRequest request(int id, const std::string& policy, double start_ms) {
  RecordedRequest r;
  r.id = id;
  r.start_ms = start_ms;
  r.event.policy = policy;
  r.event.mode = "rag";
  r.event.prompt_tokens = 40;
  r.event.generated_tokens = 3;
  r.event.ttft_ms = 2.5;
  return r;
}

// Two requests (lazy 0..10 ms, materialized 10..20 ms), their tokens (the third differs), block
// events, kernels with their launches and NVTX ranges, and one overhead row.
SessionRecording traced_report() {
  SessionRecording r;
  r.metadata = {{"model", "tiny"}, {"backend", "cuda"}, {"device", "test GPU"}, {"pool_blocks", "16"}, {"block_size", "16"}};
  r.requests = {request(1, "lazy", 0.0), request(2, "materialized", 10.0)};
  r.spans = {{1, "request 1 (lazy)", "request", 0.0, 10.0}, {2, "request 2 (materialized)", "request", 10.0, 10.0}};
  const int32_t ids_a[3] = {5, 6, 7}, ids_b[3] = {5, 6, 9};
  for (int step = 0; step < 3; ++step) {
    r.tokens.push_back({1, {"lazy", step, ids_a[step], "t" + std::to_string(ids_a[step]), 1.0 + step}});
    r.tokens.push_back({2, {"materialized", step, ids_b[step], "t" + std::to_string(ids_b[step]), 11.0 + step}});
  }
  for (int request_id : {1, 2}) {
    RecordedSegment s;
    s.request = request_id;
    s.t_ms = request_id == 1 ? 0.5 : 10.5;
    s.event.segment = request_id * 10;
    s.event.label = "doc A";
    s.event.tokens = 32;
    r.segments.push_back(s);
    for (int b = 0; b < 3; ++b) {
      RecordedBlockEvent e;
      e.request = request_id;
      e.t_ms = s.t_ms + 0.1 * b;
      e.event.action = BlockAction::Allocated;
      e.event.block = b;
      e.event.segment = s.event.segment;
      e.event.refcount = 1;
      r.blocks.push_back(e);
    }
  }
  for (int i = 0; i < 20; ++i) {
    KernelRecord k;
    const bool lazy = i < 10;
    // As CUPTI hands it over (the recorder demangles): plain names are their own demangled names.
    k.mangled_name = i % 2 ? "gemv_bf16" : (lazy ? "decode_kernel<64, 3, true>" : "materialize_copy");
    k.display_name = k.mangled_name;
    k.start_ns = int64_t(i) * 1'000'000 + 200'000;
    k.end_ns = k.start_ns + (i % 2 ? 300'000 : 100'000);
    k.stream_id = 7;
    k.correlation_id = uint32_t(i + 1);
    k.grid[0] = k.block[0] = 32;
    k.registers_per_thread = 40;
    r.kernels.push_back(k);
    ApiRecord a;
    a.name = "cudaLaunchKernel_v7000";
    a.start_ns = k.start_ns - 50'000;
    a.end_ns = a.start_ns + 5'000;
    a.thread_id = 77;
    a.correlation_id = k.correlation_id;
    r.api_calls.push_back(a);
  }
  RecordedRange range;
  range.request = 1;
  range.range = {"request 1 (lazy)", 0, 10'000'000, 77, 0};
  r.ranges.push_back(range);
  range.range = {"decode step 1", 1'000'000, 5'000'000, 77, 1};
  r.ranges.push_back(range);
  OverheadProbeRow o;
  o.backend = "cuda";
  o.device = "test GPU";
  o.kernel = "decode";
  o.shape = "9/3/64";
  o.context = 1024;
  o.plain_us = 10.0;
  o.lazy_us = 10.3;
  o.overhead = 0.03;
  r.overhead.push_back(o);
  return r;
}

QString save(const SessionRecording& r, const QTemporaryDir& dir, const char* name) {
  const QString path = dir.filePath(QString::fromLatin1(name));
  save_session_sqlite(r, std::filesystem::path(path.toStdString()));
  return path;
}

TEST(ReportReplay, EveryPanelReplaysFromTheSavedFile) {
  QTemporaryDir dir;
  const SessionRecording live = traced_report();
  const QString path = save(live, dir, "traced.db");
  const SessionRecording loaded = load_session_sqlite(std::filesystem::path(path.toStdString()));
  ReportWindow window(loaded, path);
  window.show();

  EXPECT_EQ(window.runsTable()->rowCount(), 2);
  EXPECT_EQ(window.runsTable()->item(1, 1)->text(), QStringLiteral("materialized"));
  EXPECT_EQ(window.tokensTable()->rowCount(), 3);
  EXPECT_EQ(window.tokensTable()->columnCount(), 2);
  EXPECT_NE(window.equivalenceSummary().indexOf(QStringLiteral("2 of 3 tokens the same, first difference at step 2")), -1)
      << window.equivalenceSummary().toStdString();

  // The scrubber walks the lazy pool's three block events.
  ASSERT_EQ(window.blockEventCount(), 3);
  EXPECT_EQ(window.scrubber()->maximum(), 3);
  EXPECT_EQ(window.blockMap()->model()->usedBlocks(), 3);
  window.scrubber()->setValue(1);
  EXPECT_EQ(window.blockMap()->model()->usedBlocks(), 1);
  window.scrubber()->setValue(0);
  EXPECT_EQ(window.blockMap()->model()->usedBlocks(), 0);

  // The GPU timeline and kernel statistics show the live recording's kernels and numbers.
  const GpuTimelineData from_live(live);
  EXPECT_EQ(window.gpuTimeline()->data().itemCount(), from_live.itemCount());
  // The same rows: NVTX depth comes from the nesting (a report stores start and end, not depth).
  ASSERT_EQ(window.gpuTimeline()->rowCount(), int(from_live.rows().size()));
  for (size_t i = 0; i < from_live.rows().size(); ++i) {
    EXPECT_EQ(window.gpuTimeline()->data().rows()[i].title, from_live.rows()[i].title);
    EXPECT_EQ(window.gpuTimeline()->data().rows()[i].items.size(), from_live.rows()[i].items.size());
  }
  EXPECT_EQ(from_live.rows()[1].title, "NVTX · depth 1");
  const KernelStats expected = kernel_stats(live.kernels);
  const KernelStats& shown = window.kernelStats()->model()->stats();
  ASSERT_EQ(shown.rows.size(), expected.rows.size());
  for (size_t i = 0; i < shown.rows.size(); ++i) {
    EXPECT_EQ(shown.rows[i].name, expected.rows[i].name);
    EXPECT_EQ(shown.rows[i].count, expected.rows[i].count);
    EXPECT_EQ(shown.rows[i].total_ns, expected.rows[i].total_ns);
    EXPECT_EQ(shown.rows[i].p95_ns, expected.rows[i].p95_ns);
  }
  // A launch still links to its kernel after the round trip through SQLite.
  const TimelineRef kernel = window.gpuTimeline()->data().itemAt(window.gpuTimeline()->rowCount() - 1, 1'250'000, 0);
  ASSERT_TRUE(kernel.valid());
  EXPECT_EQ(window.gpuTimeline()->data().correlated(kernel).size(), 1u);
  EXPECT_EQ(window.overhead()->rows().size(), 1u);
  window.resize(1400, 900);
  window.grab().save(testing::artifact_path("report_replay.png"));

  // Lazy vs materialized: the copy kernel only in B, the GEMVs the same.
  auto* compare = qobject_cast<ReportCompareWindow*>(window.compareLazyMaterialized());
  ASSERT_NE(compare, nullptr);
  const std::vector<KernelDiffRow>& diff = compare->diffModel()->rows();
  ASSERT_EQ(diff.size(), 3u);
  // decode_kernel (only in A) and materialize_copy (only in B) differ by 500 µs each: first, by name.
  EXPECT_EQ(diff[0].name, "decode_kernel<64, 3, true>");
  EXPECT_EQ(diff[0].diff_ns(), -500'000);
  EXPECT_EQ(diff[1].name, "materialize_copy");
  EXPECT_EQ(diff[1].count_a, 0);
  EXPECT_EQ(diff[1].count_b, 5);
  bool gemv_same = false;
  for (const KernelDiffRow& d : diff) gemv_same = gemv_same || (d.name == "gemv_bf16" && d.diff_ns() == 0 && d.count_a == 5);
  EXPECT_TRUE(gemv_same);
  compare->grab().save(testing::artifact_path("report_compare.png"));
}

class ReportErrors : public ::testing::Test {
 protected:
  void SetUp() override {
    WorkbenchOptions options;
    options.restore_layout = false;
    options.load_default_model = false;
    window_ = std::make_unique<MainWindow>(options);
    window_->show();
  }
  bool warningVisible() {
    for (const QMessageBox* box : window_->findChildren<QMessageBox*>())
      if (box->isVisible() && box->icon() == QMessageBox::Warning) return true;
    return false;
  }
  void closeBoxes() {
    for (QMessageBox* box : window_->findChildren<QMessageBox*>()) box->close();
  }
  std::unique_ptr<MainWindow> window_;
};

TEST_F(ReportErrors, MalformedReportsGiveADialogAndTheWorkbenchKeepsRunning) {
  QTemporaryDir dir;
  const QString good = save(traced_report(), dir, "good.db");
  QFile::copy(good, dir.filePath("truncated.db"));
  QFile::resize(dir.filePath("truncated.db"), QFileInfo(good).size() / 3);
  QFile garbage(dir.filePath("garbage.db"));
  ASSERT_TRUE(garbage.open(QIODevice::WriteOnly));
  garbage.write(QByteArray(4096, 'x'));
  garbage.close();
  for (const char* name : {"garbage.db", "truncated.db", "missing.db"}) {
    QSignalSpy errors(window_.get(), &MainWindow::errorShown);
    EXPECT_FALSE(window_->openSessionReport(dir.filePath(QString::fromLatin1(name)))) << name;
    ASSERT_EQ(errors.count(), 1) << name;
    EXPECT_NE(errors.takeFirst().at(0).toString().indexOf(QString::fromLatin1(name)), -1) << name;
    EXPECT_TRUE(warningVisible()) << name;
    closeBoxes();
  }
  EXPECT_FALSE(window_->compareSessionReports(good, dir.filePath("garbage.db")));
  closeBoxes();
  // Still running: a good report opens, and two compare.
  EXPECT_TRUE(window_->openSessionReport(good));
  EXPECT_NE(window_->findChild<ReportWindow*>(), nullptr);
  EXPECT_TRUE(window_->compareSessionReports(good, good));
  auto* compare = window_->findChild<ReportCompareWindow*>();
  ASSERT_NE(compare, nullptr);
  for (const KernelDiffRow& d : compare->diffModel()->rows()) EXPECT_EQ(d.diff_ns(), 0);
}

TEST(OverheadAction, MeasuresTheCpuKernelsAndStoresThemInTheReport) {
  WorkbenchOptions options;
  options.restore_layout = false;
  options.load_default_model = false;
  options.backend = "cpu";
  MainWindow window(options);
  window.show();
  EXPECT_FALSE(window.measureLazyOverhead());  // no model yet: a message, not a crash
  for (QMessageBox* box : window.findChildren<QMessageBox*>()) box->close();
  QSignalSpy ready(&window, &MainWindow::modelReady);
  window.openModel(testing::tiny_model_dir());
  ASSERT_TRUE(ready.wait(180000)) << window.lastError().toStdString();
  QSignalSpy done(&window, &MainWindow::overheadFinished);
  ASSERT_TRUE(window.measureLazyOverhead());
  EXPECT_FALSE(window.measureLazyOverhead());  // one at a time
  for (QMessageBox* box : window.findChildren<QMessageBox*>()) box->close();
  ASSERT_TRUE(done.wait(180000));
  const int rows = done.takeFirst().at(0).toInt();
  ASSERT_EQ(rows, 2);  // no request yet: contexts 1024 and 4096
  const std::vector<OverheadProbeRow>& shown = window.overheadPanel()->rows();
  ASSERT_EQ(shown.size(), 2u);
  for (const OverheadProbeRow& r : shown) {
    EXPECT_EQ(r.backend, "cpu");
    EXPECT_GT(r.plain_us, 0.0);
    EXPECT_GT(r.lazy_us, 0.0);
    EXPECT_EQ(r.head_dim, window.modelInfo().head_dim);
  }
  EXPECT_NE(window.overheadPanel()->status().indexOf(QStringLiteral("CPU kernels")), -1);
  QTemporaryDir dir;
  const QString path = dir.filePath("with_overhead.db");
  ASSERT_TRUE(window.exportSessionReport(path));
  const SessionRecording loaded = load_session_sqlite(std::filesystem::path(path.toStdString()));
  ASSERT_EQ(loaded.overhead.size(), 2u);
  EXPECT_DOUBLE_EQ(loaded.overhead[0].lazy_us, shown[0].lazy_us);
  window.overheadPanel()->resize(900, 500);
  window.overheadPanel()->grab().save(testing::artifact_path("overhead_panel.png"));
}

}  // namespace
}  // namespace lazyscope::workbench

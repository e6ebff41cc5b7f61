// The workbench records each session (SessionRecorder behind an EventFanout in the worker): a run
// of the tiny model exports as a SQLite report and a Perfetto trace, and fills the timeline dock.
#include <gtest/gtest.h>

#include <QDir>
#include <QFile>
#include <QJsonDocument>
#include <QJsonObject>
#include <QSignalSpy>
#include <QTemporaryDir>
#include <filesystem>
#include <set>

#include "app/workbench/main_window.h"
#include "app/workbench/models/run_model.h"
#include "app/workbench/views/prompt_panel.h"
#include "app/workbench/views/timeline_view.h"
#include "profiler/session_recorder.h"
#include "workbench_test_support.h"

namespace lazyscope::workbench {
namespace {

constexpr int kWaitMs = 180000;  // generous: CI machines are slow, a hang still fails

class RecordedRun : public ::testing::Test {
 protected:
  void SetUp() override {
    WorkbenchOptions options;
    options.restore_layout = false;
    options.load_default_model = false;
    options.backend = "cpu";
    window_ = std::make_unique<MainWindow>(options);
    window_->resize(1400, 900);
    window_->show();
    ASSERT_TRUE(window_->openCorpus(QString()));
    QSignalSpy ready(window_.get(), &MainWindow::modelReady);
    window_->openModel(testing::tiny_model_dir());
    ASSERT_TRUE(ready.wait(kWaitMs)) << window_->lastError().toStdString();
    ASSERT_TRUE(window_->prepareDemoPrompt());
    window_->promptPanel()->setMaxTokens(6);
  }
  void TearDown() override { window_.reset(); }

  void runToEnd() {
    QSignalSpy finished(window_.get(), &MainWindow::planFinished);
    ASSERT_TRUE(window_->startRun());
    ASSERT_TRUE(finished.wait(kWaitMs));
    ASSERT_FALSE(finished.takeFirst().at(1).toBool()) << "the plan was cancelled";
  }

  int generatedTokens() {
    RunModel* runs = window_->promptPanel()->runModel();
    int total = 0;
    for (int i = 0; i < runs->columns(); ++i) total += runs->column(i).tokens;
    return total;
  }

  std::unique_ptr<MainWindow> window_;
};

TEST_F(RecordedRun, ExportedReportLoadsBackWithEveryRequestAndToken) {
  runToEnd();
  const int columns = window_->promptPanel()->runModel()->columns();
  ASSERT_GT(columns, 0);
  QTemporaryDir dir;
  ASSERT_TRUE(dir.isValid());
  const QString path = dir.filePath("lazyscope-session.db");
  ASSERT_TRUE(window_->exportSessionReport(path)) << window_->lastError().toStdString();

  const SessionRecording loaded = load_session_sqlite(std::filesystem::path(path.toStdString()));
  EXPECT_EQ(int(loaded.requests.size()), columns);  // one request per policy column
  EXPECT_EQ(int(loaded.tokens.size()), generatedTokens());
  EXPECT_GT(loaded.tokens.size(), 0u);
  EXPECT_FALSE(loaded.spans.empty());
  std::set<std::string> policies;
  for (const RecordedRequest& r : loaded.requests) policies.insert(r.event.policy);
  EXPECT_EQ(policies, (std::set<std::string>{"lazy", "materialized"}));
  ASSERT_TRUE(loaded.metadata.count("model"));
  EXPECT_EQ(QString::fromStdString(loaded.metadata.at("model")), window_->modelInfo().name);
  EXPECT_EQ(loaded.metadata.count("backend"), 1u);
  EXPECT_EQ(loaded.metadata.count("device"), 1u);
  EXPECT_EQ(loaded.metadata.at("kv_budget_bytes"),
            std::to_string(window_->modelInfo().kv_budget_bytes));
}

TEST_F(RecordedRun, ExportedTraceIsChromeTraceJson) {
  runToEnd();
  QTemporaryDir dir;
  const QString path = dir.filePath("trace.json");
  ASSERT_TRUE(window_->exportTrace(path)) << window_->lastError().toStdString();
  QFile file(path);
  ASSERT_TRUE(file.open(QIODevice::ReadOnly));
  QJsonParseError error;
  const QJsonDocument doc = QJsonDocument::fromJson(file.readAll(), &error);
  ASSERT_EQ(error.error, QJsonParseError::NoError) << error.errorString().toStdString();
  const QJsonValue events = doc.isObject() ? doc.object().value("traceEvents") : QJsonValue();
  ASSERT_TRUE(events.isArray() || doc.isArray());
  EXPECT_FALSE(QFile::exists(path + ".partial"));
}

TEST_F(RecordedRun, ExportIntoAMissingFolderFailsWithAMessage) {
  runToEnd();
  QTemporaryDir dir;
  const QString path = dir.filePath("no/such/folder/report.db");
  EXPECT_FALSE(window_->exportSessionReport(path));
  EXPECT_TRUE(window_->lastError().contains("report.db")) << window_->lastError().toStdString();
  EXPECT_FALSE(window_->exportTrace(dir.filePath("no/such/folder/trace.json")));
  EXPECT_TRUE(window_->lastError().contains("trace.json")) << window_->lastError().toStdString();
}

TEST_F(RecordedRun, TimelineShowsEveryLaneAfterARunAndCullsHiddenBars) {
  TimelineView* timeline = window_->timelineView();
  ASSERT_NE(timeline, nullptr);
  EXPECT_EQ(timeline->spanCount(), 0);
  runToEnd();
  ASSERT_GT(timeline->spanCount(), 0);
  std::set<int> lanes;
  int request_index = -1;
  for (int i = 0; i < timeline->spanCount(); ++i) {
    const RecordedSpan& span = timeline->spans()[size_t(i)];
    lanes.insert(TimelineView::laneOf(span));
    if (TimelineView::laneOf(span) == TimelineView::kRequestLane && request_index < 0)
      request_index = i;
  }
  EXPECT_EQ(lanes, (std::set<int>{TimelineView::kRequestLane, TimelineView::kEncodeLane,
                                  TimelineView::kDecodeLane}));
  ASSERT_GE(request_index, 0);
  EXPECT_TRUE(timeline->spanToolTip(request_index).contains("request"));
  EXPECT_TRUE(timeline->spanToolTip(request_index).contains("duration"));

  // Fitted to the width, every bar is painted.
  timeline->resize(900, timeline->sizeHint().height());
  timeline->setZoom(0.0);
  (void)timeline->grab();
  EXPECT_EQ(timeline->lastPaintedBars(), timeline->spanCount());
  // Zoomed far in at the first request's start, most bars are off screen and are not painted.
  timeline->setZoom(1e4);
  timeline->scrollToTime(timeline->spans()[size_t(request_index)].start_ms);
  (void)timeline->grab();
  EXPECT_GT(timeline->lastPaintedBars(), 0);
  EXPECT_LT(timeline->lastPaintedBars(), timeline->spanCount());
}

TEST_F(RecordedRun, OpeningAModelAgainStartsAFreshRecording) {
  runToEnd();
  ASSERT_GT(window_->timelineView()->spanCount(), 0);
  QSignalSpy ready(window_.get(), &MainWindow::modelReady);
  window_->openModel(testing::tiny_model_dir());
  ASSERT_TRUE(ready.wait(kWaitMs));
  EXPECT_EQ(window_->timelineView()->spanCount(), 0);
}

}  // namespace
}  // namespace lazyscope::workbench

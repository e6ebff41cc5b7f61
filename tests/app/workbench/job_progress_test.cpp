// Every long job in the window has a status-bar row with a bar and Cancel: a model load, a corpus
// import, a generation run, an evaluation and a Workload Lab run (its model load included). Each test starts the job, presses Cancel while the
// job is under way (the worker held inside a progress report until the press, so the press always
// lands mid-job), and checks that the job stopped, the window kept its previous state and still
// answers, and the status bar says what happened.
#include "app/workbench/views/job_progress.h"

#include <gtest/gtest.h>

#include <QApplication>
#include <QElapsedTimer>
#include <QFileInfo>
#include <QProgressBar>
#include <QPushButton>
#include <QSemaphore>
#include <QSignalSpy>
#include <QTemporaryDir>
#include <QTest>
#include <QTimer>
#include <QToolButton>
#include <atomic>
#include <fstream>

#include "app/workbench/corpus_importer.h"
#include "app/workbench/engine_worker.h"
#include "app/workbench/main_window.h"
#include "app/workbench/views/corpus_panel.h"
#include "app/workbench/views/evaluation_panel.h"
#include "app/workbench/views/prompt_panel.h"
#include "app/workbench/views/workload_lab_panel.h"
#include "app/workbench/workload_worker.h"
#include "corpora/document_store.h"
#include "workbench_test_support.h"

namespace lazyscope::workbench {
namespace {

constexpr int kWaitMs = 180000;

WorkbenchOptions test_options() {
  WorkbenchOptions o;
  o.restore_layout = false;
  o.load_default_model = false;
  o.backend = "cpu";
  return o;
}

// Runs the event loop until `done()` holds; false after `ms`.
template <typename Pred>
bool wait_for(Pred done, int ms) {
  QElapsedTimer clock;
  clock.start();
  while (!done()) {
    if (clock.elapsed() > ms) return false;
    QCoreApplication::processEvents(QEventLoop::AllEvents, 20);
  }
  return true;
}

// The signal came, before or during the wait (a worker may emit before the wait starts).
bool arrived(QSignalSpy& spy, int ms) { return !spy.isEmpty() || spy.wait(ms); }

// Holds a worker thread inside its first report until the GUI thread has pressed Cancel.
class Gate {
 public:
  void holdOnce() {
    if (held_.exchange(true)) return;
    reached_.release();
    open_.acquire();
  }
  // Runs the GUI's event loop until the worker waits at the gate (false after `ms`).
  bool waitReached(int ms) {
    QElapsedTimer clock;
    clock.start();
    while (!reached_.tryAcquire()) {
      if (clock.elapsed() > ms) return false;
      QCoreApplication::processEvents(QEventLoop::AllEvents, 20);
    }
    return true;
  }
  void open() { open_.release(); }

 private:
  std::atomic<bool> held_{false};
  QSemaphore reached_, open_;
};

// The window answers: a zero-timer fires and a search of the open corpus returns hits.
void expectResponsive(MainWindow& window) {
  bool fired = false;
  QTimer::singleShot(0, &window, [&fired] { fired = true; });
  EXPECT_TRUE(wait_for([&fired] { return fired; }, 2000));
  window.corpusPanel()->setQuestion(QStringLiteral("Orrenland"));
  window.corpusPanel()->search();
  EXPECT_GT(window.corpusPanel()->resultsModel()->rowCount(), 0);
}

void pressCancel(MainWindow& window, const QString& job) {
  QToolButton* cancel = window.jobs()->cancelButton(job);
  ASSERT_NE(cancel, nullptr) << "no status-bar row for " << job.toStdString();
  EXPECT_TRUE(cancel->isVisible());
  QTest::mouseClick(cancel, Qt::LeftButton);
  EXPECT_FALSE(cancel->isEnabled());  // pressed once; the row says "Cancelling…"
  EXPECT_TRUE(window.jobs()->text(job).startsWith("Cancelling")) << window.jobs()->text(job).toStdString();
}

class JobProgress : public ::testing::Test {
 protected:
  void SetUp() override {
    window_ = std::make_unique<MainWindow>(test_options());
    window_->resize(1600, 1000);
    window_->show();
    ASSERT_TRUE(window_->openCorpus(QString()));
    QSignalSpy ready(window_.get(), &MainWindow::modelReady);
    window_->openModel(testing::tiny_model_dir());
    ASSERT_TRUE(arrived(ready, kWaitMs)) << window_->lastError().toStdString();
    ASSERT_TRUE(wait_for([this] { return !window_->jobs()->running("load"); }, kWaitMs));
  }
  std::unique_ptr<MainWindow> window_;
};

TEST_F(JobProgress, ACancelledModelLoadKeepsThePreviousModel) {
  MainWindow& window = *window_;
  const ModelInfo before = window.modelInfo();
  Gate gate;
  QObject::connect(
      window.worker(), &EngineWorker::progress, window.worker(),
      [&gate](double, const QString&) { gate.holdOnce(); }, Qt::DirectConnection);
  QSignalSpy opened(&window, &MainWindow::modelReady);
  QSignalSpy ended(window.worker(), &EngineWorker::loadEnded);
  window.openModel(testing::tiny_model_dir());
  ASSERT_TRUE(window.jobs()->running("load"));
  ASSERT_TRUE(gate.waitReached(kWaitMs));  // the new session is being built
  expectResponsive(window);
  pressCancel(window, QStringLiteral("load"));
  gate.open();
  ASSERT_TRUE(arrived(ended, kWaitMs));
  EXPECT_TRUE(ended.takeFirst().at(0).toBool());  // cancelled, not loaded
  // The spy hears loadEnded on the worker's thread; the window handles it through its queued
  // connection, so wait for the window to have done so before looking at its state.
  ASSERT_TRUE(wait_for([&window] { return !window.jobs()->running("load"); }, kWaitMs));
  EXPECT_EQ(opened.count(), 0);
  EXPECT_FALSE(window.jobs()->running("load"));
  EXPECT_FALSE(window.jobs()->isVisible());
  EXPECT_TRUE(window.modelLoaded());
  EXPECT_EQ(window.modelInfo().path, before.path);
  EXPECT_TRUE(window.activityText().contains("Model load cancelled")) << window.activityText().toStdString();
  EXPECT_TRUE(window.activityText().contains(before.name)) << window.activityText().toStdString();
  // The previous session still runs.
  ASSERT_TRUE(window.prepareDemoPrompt());
  window.promptPanel()->setMaxTokens(2);
  QSignalSpy finished(&window, &MainWindow::planFinished);
  ASSERT_TRUE(window.startRun());
  ASSERT_TRUE(arrived(finished, kWaitMs));
  EXPECT_FALSE(finished.takeFirst().at(1).toBool());
  // And a load that is not cancelled loads: the flag was cleared.
  window.openModel(testing::tiny_model_dir());
  ASSERT_TRUE(arrived(opened, kWaitMs)) << window.lastError().toStdString();
}

TEST_F(JobProgress, ACancelledImportLeavesTheStoreAndTheOpenCorpus) {
  MainWindow& window = *window_;
  QTemporaryDir dir;
  const QString source = dir.filePath("big.jsonl");
  {
    std::ofstream out(source.toStdString());
    for (int i = 0; i < 5000; ++i)
      out << "{\"id\": \"d" << i << "\", \"title\": \"Passage " << i << "\", \"text\": \"Words of passage " << i
          << ".\"}\n";
  }
  const QString db = dir.filePath("big.db");
  CorpusImporter* importer = window.findChild<CorpusImporter*>();
  ASSERT_NE(importer, nullptr);
  Gate gate;
  QObject::connect(
      importer, &CorpusImporter::progress, importer, [&gate](double, const QString&) { gate.holdOnce(); },
      Qt::DirectConnection);
  QSignalSpy cancelled(importer, &CorpusImporter::cancelled);
  QSignalSpy imported(importer, &CorpusImporter::imported);
  CorpusImportRequest request;
  request.source = source;
  request.format = QStringLiteral("jsonl");
  request.db = db;
  ASSERT_TRUE(window.importCorpus(request)) << window.lastError().toStdString();
  ASSERT_TRUE(window.jobs()->running("import"));
  ASSERT_TRUE(gate.waitReached(kWaitMs));
  expectResponsive(window);  // the bundled sample stays searchable meanwhile
  pressCancel(window, QStringLiteral("import"));
  gate.open();
  ASSERT_TRUE(arrived(cancelled, kWaitMs));
  EXPECT_EQ(imported.count(), 0);
  EXPECT_FALSE(QFileInfo::exists(db));
  EXPECT_FALSE(window.jobs()->running("import"));
  EXPECT_TRUE(window.activityText().contains("Corpus import cancelled")) << window.activityText().toStdString();
  window.corpusPanel()->setQuestion(QStringLiteral("Orrenland"));
  window.corpusPanel()->search();
  EXPECT_GT(window.corpusPanel()->resultsModel()->rowCount(), 0);  // still the sample
  // Not cancelled, the same import finishes and opens the new store.
  ASSERT_TRUE(window.importCorpus(request));
  ASSERT_TRUE(arrived(imported, kWaitMs));
  EXPECT_EQ(imported.takeFirst().at(1).toLongLong(), 5000);
  EXPECT_TRUE(wait_for([&] { return window.activityText().contains("Imported 5000 documents"); }, 5000))
      << window.activityText().toStdString();
  EXPECT_EQ(corpora::DocumentStore::open(db.toStdString()).count(), 5000);
}

TEST_F(JobProgress, BadImportRequestsSayWhatIsWrong) {
  MainWindow& window = *window_;
  QTemporaryDir dir;
  CorpusImportRequest request;
  request.source = dir.filePath("missing.jsonl");
  request.format = QStringLiteral("jsonl");
  request.db = dir.filePath("out.db");
  EXPECT_FALSE(window.importCorpus(request));
  EXPECT_TRUE(window.lastError().contains("missing.jsonl: no such file or folder")) << window.lastError().toStdString();
  const QString source = dir.filePath("a.jsonl");
  std::ofstream(source.toStdString()) << "{\"id\": \"a\", \"text\": \"x\"}\n";
  request.source = source;
  request.format = QStringLiteral("csv");
  EXPECT_FALSE(window.importCorpus(request));
  EXPECT_TRUE(window.lastError().contains("hotpotqa")) << window.lastError().toStdString();  // lists the formats
  request.format = QStringLiteral("jsonl");
  request.db = source;  // would overwrite its own input
  EXPECT_FALSE(window.importCorpus(request));
  EXPECT_TRUE(window.lastError().contains("a.jsonl")) << window.lastError().toStdString();
  EXPECT_FALSE(window.jobs()->running("import"));
}

TEST_F(JobProgress, ACancelledRunStopsAtTheNextTokenAndTheWindowRunsAgain) {
  MainWindow& window = *window_;
  ASSERT_TRUE(window.prepareDemoPrompt());  // lazy and materialized ticked
  window.promptPanel()->setMaxTokens(64);
  Gate gate;
  std::atomic<int> tokens{0};
  QObject::connect(
      window.worker(), &EngineWorker::tokenProduced, window.worker(),
      [&](const QString&, int, const QString&, double) {
        ++tokens;
        gate.holdOnce();
      },
      Qt::DirectConnection);
  QSignalSpy finished(&window, &MainWindow::planFinished);
  ASSERT_TRUE(window.startRun());
  ASSERT_TRUE(window.jobs()->running("run"));
  ASSERT_TRUE(gate.waitReached(kWaitMs));
  expectResponsive(window);
  pressCancel(window, QStringLiteral("run"));
  gate.open();
  ASSERT_TRUE(arrived(finished, kWaitMs));
  EXPECT_TRUE(finished.takeFirst().at(1).toBool());  // cancelled
  EXPECT_LE(tokens.load(), 2);                         // stopped after the token in flight
  EXPECT_FALSE(window.jobs()->running("run"));
  EXPECT_FALSE(window.runInFlight());
  EXPECT_TRUE(window.promptPanel()->runButton()->isEnabled());
  EXPECT_TRUE(window.activityText().contains("stopped")) << window.activityText().toStdString();
  window.promptPanel()->setMaxTokens(2);
  ASSERT_TRUE(window.startRun());
  ASSERT_TRUE(arrived(finished, kWaitMs));
  EXPECT_FALSE(finished.takeFirst().at(1).toBool());
}

TEST_F(JobProgress, ACancelledEvaluationKeepsTheFinishedQuestions) {
  MainWindow& window = *window_;
  EvaluationPanel* panel = window.evaluationPanel();
  panel->setLimit(0);  // every sample question: far more than run before the press
  QSignalSpy finished(panel, &EvaluationPanel::evaluationFinished);
  QSignalSpy progressed(panel, &EvaluationPanel::progressChanged);
  ASSERT_TRUE(panel->start());
  ASSERT_TRUE(window.jobs()->running("evaluation"));
  ASSERT_TRUE(arrived(progressed, kWaitMs));  // one question done
  expectResponsive(window);
  pressCancel(window, QStringLiteral("evaluation"));
  ASSERT_TRUE(arrived(finished, kWaitMs));
  EXPECT_TRUE(finished.takeFirst().at(0).toBool());
  const corpora::EvalReport& report = panel->model()->report();
  EXPECT_GE(report.questions.size(), 1u);
  EXPECT_LT(int(report.questions.size()), report.planned_questions);
  EXPECT_FALSE(panel->running());
  EXPECT_FALSE(window.jobs()->running("evaluation"));
  EXPECT_TRUE(window.activityText().contains("Evaluation stopped")) << window.activityText().toStdString();
}

TEST_F(JobProgress, ACancelledWorkloadLoadKeepsThePreviousResults) {
  MainWindow& window = *window_;
  WorkloadLabPanel* lab = window.workloadLab();
  QSignalSpy finished(lab, &WorkloadLabPanel::runFinished);
  // A finished accounting run first: the results a cancelled load must leave on screen.
  WorkloadLabConfig before = small_cpu_preset();
  before.backend = QStringLiteral("accounting");
  before.shape = QStringLiteral("llama-3.2-1b");
  before.budgets = {1ll << 30};
  lab->setConfig(before);
  ASSERT_TRUE(lab->startRun()) << lab->statusText().toStdString();
  ASSERT_TRUE(window.jobs()->running("workload"));
  ASSERT_TRUE(arrived(finished, kWaitMs));
  EXPECT_FALSE(finished.takeFirst().at(0).toBool());
  ASSERT_TRUE(wait_for([&window] { return !window.jobs()->running("workload"); }, kWaitMs));
  const std::vector<ServingResult> shown = lab->resultsModel()->results();
  ASSERT_EQ(shown.size(), 3u);  // none, materialized, lazy
  const std::map<std::string, std::string> metadata = lab->reportMetadata();
  EXPECT_EQ(metadata.at("workload.backend"), "accounting");

  // Now a CPU run of the tiny model, held inside its first load report until Cancel is pressed.
  WorkloadLabConfig cpu = small_cpu_preset();
  cpu.model = testing::tiny_model_dir();
  lab->setConfig(cpu);
  Gate gate;
  std::atomic<bool> served{false}, ready{false}, pressed{false};
  QStringList after_press;  // the worker's reports once Cancel was pressed (its thread only)
  QObject::connect(
      lab->worker(), &WorkloadWorker::progress, lab->worker(),
      [&](double, const QString& what) {
        if (pressed.load()) after_press << what;
        gate.holdOnce();
      },
      Qt::DirectConnection);
  QObject::connect(
      lab->worker(), &WorkloadWorker::runStarted, lab->worker(),
      [&served](const WorkloadRunKey&, int) { served = true; }, Qt::DirectConnection);
  QObject::connect(
      lab->worker(), &WorkloadWorker::workloadReady, lab->worker(),
      [&ready](std::shared_ptr<const Workload>, qint64) { ready = true; }, Qt::DirectConnection);
  ASSERT_TRUE(lab->startRun()) << lab->statusText().toStdString();
  ASSERT_TRUE(window.jobs()->running("workload"));
  ASSERT_TRUE(gate.waitReached(kWaitMs));  // the serving engine is loading the model
  EXPECT_EQ(lab->resultsModel()->results().size(), shown.size());  // still the previous run
  expectResponsive(window);
  pressCancel(window, QStringLiteral("workload"));
  pressed = true;
  gate.open();
  ASSERT_TRUE(arrived(finished, kWaitMs));
  EXPECT_TRUE(finished.takeFirst().at(0).toBool());  // cancelled
  ASSERT_TRUE(wait_for([&window] { return !window.jobs()->running("workload"); }, kWaitMs));
  // The load stopped at its next report: no more loading, no workload made, nothing served.
  EXPECT_EQ(after_press.join(QStringLiteral(" | ")).toStdString(), "stopped");
  EXPECT_FALSE(ready.load());
  EXPECT_FALSE(served.load());
  EXPECT_FALSE(lab->isRunning());
  EXPECT_TRUE(lab->keptPreviousResults());
  EXPECT_TRUE(lab->lastError().isEmpty()) << lab->lastError().toStdString();
  const std::vector<ServingResult>& after = lab->resultsModel()->results();
  ASSERT_EQ(after.size(), shown.size());
  for (std::size_t i = 0; i < after.size(); ++i) {
    EXPECT_EQ(after[i].policy, shown[i].policy);
    EXPECT_EQ(after[i].hit_ratio_tokens, shown[i].hit_ratio_tokens);
    EXPECT_EQ(after[i].requests, shown[i].requests);
  }
  EXPECT_EQ(lab->reportMetadata(), metadata);  // a session report still describes what is shown
  EXPECT_TRUE(lab->statusText().contains("previous results stay")) << lab->statusText().toStdString();
  EXPECT_TRUE(window.activityText().contains("cancelled while loading")) << window.activityText().toStdString();

  // The flag was cleared: the same CPU run, not cancelled, loads and serves every policy.
  ASSERT_TRUE(lab->startRun()) << lab->statusText().toStdString();
  ASSERT_TRUE(arrived(finished, kWaitMs));
  EXPECT_FALSE(finished.takeFirst().at(0).toBool()) << lab->statusText().toStdString();
  EXPECT_FALSE(lab->keptPreviousResults());
  ASSERT_EQ(lab->resultsModel()->results().size(), 3u);
  for (const ServingResult& r : lab->resultsModel()->results()) {
    EXPECT_EQ(r.requests, cpu.workload.requests) << r.policy;
    EXPECT_FALSE(r.cancelled) << r.policy;
  }
  EXPECT_EQ(lab->reportMetadata().at("workload.backend"), "cpu");
}

TEST(JobProgressArea, RowsComeAndGoAndCancelAsksOnce) {
  JobProgressArea area;
  area.show();
  int asked = 0;
  area.begin("a", "Job A", [&asked] { ++asked; });
  area.begin("b", "Job B", {});
  EXPECT_EQ(area.runningCount(), 2);
  area.update("a", 0.5, "half");
  EXPECT_EQ(area.bar("a")->value(), 500);
  EXPECT_EQ(area.text("a"), "Job A: half");
  area.update("b", -1, "busy");
  EXPECT_EQ(area.bar("b")->maximum(), 0);  // busy indicator
  QTest::mouseClick(area.cancelButton("a"), Qt::LeftButton);
  QTest::mouseClick(area.cancelButton("a"), Qt::LeftButton);  // disabled now: no second ask
  EXPECT_EQ(asked, 1);
  area.update("a", 0.75, "later");  // the row keeps saying it is cancelling
  EXPECT_TRUE(area.text("a").startsWith("Cancelling"));
  area.end("a");
  area.end("missing");
  EXPECT_FALSE(area.running("a"));
  EXPECT_TRUE(area.isVisible());
  area.end("b");
  EXPECT_FALSE(area.isVisible());
}

}  // namespace
}  // namespace lazyscope::workbench

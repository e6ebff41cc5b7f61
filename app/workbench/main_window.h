#pragma once
// The workbench window: panels in dock widgets, the engine on a worker thread, menus, status bar.
#include <QMainWindow>
#include <QThread>
#include <vector>

#include "app/workbench/command_line.h"
#include "app/workbench/corpus_importer.h"
#include "app/workbench/workbench_types.h"
#include "profiler/session_recorder.h"

class QDockWidget;
class QLabel;
class QMenu;

namespace lazyscope::workbench {

class BlockMapView;
class CacheStatsView;
class CorpusPanel;
class EngineWorker;
class EquivalenceView;
class EvaluationPanel;
class JobProgressArea;
class GpuTimelineView;
class KernelStatsView;
class OverheadPanel;
class OverheadRunner;
class PromptPanel;
class TimelineView;
class WorkloadLabPanel;
class WelcomePage;

class MainWindow : public QMainWindow {
  Q_OBJECT
 public:
  explicit MainWindow(const WorkbenchOptions& options, QWidget* parent = nullptr);
  ~MainWindow() override;

  // Opens the corpus and asks the worker for the model; returns at once.
  void start();
  void openModel(const QString& path);
  void openDefaultModel();
  // Opens a corpus store (empty path: the bundled sample); false after showing the error.
  bool openCorpus(const QString& path);
  // Imports a dataset into a corpus store on its own thread (progress and Cancel in the status
  // bar) and opens the store when it is done; false (with a message) when it cannot start.
  bool importCorpus(const CorpusImportRequest& request);
  // Cancels a model load in progress; the model loaded before it stays.
  void cancelModelLoad();
  // Builds a plan from the panels and hands it to the worker; false (with a message) if it cannot.
  bool startRun();
  void stopRun();
  bool isBusy() const { return busy_; }
  bool runInFlight() const { return run_in_flight_; }
  bool modelLoaded() const { return model_loaded_; }
  const ModelInfo& modelInfo() const { return model_info_; }
  QString lastError() const { return last_error_; }
  bool saveScreenshot(const QString& path);
  // Writes what the session recorded so far: a SQLite report (profiler/README.md) or a
  // Chrome/Perfetto trace JSON. False after showing the error.
  bool exportSessionReport(const QString& path);
  bool exportTrace(const QString& path);
  // Shows a saved report's timeline and cache statistics (until the next run); false after
  // showing the error. Opened and exported reports are listed under File ▸ Recent Reports.
  bool openSessionReport(const QString& path);
  // Reloads the timeline from the recorder (done after every finished request).
  void refreshTimeline();
  // Fills the prompt from the first sample question and its BM25 top-4 (the --demo start).
  bool prepareDemoPrompt();

  CorpusPanel* corpusPanel() { return corpus_; }
  PromptPanel* promptPanel() { return prompt_; }
  EquivalenceView* equivalenceView() { return equivalence_; }
  BlockMapView* blockMapView() { return block_map_; }
  CacheStatsView* cacheStatsView() { return stats_; }
  TimelineView* timelineView() { return timeline_; }
  GpuTimelineView* gpuTimelineView() { return gpu_timeline_; }
  KernelStatsView* kernelStatsView() { return kernel_stats_; }
  // Opens two reports side by side: per-kernel time difference (B − A); false after the error.
  bool compareSessionReports(const QString& path_a, const QString& path_b);
  // Run ▸ Measure Lazy Overhead: the overhead probe at the model's attention shape and the last
  // request's context, on a thread of its own; the rows go into the panel and the session report.
  // False (with a message) when no model is open or a probe is running.
  bool measureLazyOverhead();
  OverheadPanel* overheadPanel() { return overhead_; }
  // Saves the GPU timeline and the kernel statistics as PNGs of their own (gpu_timeline.png,
  // kernel_stats.png) into `dir`, drawn from the session's recording at a readable size.
  bool savePanelShots(const QString& dir);
  bool savePanelShots(const QString& dir, const SessionRecording& recording);
  EvaluationPanel* evaluationPanel() { return evaluation_; }
  EngineWorker* worker() { return worker_; }
  // The status bar's long jobs: "load", "import", "run", "evaluation".
  JobProgressArea* jobs() { return jobs_; }
  QString activityText() const;
  WorkloadLabPanel* workloadLab() { return workload_lab_; }
  void showWorkloadLab();
  // "Start here" page (a dock): Ask a sample question, Reorder and re-run, Open a workload.
  WelcomePage* welcomePage() { return welcome_; }
  // Help ▸ Welcome: shows and raises the welcome page.
  void showWelcome();

 Q_SIGNALS:
  void modelReady(const lazyscope::workbench::ModelInfo& info);
  void planFinished(int run_index, bool cancelled);
  void errorShown(const QString& message);
  void demoFinished();
  void overheadFinished(int rows);

 protected:
  void closeEvent(QCloseEvent* event) override;

 private:
  void buildMenus();
  void buildDocks();
  void connectWorker();
  void showError(const QString& what, const QString& message);
  void updateStatus();
  void onModelOpened(const ModelInfo& info);
  void onPlanFinished(int run_index, bool cancelled);
  void onProgress(double fraction, const QString& what);
  void onBusy(bool busy);
  void onLoadEnded(bool cancelled);
  void beginLoadJob(const QString& title);
  void connectJobs();
  void continueDemo();
  void restoreSettings();
  void applyChatSetting(const QString& text);
  void saveSettings();
  void showQuickGuide();
  void showAbout();
  void showShortcuts();
  void askSampleQuestion();
  void reorderAndRerun();
  void updateWelcome();
  void fitWelcome();
  void keepTimelineReadable();
  void rebuildRecentReports();
  void rememberSession(const ModelInfo& info);
  // --screenshot's companions: --panel-shots and --save-report.
  void saveRequestedOutputs();

  WorkbenchOptions options_;
  QThread worker_thread_;
  EngineWorker* worker_ = nullptr;
  CorpusPanel* corpus_ = nullptr;
  PromptPanel* prompt_ = nullptr;
  EquivalenceView* equivalence_ = nullptr;
  BlockMapView* block_map_ = nullptr;
  CacheStatsView* stats_ = nullptr;
  TimelineView* timeline_ = nullptr;
  GpuTimelineView* gpu_timeline_ = nullptr;
  KernelStatsView* kernel_stats_ = nullptr;
  OverheadPanel* overhead_ = nullptr;
  OverheadRunner* overhead_runner_ = nullptr;
  WorkloadLabPanel* workload_lab_ = nullptr;
  QDockWidget* workload_dock_ = nullptr;
  EvaluationPanel* evaluation_ = nullptr;
  QLabel* model_label_ = nullptr;
  QLabel* pool_label_ = nullptr;
  QLabel* activity_label_ = nullptr;
  JobProgressArea* jobs_ = nullptr;
  CorpusImporter* importer_ = nullptr;
  int pending_loads_ = 0;     // loads queued on the worker and not ended yet
  int run_tokens_ = 0;        // tokens of the plan in flight so far, of run_token_budget_
  int run_token_budget_ = 1;  // max new tokens × policies of the plan in flight
  WelcomePage* welcome_ = nullptr;
  QMenu* recent_reports_menu_ = nullptr;
  enum class WelcomeStep { None, Ask, Reorder };
  WelcomeStep welcome_step_ = WelcomeStep::None;    // the welcome button whose run is in flight
  std::vector<RequestFinishedEvent> run_requests_;  // requests of the plan in flight
  bool opening_default_model_ = false;
  bool viewing_report_ = false;
  ModelInfo model_info_;
  bool model_loaded_ = false;
  bool busy_ = false;
  bool run_in_flight_ = false;
  int run_counter_ = 0;
  int demo_stage_ = 0;  // 0 idle, 1 first run, 2 after reorder
  QString last_error_;
  QByteArray default_state_;
};

}  // namespace lazyscope::workbench

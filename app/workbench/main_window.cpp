#include "app/workbench/main_window.h"

#include <QApplication>
#include <QCloseEvent>
#include <QDockWidget>
#include <QFileDialog>
#include <QDir>
#include <QFile>
#include <QFileInfo>
#include <QLabel>
#include <QListWidget>
#include <QMenu>
#include <QMenuBar>
#include <QMessageBox>
#include <QPushButton>
#include <QScrollArea>
#include <QSettings>
#include <QStatusBar>
#include <QTextStream>
#include <QTimer>
#include <algorithm>
#include <cstdio>
#include <exception>
#include <filesystem>
#include <optional>

#include "app/workbench/corpus_source.h"
#include "app/workbench/engine_worker.h"
#include "app/workbench/overhead_runner.h"
#include "app/workbench/workbench_resources.h"
#include "app/workbench/models/cache_stats_model.h"
#include "app/workbench/views/block_map_view.h"
#include "app/workbench/views/cache_stats_view.h"
#include "app/workbench/views/corpus_panel.h"
#include "app/workbench/views/dock_title_tooltip.h"
#include "app/workbench/views/equivalence_view.h"
#include "app/workbench/views/corpus_import_dialog.h"
#include "app/workbench/views/evaluation_panel.h"
#include "app/workbench/views/job_progress.h"
#include "app/workbench/views/gpu_timeline_view.h"
#include "app/workbench/views/kernel_stats_view.h"
#include "app/workbench/views/overhead_panel.h"
#include "app/workbench/views/report_compare_window.h"
#include "app/workbench/views/prompt_panel.h"
#include "app/workbench/views/report_window.h"
#include "app/workbench/views/shortcuts_help.h"
#include "app/workbench/views/timeline_view.h"
#include "app/workbench/views/workload_lab_panel.h"
#include "profiler/workload_tables.h"
#include "app/workbench/views/welcome_page.h"
#include "app/workbench/workbench_settings.h"
#include "base/atomic_file.h"
#include "base/output_guard.h"
#include "profiler/session_recorder.h"

namespace lazyscope::workbench {
namespace {

QDockWidget* make_dock(const QString& title, const QString& name, QWidget* content,
                       QMainWindow* window) {
  auto* dock = new QDockWidget(title, window);
  dock->setObjectName(name);  // saveState() needs stable names
  dock->setWidget(content);
  dock->setFeatures(QDockWidget::DockWidgetMovable | QDockWidget::DockWidgetFloatable |
                    QDockWidget::DockWidgetClosable);
  return dock;
}

// A panel in a tab of the bottom dock group, inside a scroll area: a tall panel (the evaluation
// form and its charts, the overhead table) would otherwise make the whole group, and so the
// window, at least its height, squeezing the prompt's output columns to a few lines.
QWidget* scrollable(QWidget* panel) {
  auto* scroll = new QScrollArea;
  scroll->setObjectName(panel->objectName().isEmpty() ? QStringLiteral("scroll") : panel->objectName() + QStringLiteral("_scroll"));
  scroll->setWidgetResizable(true);
  scroll->setFrameShape(QFrame::NoFrame);
  scroll->setWidget(panel);
  return scroll;
}

QSettings user_settings() { return workbench_settings(); }

// One line per policy of the last run: what it found in its own pool and what it copied.
QString run_summary(const std::vector<RequestFinishedEvent>& requests) {
  QStringList lines;
  for (const RequestFinishedEvent& e : requests) {
    lines << QObject::tr(
                 "<b>%1</b>: %2 of %3 documents from its cache, %4 % of prompt tokens, "
                 "%5 copied, TTFT %6 ms")
                 .arg(QString::fromStdString(e.policy).toHtmlEscaped())
                 .arg(e.stats.document_hits)
                 .arg(e.stats.documents)
                 .arg(100.0 * e.stats.token_hit_ratio(), 0, 'f', 1)
                 .arg(format_bytes(e.stats.bytes_copied))
                 .arg(e.ttft_ms, 0, 'f', 0);
  }
  return lines.join(QStringLiteral("<br>"));
}

}  // namespace

MainWindow::MainWindow(const WorkbenchOptions& options, QWidget* parent)
    : QMainWindow(parent), options_(options) {
  if (options_.restore_layout) apply_remembered_session(&options_);
  register_workbench_metatypes();
  lazyscope_init_workbench_resources();
  setWindowTitle(tr("LazyScope workbench"));
  setWindowIcon(QIcon(QStringLiteral(":/lazyscope/icons/lazyscope.svg")));
  setDockNestingEnabled(true);

  prompt_ = new PromptPanel(this);
  setCentralWidget(prompt_);
  buildDocks();
  buildMenus();

  model_label_ = new QLabel(tr("No model"), this);
  pool_label_ = new QLabel(this);
  activity_label_ = new QLabel(this);
  statusBar()->addWidget(model_label_);
  statusBar()->addWidget(activity_label_, 1);
  jobs_ = new JobProgressArea(this);
  statusBar()->addPermanentWidget(jobs_);
  statusBar()->addPermanentWidget(pool_label_);
  importer_ = new CorpusImporter(this);

  worker_ = new EngineWorker;
  worker_->setTraceDevice(options_.trace_gpu);
  worker_->setCpuExact(options_.cpu_exact);
  worker_->moveToThread(&worker_thread_);
  connect(&worker_thread_, &QThread::finished, worker_, &QObject::deleteLater);
  worker_thread_.setObjectName(QStringLiteral("lazyscope-engine"));
  worker_thread_.start();
  connectWorker();
  connectJobs();

  connect(welcome_, &WelcomePage::askSampleQuestion, this, &MainWindow::askSampleQuestion);
  connect(welcome_, &WelcomePage::reorderAndRerun, this, &MainWindow::reorderAndRerun);
  connect(welcome_, &WelcomePage::openWorkload, this, &MainWindow::showWorkloadLab);
  welcome_->setWorkloadAvailable(true, tr("Opens the Workload Lab: many requests with popular and rare documents "
                                          "under every policy, each on its own pool, hit ratios and the pools live"));
  connect(welcome_, &WelcomePage::contentChanged, this, &MainWindow::fitWelcome,
          Qt::QueuedConnection);
  connect(prompt_, &PromptPanel::runRequested, this, [this] { startRun(); });
  connect(prompt_, &PromptPanel::stopRequested, this, &MainWindow::stopRun);
  connect(corpus_, &CorpusPanel::questionChanged, prompt_, &PromptPanel::setQuery);
  connect(block_map_->model(), &BlockMapModel::changed, this, &MainWindow::updateStatus);
  evaluation_->setPromptSource([this] { return prompt_->systemText(); },
                               [this] { return prompt_->chatMode(); });
  connect(this, &MainWindow::modelReady, evaluation_, [this](const ModelInfo& info) {
    evaluation_->setModel(info.name, info.path, info.backend, info.kv_budget_bytes);
  });
  connect(evaluation_, &EvaluationPanel::questionActivated, this,
          [this](const QString& question, const std::vector<DocumentEntry>& passages) {
            corpus_->setQuestion(question);
            corpus_->selectedModel()->setDocuments(passages);
            prompt_->setQuery(question);
          });
  connect(block_map_, &BlockMapView::policyChanged, this, [this](const QString& policy) {
    QMetaObject::invokeMethod(worker_, "emitSnapshot", Qt::QueuedConnection,
                              Q_ARG(QString, policy));
  });

  // Defaults from the bundled settings file; the user's own settings override them.
  const QSettings defaults(QStringLiteral(":/lazyscope/default_settings.ini"),
                           QSettings::IniFormat);
  prompt_->setSystemText(
      defaults.value(QStringLiteral("run/system"), prompt_->systemText()).toString());
  prompt_->setMaxTokens(defaults.value(QStringLiteral("run/max_tokens"), 32).toInt());
  applyChatSetting(defaults.value(QStringLiteral("run/chat"), QStringLiteral("auto")).toString());

  resize(1600, 1000);
  default_state_ = saveState();
  if (options_.restore_layout) restoreSettings();
  if (options_.window_size.isValid()) resize(options_.window_size);
  // The demo is its own tour: its pictures show the panels, not the welcome page.
  if (options_.demo) findChild<QDockWidget*>(QStringLiteral("dock_welcome"))->hide();
  updateStatus();
  updateWelcome();
}

MainWindow::~MainWindow() {
  worker_->requestStop();
  worker_thread_.quit();
  worker_thread_.wait();
}

void MainWindow::buildDocks() {
  welcome_ = new WelcomePage(this);
  auto* welcome_dock = make_dock(tr("Start here"), QStringLiteral("dock_welcome"), welcome_, this);
  set_dock_title_tooltip(welcome_dock,
                         tr("Three steps to the central comparison. Close this page when you know "
                            "your way; Help ▸ Welcome brings it back."));
  addDockWidget(Qt::TopDockWidgetArea, welcome_dock);
  corpus_ = new CorpusPanel(this);
  equivalence_ = new EquivalenceView(this);
  block_map_ = new BlockMapView(this);
  stats_ = new CacheStatsView(this);
  timeline_ = new TimelineView(this);
  auto* corpus_dock =
      make_dock(tr("Corpus & retrieval"), QStringLiteral("dock_corpus"), corpus_, this);
  auto* equivalence_dock = make_dock(tr("Equivalence: lazy vs materialized"),
                                     QStringLiteral("dock_equivalence"), equivalence_, this);
  auto* block_dock = make_dock(tr("KV block map"), QStringLiteral("dock_blocks"), block_map_, this);
  auto* stats_dock = make_dock(tr("Cache stats"), QStringLiteral("dock_stats"), stats_, this);
  set_dock_title_tooltip(
      corpus_dock,
      tr("The passages a question can retrieve. Type or pick a question and press Enter: BM25 "
         "ranks the passages (a higher score is a better match). Use top-k as prompt puts the "
         "best ones into the prompt list below, in rank order; drag them or press Reverse to "
         "reorder."));
  set_dock_title_tooltip(
      equivalence_dock,
      tr("One cell per generated step, coloured by the largest difference between the lazy and "
         "the materialized logits at that step: green up to 1e-4 (the same function within fp32 "
         "rounding), red beyond. Where the greedy tokens first differ the strip says whether it "
         "is a near-tie. Hover a cell for both runs' top tokens."));
  set_dock_title_tooltip(
      block_dock,
      tr("Every block of one policy's KV pool (choose the policy above the grid). A cell's colour "
         "is the document that owns it (legend below), pale when cached but unused. Rings flash "
         "as it happens: green reused, orange newly encoded, magenta copied (a re-rotated copy), "
         "red evicted. Hover a cell for its segment and shift."));
  set_dock_title_tooltip(
      stats_dock,
      tr("Per policy over your runs: the token hit ratio (prompt tokens served from its cache ÷ "
         "prompt tokens, solid), the document hit ratio (dashed), and KV bytes stored and copied. "
         "Every policy has a pool of its own, so none is served from another's blocks."));
  addDockWidget(Qt::LeftDockWidgetArea, corpus_dock);
  addDockWidget(Qt::RightDockWidgetArea, block_dock);
  addDockWidget(Qt::RightDockWidgetArea, stats_dock);
  addDockWidget(Qt::BottomDockWidgetArea, equivalence_dock);
  auto* timeline_dock =
      make_dock(tr("Timeline (host time)"), QStringLiteral("dock_timeline"), timeline_, this);
  set_dock_title_tooltip(
      timeline_dock,
      tr("Where the time went, left to right: each request, its document encodes, the prompt's "
         "prefill and every decode step. Ctrl+wheel zooms, hover a bar for its name and duration. "
         "With --trace-gpu on the CUDA backend a GPU lane shows each kernel and copy."));
  // Under the equivalence strip, not beside it: both want the full width of the outputs.
  splitDockWidget(equivalence_dock, timeline_dock, Qt::Vertical);
  evaluation_ = new EvaluationPanel(this);
  auto* evaluation_dock =
      make_dock(tr("Evaluation: answer quality"), QStringLiteral("dock_evaluation"), scrollable(evaluation_), this);
  set_dock_title_tooltip(
      evaluation_dock,
      tr("Runs a question set through each mode and policy: exact match, containment and token F1 "
         "per configuration as bars, and a table of the questions where they disagree; click a row "
         "to load that question and its passages into the prompt."));
  tabifyDockWidget(timeline_dock, evaluation_dock);
  gpu_timeline_ = new GpuTimelineView(this);
  kernel_stats_ = new KernelStatsView(this);
  connect(gpu_timeline_, &GpuTimelineView::selectionChanged, kernel_stats_, &KernelStatsView::setRange);
  auto* gpu_dock = make_dock(tr("GPU timeline"), QStringLiteral("dock_gpu_timeline"), gpu_timeline_, this);
  set_dock_title_tooltip(
      gpu_dock,
      tr("Every NVTX range of the engine, one row per thread and nesting depth; with --trace-gpu on the CUDA "
         "backend also every CUDA runtime call and one row per GPU stream with its kernels and copies. "
         "Ctrl+wheel or +/− zooms, drag pans, Home fits, Shift+drag selects a range for the kernel "
         "statistics; hover a kernel to see the call that launched it."));
  auto* kernel_dock = make_dock(tr("Kernel statistics"), QStringLiteral("dock_kernel_stats"), kernel_stats_, this);
  set_dock_title_tooltip(
      kernel_dock,
      tr("Per GPU kernel: launches, total, share of GPU time, mean, median, p95, min, max, launch "
         "configuration and registers; click a header to sort. Follows the GPU timeline's selected range."));
  tabifyDockWidget(timeline_dock, gpu_dock);
  tabifyDockWidget(timeline_dock, kernel_dock);
  overhead_ = new OverheadPanel(this);
  overhead_runner_ = new OverheadRunner(this);
  auto* overhead_dock = make_dock(tr("Lazy overhead"), QStringLiteral("dock_overhead"), scrollable(overhead_), this);
  set_dock_title_tooltip(
      overhead_dock,
      tr("Run ▸ Measure Lazy Overhead: plain and lazy attention timed in alternation at this model's shape and "
         "the last request's context; the median lazy ÷ plain − 1 with its quartiles. Stored in the session report."));
  tabifyDockWidget(timeline_dock, overhead_dock);
  connect(overhead_, &OverheadPanel::measureRequested, this, [this] { measureLazyOverhead(); });
  connect(overhead_runner_, &OverheadRunner::rowMeasured, overhead_, &OverheadPanel::addRow);
  connect(overhead_runner_, &OverheadRunner::finished, this, [this](const std::vector<OverheadProbeRow>& rows) {
    worker_->addOverhead(rows);
    overhead_->setRunning(0, QString());
    activity_label_->setText(tr("Lazy overhead measured: %n row(s), stored in the session report.", nullptr, int(rows.size())));
    Q_EMIT overheadFinished(int(rows.size()));
  });
  connect(overhead_runner_, &OverheadRunner::failed, this, [this](const QString& message) {
    overhead_->setRunning(0, QString());
    showError(tr("Could not measure the lazy overhead"), message);
    Q_EMIT overheadFinished(-1);
  });
  // A traced session is about its kernels: their timeline comes first.
  (options_.trace_gpu ? gpu_dock : timeline_dock)->raise();
  // The side docks own the bottom corners; the equivalence strip sits under the outputs.
  setCorner(Qt::BottomLeftCorner, Qt::LeftDockWidgetArea);
  setCorner(Qt::BottomRightCorner, Qt::RightDockWidgetArea);
  resizeDocks({corpus_dock, block_dock}, {440, 560}, Qt::Horizontal);
  resizeDocks({block_dock, stats_dock}, {470, 500}, Qt::Vertical);
  resizeDocks({equivalence_dock, timeline_dock}, {110, 150}, Qt::Vertical);
  // The Workload Lab has its own engine thread; it opens as a large floating window.
  workload_lab_ = new WorkloadLabPanel(this);
  workload_dock_ = make_dock(tr("Workload Lab"), QStringLiteral("dock_workload_lab"), workload_lab_, this);
  addDockWidget(Qt::BottomDockWidgetArea, workload_dock_);
  set_dock_title_tooltip(
      workload_dock_,
      tr("Many requests served at once through the continuous-batching scheduler, each policy on its "
         "own KV pool of the budget: configure a workload (or the paper preset), Run, and watch the "
         "hit ratio, the pools, the batch and TTFT per policy; the table compares them at the end."));
  workload_dock_->setFloating(true);
  workload_dock_->resize(1500, 950);
  workload_dock_->hide();
}

void MainWindow::showWorkloadLab() {
  workload_dock_->show();
  workload_dock_->raise();
  workload_dock_->activateWindow();
}

void MainWindow::buildMenus() {
  QMenu* file = menuBar()->addMenu(tr("&File"));
  file->addAction(tr("Open &Model…"), QKeySequence::Open, this, [this] {
    const QString dir =
        QFileDialog::getExistingDirectory(this, tr("Open model (HF checkpoint directory)"));
    if (!dir.isEmpty()) openModel(dir);
  });
  file->addAction(tr("Open Model &File (.gguf)…"), this, [this] {
    const QString path =
        QFileDialog::getOpenFileName(this, tr("Open GGUF model"), {}, tr("GGUF (*.gguf)"));
    if (!path.isEmpty()) openModel(path);
  });
  file->addAction(tr("Open &Corpus…"), this, [this] {
    const QString path = QFileDialog::getOpenFileName(
        this, tr("Open corpus store"), {}, tr("LazyScope corpus (*.db *.sqlite);;All files (*)"));
    if (!path.isEmpty()) openCorpus(path);
  });
  file->addAction(tr("Open &Sample Corpus"), this, [this] { openCorpus(QString()); });
  file->addAction(tr("&Import Corpus…"), this, [this] {
    CorpusImportDialog dialog(this);
    if (dialog.exec() == QDialog::Accepted) importCorpus(dialog.request());
  });
  file->addSeparator();
  file->addAction(
      tr("Open Session &Report…"), QKeySequence(Qt::CTRL | Qt::SHIFT | Qt::Key_O), this, [this] {
        const QString path =
            QFileDialog::getOpenFileName(this, tr("Open session report"), {},
                                         tr("SQLite report (*.db *.sqlite);;All files (*)"));
        if (!path.isEmpty()) openSessionReport(path);
      });
  file->addAction(tr("Co&mpare Session Reports…"), this, [this] {
    const QString a = QFileDialog::getOpenFileName(this, tr("Compare: first report (A)"), {},
                                                   tr("SQLite report (*.db *.sqlite);;All files (*)"));
    if (a.isEmpty()) return;
    const QString b = QFileDialog::getOpenFileName(this, tr("Compare: second report (B)"), {},
                                                   tr("SQLite report (*.db *.sqlite);;All files (*)"));
    if (!b.isEmpty()) compareSessionReports(a, b);
  });
  recent_reports_menu_ = file->addMenu(tr("Recent Session Re&ports"));
  connect(recent_reports_menu_, &QMenu::aboutToShow, this, &MainWindow::rebuildRecentReports);
  rebuildRecentReports();
  file->addSeparator();
  file->addAction(tr("C&lear KV Cache"), this, [this] {
    if (!busy_) QMetaObject::invokeMethod(worker_, &EngineWorker::clearCache, Qt::QueuedConnection);
  });
  file->addAction(tr("Save Screens&hot…"), this, [this] {
    const QString path = QFileDialog::getSaveFileName(
        this, tr("Save screenshot"), QStringLiteral("lazyscope.png"), tr("PNG (*.png)"));
    if (!path.isEmpty()) saveScreenshot(path);
  });
  file->addAction(tr("Export Session &Report…"), this, [this] {
    const QString path = QFileDialog::getSaveFileName(
        this, tr("Export session report"), QStringLiteral("lazyscope-session.db"),
        tr("SQLite report (*.db *.sqlite);;All files (*)"));
    if (!path.isEmpty()) exportSessionReport(path);
  });
  file->addAction(tr("Export &Trace (Perfetto JSON)…"), this, [this] {
    const QString path = QFileDialog::getSaveFileName(
        this, tr("Export trace"), QStringLiteral("lazyscope-trace.json"),
        tr("Chrome/Perfetto trace (*.json);;All files (*)"));
    if (!path.isEmpty()) exportTrace(path);
  });
  file->addSeparator();
  file->addAction(tr("&Quit"), QKeySequence::Quit, this, &QWidget::close);

  QMenu* edit = menuBar()->addMenu(tr("&Edit"));
  edit->addAction(tr("&Search the Corpus"), QKeySequence::Find, this,
                  [this] { corpus_->focusQuestion(); });

  QMenu* run = menuBar()->addMenu(tr("&Run"));
  run->addAction(tr("&Run"), QKeySequence(Qt::CTRL | Qt::Key_Return), this, [this] { startRun(); });
  run->addAction(tr("&Stop"), QKeySequence(Qt::Key_Escape), this, &MainWindow::stopRun);
  run->addAction(tr("Re&verse Documents and Run"), QKeySequence(Qt::CTRL | Qt::Key_R), this,
                 [this] {
                   corpus_->selectedModel()->reverse();
                   startRun();
                 });
  run->addSeparator();
  run->addAction(tr("Measure Lazy &Overhead"), this, [this] { measureLazyOverhead(); });
  run->addAction(tr("&Workload Lab…"), QKeySequence(Qt::CTRL | Qt::Key_L), this, &MainWindow::showWorkloadLab);

  QMenu* view = menuBar()->addMenu(tr("&View"));
  for (QDockWidget* dock : findChildren<QDockWidget*>()) view->addAction(dock->toggleViewAction());
  view->addSeparator();
  view->addAction(tr("&Reset Layout"), this, [this] { restoreState(default_state_); });

  QMenu* help = menuBar()->addMenu(tr("&Help"));
  help->addAction(tr("&Welcome"), this, &MainWindow::showWelcome);
  help->addAction(tr("&Quick Guide"), QKeySequence::HelpContents, this,
                  &MainWindow::showQuickGuide);
  help->addAction(tr("&Keyboard Shortcuts"), QKeySequence(Qt::CTRL | Qt::Key_Slash), this,
                  &MainWindow::showShortcuts);
  help->addAction(tr("&About LazyScope"), this, &MainWindow::showAbout);
}

void MainWindow::connectWorker() {
  EngineWorker* w = worker_;
  connect(w, &EngineWorker::progress, this, &MainWindow::onProgress);
  connect(w, &EngineWorker::modelOpened, this, &MainWindow::onModelOpened);
  connect(w, &EngineWorker::failed, this, &MainWindow::showError);
  connect(w, &EngineWorker::busyChanged, this, &MainWindow::onBusy);
  connect(w, &EngineWorker::loadEnded, this, &MainWindow::onLoadEnded);
  connect(w, &EngineWorker::runStarted, this, [this](int run_index, const QString& key) {
    prompt_->runModel()->markRunning(key);
    block_map_->model()->beginRun(run_index, key);
    activity_label_->setText(tr("Running %1…").arg(key));
  });
  connect(w, &EngineWorker::tokenProduced, prompt_->runModel(), &RunModel::appendToken);
  connect(w, &EngineWorker::runFinished, prompt_->runModel(), &RunModel::finish);
  connect(w, &EngineWorker::requestFinished, this, [this](const RequestFinishedEvent& e) {
    stats_->model()->add(prompt_->runModel()->runIndex(), e);
    refreshTimeline();  // the recorder is ahead of this queued signal (it is first in the fanout)
  });
  connect(w, &EngineWorker::segmentEvent, block_map_->model(), &BlockMapModel::applySegment);
  connect(w, &EngineWorker::blockEvent, block_map_->model(), &BlockMapModel::applyBlock);
  connect(w, &EngineWorker::poolEvent, block_map_->model(), &BlockMapModel::applyPool);
  connect(w, &EngineWorker::snapshotReady, block_map_->model(), &BlockMapModel::applySnapshot);
  connect(w, &EngineWorker::equivalenceReady, equivalence_->model(), &EquivalenceModel::setReport);
  connect(w, &EngineWorker::planFinished, this, &MainWindow::onPlanFinished);
  connect(w, &EngineWorker::requestFinished, this,
          [this](const RequestFinishedEvent& e) { run_requests_.push_back(e); });
}

void MainWindow::start() {
  if (!options_.open_report.isEmpty()) {
    // A report needs no model: with --screenshot its window is the picture.
    const bool opened = openSessionReport(options_.open_report);
    if (!options_.screenshot.isEmpty()) {
      auto* report = findChild<ReportWindow*>();
      if (opened && report) {
        if (options_.window_size.isValid()) report->resize(options_.window_size);
        QApplication::processEvents();
        const bool ok = report->grab().save(options_.screenshot, "PNG");
        std::printf("%s screenshot %s\n", ok ? "saved" : "could not save", qPrintable(options_.screenshot));
        if (!options_.panel_shots.isEmpty()) savePanelShots(options_.panel_shots, report->recording());
        std::fflush(stdout);
        QTimer::singleShot(0, qApp, [ok] { QApplication::exit(ok ? 0 : 1); });
      } else {
        QTimer::singleShot(0, qApp, [] { QApplication::exit(1); });
      }
      return;
    }
  }
  openCorpus(options_.corpus);
  if (!options_.model.isEmpty())
    openModel(options_.model);
  else if (options_.load_default_model)
    openDefaultModel();
}

void MainWindow::openModel(const QString& path) {
  if (run_in_flight_) {
    showError(tr("Cannot open a model now"), tr("Stop the running generation first."));
    return;
  }
  opening_default_model_ = false;
  activity_label_->setText(tr("Loading %1…").arg(path));
  beginLoadJob(tr("Loading %1").arg(QFileInfo(path).fileName()));
  QMetaObject::invokeMethod(worker_, "openModel", Qt::QueuedConnection, Q_ARG(QString, path),
                            Q_ARG(QString, options_.backend),
                            Q_ARG(qint64, options_.kv_budget_bytes));
}

void MainWindow::openDefaultModel() {
  opening_default_model_ = true;
  activity_label_->setText(tr("Loading the default model…"));
  beginLoadJob(tr("Loading the default model"));
  QMetaObject::invokeMethod(worker_, "openDefaultModel", Qt::QueuedConnection,
                            Q_ARG(QString, options_.backend),
                            Q_ARG(qint64, options_.kv_budget_bytes));
}

bool MainWindow::openCorpus(const QString& path) {
  try {
    auto source = path.isEmpty() ? CorpusSource::openSample() : CorpusSource::open(path);
    const int questions = int(source->questions().size());
    corpus_->setCorpus(std::move(source));
    evaluation_->setCorpus(path, questions);
    workload_lab_->setCorpus(path, questions);
    if (options_.restore_layout) remember_corpus(path);
    return true;
  } catch (const std::exception& e) {
    showError(
        tr("Could not open the corpus %1").arg(path.isEmpty() ? tr("(bundled sample)") : path),
        QString::fromUtf8(e.what()));
    return false;
  }
}

bool MainWindow::startRun() {
  // The worker runs queued calls in order, so a load still finishing is no reason to refuse.
  if (run_in_flight_) return false;
  if (!model_loaded_) {
    showError(tr("Cannot run"),
              tr("No model is loaded yet. Wait for it, or use File ▸ Open Model…"));
    return false;
  }
  const QStringList keys = prompt_->checkedPolicies();
  if (keys.isEmpty()) {
    showError(tr("Cannot run"), tr("Tick at least one policy (lazy, materialized, …)."));
    return false;
  }
  QString query = prompt_->query().trimmed();
  if (query.isEmpty()) query = corpus_->question().trimmed();
  if (query.isEmpty()) {
    showError(tr("Cannot run"), tr("Type a query (or pick a sample question)."));
    return false;
  }
  RunPlan plan;
  plan.run_index = ++run_counter_;
  const QString system = prompt_->systemText();
  if (!system.trimmed().isEmpty()) plan.request.prefix = system.toStdString();
  for (const DocumentEntry& doc : corpus_->selectedModel()->documents()) {
    plan.request.documents.push_back(doc.text.toStdString());
    plan.request.document_labels.push_back(doc.title.toStdString());
  }
  plan.request.query = query.toStdString();
  plan.request.max_new_tokens = prompt_->maxTokens();
  plan.preparation.chat = prompt_->chatMode();
  for (const QString& key : keys) plan.policies.push_back(policy_choice(key));
  prompt_->runModel()->startPlan(plan.run_index, keys);
  run_requests_.clear();
  run_tokens_ = 0;
  run_token_budget_ = std::max(1, plan.request.max_new_tokens * int(keys.size()));
  jobs_->begin(QStringLiteral("run"), tr("Run %1").arg(plan.run_index), [this] { stopRun(); });
  run_in_flight_ = true;
  updateWelcome();
  worker_->clearStop();
  prompt_->setBusy(true);
  activity_label_->setText(tr("Run %1 queued…").arg(plan.run_index));
  QMetaObject::invokeMethod(worker_, "runPlan", Qt::QueuedConnection,
                            Q_ARG(lazyscope::workbench::RunPlan, plan));
  return true;
}

void MainWindow::stopRun() {
  if (!run_in_flight_) return;
  worker_->requestStop();  // an atomic flag: safe from this thread
  activity_label_->setText(tr("Stopping…"));
}

void MainWindow::onPlanFinished(int run_index, bool cancelled) {
  run_in_flight_ = false;
  jobs_->end(QStringLiteral("run"));
  prompt_->setBusy(busy_);
  if (cancelled) prompt_->runModel()->stopWaiting();
  activity_label_->setText(cancelled ? tr("Run %1 stopped.").arg(run_index)
                                     : tr("Run %1 finished.").arg(run_index));
  if (!cancelled) {
    // The strip's text names the run it sums up: one of its own buttons', or the prompt's Run.
    welcome_->setStage(welcome_step_ == WelcomeStep::Ask       ? WelcomePage::Stage::Asked
                       : welcome_step_ == WelcomeStep::Reorder ? WelcomePage::Stage::Reordered
                                                               : WelcomePage::Stage::Ran);
  }
  welcome_step_ = WelcomeStep::None;
  welcome_->setSummary(run_summary(run_requests_));
  updateWelcome();
  Q_EMIT planFinished(run_index, cancelled);
  if (demo_stage_ > 0) continueDemo();
}

void MainWindow::onBusy(bool busy) {
  busy_ = busy;
  prompt_->setBusy(busy || run_in_flight_);
  updateWelcome();
}

void MainWindow::onProgress(double fraction, const QString& what) {
  // The worker reports progress only while it loads a model.
  jobs_->update(QStringLiteral("load"), fraction, what);
}

void MainWindow::beginLoadJob(const QString& title) {
  if (pending_loads_++ == 0) worker_->clearLoadCancel();
  jobs_->begin(QStringLiteral("load"), title, [this] { cancelModelLoad(); });
}

void MainWindow::cancelModelLoad() {
  if (pending_loads_ == 0) return;
  worker_->requestLoadCancel();  // an atomic flag: safe from this thread
  activity_label_->setText(tr("Cancelling the model load…"));
}

void MainWindow::onLoadEnded(bool cancelled) {
  if (pending_loads_ > 0) --pending_loads_;
  if (pending_loads_ > 0) return;  // a later load is still queued: its row stays
  jobs_->end(QStringLiteral("load"));
  worker_->clearLoadCancel();
  if (!cancelled) return;
  activity_label_->setText(
      model_loaded_ ? tr("Model load cancelled; %1 stays loaded.").arg(model_info_.name)
                    : tr("Model load cancelled; no model is loaded (File ▸ Open Model…)."));
}

void MainWindow::connectJobs() {
  connect(importer_, &CorpusImporter::progress, this, [this](double f, const QString& what) {
    jobs_->update(QStringLiteral("import"), f, what);
  });
  connect(importer_, &CorpusImporter::imported, this,
          [this](const QString& db, qint64 documents, qint64 questions) {
            jobs_->end(QStringLiteral("import"));
            if (openCorpus(db))
              activity_label_->setText(tr("Imported %1 documents and %2 questions into %3.")
                                           .arg(documents)
                                           .arg(questions)
                                           .arg(db));
          });
  connect(importer_, &CorpusImporter::cancelled, this, [this](const QString& db) {
    jobs_->end(QStringLiteral("import"));
    activity_label_->setText(tr("Corpus import cancelled; %1 is as it was, the open corpus stays.").arg(db));
  });
  connect(importer_, &CorpusImporter::failed, this, [this](const QString& db, const QString& message) {
    jobs_->end(QStringLiteral("import"));
    showError(tr("Could not import the corpus into %1").arg(db), message);
  });
  connect(worker_, &EngineWorker::tokenProduced, this, [this] {
    ++run_tokens_;
    jobs_->update(QStringLiteral("run"), double(run_tokens_) / run_token_budget_,
                  tr("%1 of at most %2 tokens").arg(run_tokens_).arg(run_token_budget_));
  });
  connect(evaluation_, &EvaluationPanel::evaluationStarted, this, [this] {
    jobs_->begin(QStringLiteral("evaluation"), tr("Evaluation"), [this] { evaluation_->stop(); });
    jobs_->update(QStringLiteral("evaluation"), -1, tr("loading the model"));
  });
  connect(evaluation_, &EvaluationPanel::progressChanged, this,
          [this](double f, const QString& what) { jobs_->update(QStringLiteral("evaluation"), f, what); });
  connect(evaluation_, &EvaluationPanel::evaluationFinished, this, [this](bool cancelled) {
    jobs_->end(QStringLiteral("evaluation"));
    activity_label_->setText(cancelled ? tr("Evaluation stopped; the finished questions are kept.")
                                       : tr("Evaluation finished."));
  });
  connect(workload_lab_, &WorkloadLabPanel::runBegan, this, [this](const QString& title) {
    jobs_->begin(QStringLiteral("workload"), title, [this] { workload_lab_->stopRun(); });
    jobs_->update(QStringLiteral("workload"), -1, tr("starting"));
  });
  connect(workload_lab_, &WorkloadLabPanel::progressChanged, this,
          [this](double f, const QString& what) { jobs_->update(QStringLiteral("workload"), f, what); });
  connect(workload_lab_, &WorkloadLabPanel::runFinished, this, [this](bool cancelled) {
    jobs_->end(QStringLiteral("workload"));
    if (!workload_lab_->lastError().isEmpty())
      activity_label_->setText(tr("Workload failed: %1").arg(workload_lab_->lastError()));
    else if (!cancelled)
      activity_label_->setText(tr("Workload finished."));
    else if (workload_lab_->keptPreviousResults())
      activity_label_->setText(tr("Workload cancelled while loading; the Workload Lab keeps its previous results."));
    else
      activity_label_->setText(tr("Workload stopped; the Workload Lab keeps what ran."));
  });
}

bool MainWindow::importCorpus(const CorpusImportRequest& request) {
  QString error;
  if (!importer_->start(request, &error)) {
    showError(tr("Cannot import the corpus"), error);
    return false;
  }
  jobs_->begin(QStringLiteral("import"), tr("Importing %1").arg(QFileInfo(request.source).fileName()),
               [this] { importer_->cancel(); });
  activity_label_->setText(tr("Importing %1 into %2…").arg(request.source, request.db));
  return true;
}

QString MainWindow::activityText() const { return activity_label_->text(); }

void MainWindow::onModelOpened(const ModelInfo& info) {
  model_info_ = info;
  model_loaded_ = true;
  if (options_.restore_layout) rememberSession(info);
  updateWelcome();
  block_map_->model()->resize(info.pool_blocks, info.block_size, info.bytes_per_block);
  equivalence_->model()->clear();
  stats_->model()->clear();
  refreshTimeline();  // a new session has a fresh, empty recorder
  activity_label_->setText(info.trace_note.isEmpty()
                               ? tr("Model loaded.")
                               : tr("Model loaded. No GPU trace: %1").arg(info.trace_note));
  updateStatus();
  Q_EMIT modelReady(info);
  if (options_.demo && demo_stage_ == 0) {
    if (prepareDemoPrompt() && startRun()) {
      demo_stage_ = 1;
      return;
    }
    std::fprintf(stderr, "lazyscope: --demo could not start (no sample questions or no hits)\n");
  }
  if (!options_.screenshot.isEmpty()) {
    saveScreenshot(options_.screenshot);
    saveRequestedOutputs();
    QTimer::singleShot(0, qApp, &QApplication::quit);
  }
}

bool MainWindow::prepareDemoPrompt() {
  QListWidget* samples = corpus_->sampleQuestions();
  if (samples->count() == 0) return false;
  corpus_->setQuestion(samples->item(0)->text());
  corpus_->search();
  corpus_->useTopHits(4);
  prompt_->setQuery(samples->item(0)->text());
  prompt_->setPolicyChecked(QStringLiteral("lazy"), true);
  prompt_->setPolicyChecked(QStringLiteral("materialized"), true);
  return corpus_->selectedModel()->rowCount() > 0;
}

void MainWindow::continueDemo() {
  if (demo_stage_ == 1) {
    // The teaching moment: same documents, new order. Lazy reuses, materialized copies.
    demo_stage_ = 2;
    corpus_->selectedModel()->reverse();
    if (startRun()) return;
  }
  demo_stage_ = 0;
  Q_EMIT demoFinished();
  if (!options_.screenshot.isEmpty()) {
    saveScreenshot(options_.screenshot);
    saveRequestedOutputs();
    QTimer::singleShot(0, qApp, &QApplication::quit);
  }
}

void MainWindow::refreshTimeline() {
  const SessionRecording recording = worker_->recordingSnapshot();
  timeline_->setRecording(recording);
  gpu_timeline_->setRecording(recording);
  kernel_stats_->setRecording(recording, gpu_timeline_->data().beginNs());
}

bool MainWindow::measureLazyOverhead() {
  if (!model_loaded_ || model_info_.head_dim <= 0) {
    showError(tr("Cannot measure the lazy overhead"), tr("Open a model first: the probe runs at its attention shape."));
    return false;
  }
  if (overhead_runner_->running()) {
    showError(tr("Cannot measure the lazy overhead"), tr("A measurement is already running."));
    return false;
  }
  OverheadProbeOptions options;
  options.shapes = {QStringLiteral("%1/%2/%3").arg(model_info_.num_heads).arg(model_info_.num_kv_heads).arg(model_info_.head_dim).toStdString()};
  // The last request's context (prompt and generated tokens), else a short and a long one.
  int context = 0;
  for (const RequestFinishedEvent& e : run_requests_) context = std::max(context, e.prompt_tokens + e.generated_tokens);
  options.contexts = context > 0 ? std::vector<int>{context} : std::vector<int>{1024, 4096};
  options.block_size = std::max(1, model_info_.block_size);
  options.repeats = 7;
  options.backend = model_info_.backend == QLatin1String("cuda") ? BackendKind::Cuda : BackendKind::Cpu;
  if (!overhead_runner_->start(options)) return false;
  overhead_->setRows({});
  overhead_->setRunning(OverheadRunner::expectedRows(options),
                        tr("Measuring plain vs lazy attention at %1, context %2 on the %3 backend…")
                            .arg(QString::fromStdString(options.shapes.front()))
                            .arg(context > 0 ? QString::number(context) : tr("1024 and 4096"))
                            .arg(model_info_.backend));
  if (auto* dock = findChild<QDockWidget*>(QStringLiteral("dock_overhead"))) {
    dock->show();
    dock->raise();
  }
  return true;
}

bool MainWindow::savePanelShots(const QString& dir) { return savePanelShots(dir, worker_->recordingSnapshot()); }

void MainWindow::saveRequestedOutputs() {
  if (!options_.panel_shots.isEmpty()) savePanelShots(options_.panel_shots);
  if (!options_.save_report.isEmpty() && exportSessionReport(options_.save_report))
    std::printf("saved report %s\n", qPrintable(options_.save_report));
  std::fflush(stdout);
}

bool MainWindow::savePanelShots(const QString& dir, const SessionRecording& recording) {
  GpuTimelineView timeline;
  timeline.setAttribute(Qt::WA_DontShowOnScreen);
  timeline.setRecording(recording);
  const int rows_height = GpuTimelineView::kAxisHeight + timeline.rowCount() * GpuTimelineView::kRowHeight + 24;
  timeline.resize(1600, std::clamp(rows_height, 240, 900));
  timeline.show();
  timeline.fitToWidth();
  KernelStatsView stats;
  stats.setAttribute(Qt::WA_DontShowOnScreen);
  stats.setRecording(recording, timeline.data().beginNs());
  stats.resize(1600, std::clamp(90 + 26 * stats.model()->rowCount(), 240, 900));
  stats.show();
  QApplication::processEvents();
  bool ok = true;
  for (const auto& [widget, name] : {std::pair<QWidget*, const char*>{&timeline, "gpu_timeline.png"},
                                     std::pair<QWidget*, const char*>{&stats, "kernel_stats.png"}}) {
    const QString path = QDir(dir).filePath(QString::fromLatin1(name));
    const bool saved = widget->grab().save(path, "PNG");
    std::fprintf(saved ? stdout : stderr, "%s panel %s\n", saved ? "saved" : "could not save", qPrintable(path));
    ok = ok && saved;
  }
  // The numbers behind the statistics picture, so a live session and its reopened report can be
  // compared row by row (scripts/device/workbench_gpu_shots.sh diffs the two).
  const QString table_path = QDir(dir).filePath(QStringLiteral("kernel_stats.tsv"));
  QFile table(table_path);
  if (table.open(QIODevice::WriteOnly | QIODevice::Truncate | QIODevice::Text)) {
    QTextStream out(&table);
    const KernelStats& s = stats.model()->stats();
    out << "# " << stats.summary() << "\n";
    out << "name\tgraph\tcount\ttotal_ns\tmedian_ns\tp95_ns\tmin_ns\tmax_ns\n";
    for (const KernelStatsRow& r : s.rows)
      out << QString::fromStdString(r.name) << '\t' << (r.graph ? 1 : 0) << '\t' << r.count << '\t' << r.total_ns
          << '\t' << r.median_ns << '\t' << r.p95_ns << '\t' << r.min_ns << '\t' << r.max_ns << "\n";
    std::printf("saved kernel statistics %s (%lld kernels, %lld graph launches, %lld ns busy)\n",
                qPrintable(table_path), static_cast<long long>(s.kernels), static_cast<long long>(s.graph_launches),
                static_cast<long long>(s.busy_ns()));
  } else {
    std::fprintf(stderr, "could not save %s\n", qPrintable(table_path));
    ok = false;
  }
  std::fflush(stdout);
  return ok;
}

bool MainWindow::compareSessionReports(const QString& path_a, const QString& path_b) {
  SessionRecording a, b;
  for (const auto& [path, recording] : {std::pair{path_a, &a}, std::pair{path_b, &b}}) {
    try {
      *recording = load_session_sqlite(std::filesystem::path(path.toStdString()));
    } catch (const std::exception& e) {
      showError(tr("Could not open the session report %1").arg(path), QString::fromUtf8(e.what()));
      return false;
    }
  }
  auto* window = new ReportCompareWindow(a.kernels, a.graphs, QFileInfo(path_a).fileName(), b.kernels, b.graphs,
                                         QFileInfo(path_b).fileName(), this);
  window->show();
  return true;
}

bool MainWindow::exportSessionReport(const QString& path) {
  try {
    // Replaces an earlier report, never another kind of file (a corpus store, a model file).
    const std::filesystem::path target(path.toStdString());
    OutputGuard guard;
    guard.output(target, "report", "session report", [](const std::filesystem::path& p) {
      try {
        (void)load_session_sqlite(p);
        return true;
      } catch (const std::exception&) {
        return false;
      }
    });
    guard.check();
    const SessionRecording recording = worker_->recordingSnapshot();
    if (workload_lab_->hasResults()) {
      // The Workload Lab's runs go into the same report, beside the session's requests.
      save_workload_sqlite(workload_lab_->reportMetadata(), workload_lab_->resultsModel()->results(), target,
                           &workload_lab_->prompts(), &recording);
    } else {
      save_session_sqlite(recording, target);
    }
  } catch (const std::exception& e) {
    showError(tr("Could not export the session report to %1").arg(path),
              QString::fromUtf8(e.what()));
    return false;
  }
  statusBar()->showMessage(tr("Session report written to %1").arg(path), 5000);
  if (options_.restore_layout) add_recent_report(path);
  return true;
}

bool MainWindow::openSessionReport(const QString& path) {
  SessionRecording recording;
  try {
    recording = load_session_sqlite(std::filesystem::path(path.toStdString()));
  } catch (const std::exception& e) {
    showError(tr("Could not open the session report %1").arg(path), QString::fromUtf8(e.what()));
    return false;
  }
  std::optional<WorkloadReport> workload;
  try {
    workload = load_workload_sqlite(std::filesystem::path(path.toStdString()));
  } catch (const std::exception& e) {
    showError(tr("Could not read the workload runs of %1").arg(path), QString::fromUtf8(e.what()));
  }
  auto* window = new ReportWindow(recording, path, this);
  window->show();
  if (workload && !workload->runs.empty()) {
    workload_lab_->showReport(*workload, path);
    showWorkloadLab();
  }
  if (options_.restore_layout) add_recent_report(path);
  statusBar()->showMessage(tr("Opened the session report %1").arg(path), 5000);
  return true;
}

void MainWindow::rebuildRecentReports() {
  recent_reports_menu_->clear();
  const QStringList reports = recent_reports();
  for (const QString& path : reports)
    recent_reports_menu_->addAction(path, this, [this, path] { openSessionReport(path); });
  if (!reports.isEmpty()) {
    recent_reports_menu_->addSeparator();
    recent_reports_menu_->addAction(tr("Clear the List"), this, [] { clear_recent_reports(); });
  }
  recent_reports_menu_->setEnabled(!reports.isEmpty());
}

bool MainWindow::exportTrace(const QString& path) {
  try {
    const std::filesystem::path target(path.toStdString());
    OutputGuard guard;
    guard.output(target, "trace", "Chrome trace", [](const std::filesystem::path& p) {
      return is_json_object_with_keys(p, {"traceEvents"});
    });
    guard.check();
    // Written whole to a temporary sibling, fsync'd and renamed, like the SQLite report.
    write_file_atomically(target, chrome_trace_json(worker_->recordingSnapshot()), "trace");
  } catch (const std::exception& e) {
    showError(tr("Could not export the trace to %1").arg(path), QString::fromUtf8(e.what()));
    return false;
  }
  statusBar()->showMessage(tr("Trace written to %1").arg(path), 5000);
  return true;
}

bool MainWindow::saveScreenshot(const QString& path) {
  QApplication::processEvents();
  if (qEnvironmentVariableIsSet("LAZYSCOPE_LAYOUT_DEBUG"))
    for (QWidget* w : findChildren<QWidget*>())
      if (w->isVisible() && w->minimumSizeHint().width() > 300)
        std::fprintf(stderr, "%s %s min %d\n", w->metaObject()->className(),
                     qPrintable(w->objectName()), w->minimumSizeHint().width());
  const bool ok = grab().save(path, "PNG");
  std::fprintf(ok ? stdout : stderr, "%s screenshot %s\n", ok ? "saved" : "could not save",
               qPrintable(path));
  std::fflush(stdout);
  return ok;
}

void MainWindow::showError(const QString& what, const QString& message) {
  last_error_ = what + QStringLiteral(": ") + message;
  activity_label_->setText(what);
  std::fprintf(stderr, "lazyscope: %s\n", qPrintable(last_error_));
  if (options_.screenshot.isEmpty()) {
    // Non-modal: the workbench stays usable and nothing waits on the dialog.
    auto* box = new QMessageBox(QMessageBox::Warning, tr("LazyScope"), what, QMessageBox::Ok, this);
    box->setInformativeText(message);
    box->setAttribute(Qt::WA_DeleteOnClose);
    box->open();
  }
  Q_EMIT errorShown(last_error_);
  if (!options_.screenshot.isEmpty() && !model_loaded_ && !run_in_flight_) {
    // Headless screenshot runs must not hang on a model that will never load.
    saveScreenshot(options_.screenshot);
    QTimer::singleShot(0, qApp, [] { QApplication::exit(1); });
  }
}

void MainWindow::updateStatus() {
  if (model_loaded_)
    model_label_->setText(tr("<b>%1</b> · backend %2 · %3")
                              .arg(model_info_.name.toHtmlEscaped(),
                                   model_info_.backend.toHtmlEscaped(),
                                   model_info_.device.toHtmlEscaped()));
  const BlockMapModel* m = block_map_->model();
  const int total = m->blockCount();
  pool_label_->setText(total == 0
                           ? tr("KV pool: –")
                           : tr("KV pool of %6: %1 / %2 blocks (%3 of %4) · block %5 tokens · "
                                "one pool per policy")
                                 .arg(m->usedBlocks())
                                 .arg(total)
                                 .arg(format_bytes(m->bytesPerBlock() * m->usedBlocks()))
                                 .arg(format_bytes(m->bytesPerBlock() * total))
                                 .arg(m->blockSize())
                                 .arg(m->policy()));
}

void MainWindow::closeEvent(QCloseEvent* event) {
  worker_->requestStop();
  if (options_.restore_layout) saveSettings();
  QMainWindow::closeEvent(event);
}

void MainWindow::rememberSession(const ModelInfo& info) {
  remember_model(opening_default_model_ ? QString() : info.path);
  remember_backend(options_.backend);
  remember_kv_budget(options_.kv_budget_bytes);
}

void MainWindow::showWelcome() {
  auto* dock = findChild<QDockWidget*>(QStringLiteral("dock_welcome"));
  dock->show();
  dock->raise();
}

void MainWindow::fitWelcome() {
  // A strip as tall as its text: the panels below keep the room.
  auto* dock = findChild<QDockWidget*>(QStringLiteral("dock_welcome"));
  const int width = welcome_->width() > 0 ? welcome_->width() : this->width();
  const int content = welcome_->hasHeightForWidth() ? welcome_->heightForWidth(width)
                                                    : welcome_->sizeHint().height();
  const int title = dock->height() - welcome_->height();
  resizeDocks({dock}, {content + std::max(title, 0)}, Qt::Vertical);
  keepTimelineReadable();
}

void MainWindow::keepTimelineReadable() {
  // A taller strip takes its room from the bottom docks; the timeline keeps enough for its
  // three lanes (requests, encodes, prefill + decode) and their axis, in text lines.
  // Both docks of the bottom column are named, so the room comes from the centre, not from
  // the equivalence strip above (which is at its own minimum).
  auto* timeline = findChild<QDockWidget*>(QStringLiteral("dock_timeline"));
  auto* equivalence = findChild<QDockWidget*>(QStringLiteral("dock_equivalence"));
  if (!timeline || !equivalence || !timeline->isVisible() || timeline->isFloating()) return;
  const int wanted = fontMetrics().height() * 12;
  if (timeline->height() < wanted && height() >= fontMetrics().height() * 50)
    resizeDocks({equivalence, timeline}, {equivalence->height(), wanted}, Qt::Vertical);
}

void MainWindow::updateWelcome() { welcome_->setBusy(!model_loaded_ || busy_ || run_in_flight_); }

void MainWindow::askSampleQuestion() {
  if (!prepareDemoPrompt()) {
    showError(tr("Cannot ask a sample question"),
              tr("The corpus has no sample questions, or BM25 found no passage for the first one. "
                 "Use File ▸ Open Sample Corpus."));
    return;
  }
  // A cold run: every policy starts from an empty pool of its own.
  QMetaObject::invokeMethod(worker_, &EngineWorker::clearCache, Qt::QueuedConnection);
  if (startRun()) welcome_step_ = WelcomeStep::Ask;
}

void MainWindow::reorderAndRerun() {
  if (corpus_->selectedModel()->rowCount() < 2) {
    showError(tr("Cannot reorder"), tr("Put at least two documents into the prompt first."));
    return;
  }
  corpus_->selectedModel()->reverse();
  if (startRun()) welcome_step_ = WelcomeStep::Reorder;
}

void MainWindow::showShortcuts() {
  QMessageBox::information(this, tr("Keyboard shortcuts"), shortcut_table_html(menuBar()));
}

void MainWindow::restoreSettings() {
  QSettings settings = user_settings();
  if (settings.contains(QStringLiteral("window/geometry")))
    restoreGeometry(settings.value(QStringLiteral("window/geometry")).toByteArray());
  if (settings.contains(QStringLiteral("window/state")))
    restoreState(settings.value(QStringLiteral("window/state")).toByteArray());
  if (settings.contains(QStringLiteral("run/system")))
    prompt_->setSystemText(settings.value(QStringLiteral("run/system")).toString());
  if (settings.contains(QStringLiteral("run/max_tokens")))
    prompt_->setMaxTokens(settings.value(QStringLiteral("run/max_tokens")).toInt());
  if (settings.contains(QStringLiteral("run/chat")))
    applyChatSetting(settings.value(QStringLiteral("run/chat")).toString());
}

void MainWindow::applyChatSetting(const QString& text) {
  try {
    prompt_->setChatMode(parse_chat_mode(text.toStdString()));
  } catch (const std::exception&) {
    prompt_->setChatMode(ChatMode::Auto);  // a hand-edited settings file: keep the default
  }
}

void MainWindow::saveSettings() {
  QSettings settings = user_settings();
  settings.setValue(QStringLiteral("window/geometry"), saveGeometry());
  settings.setValue(QStringLiteral("window/state"), saveState());
  settings.setValue(QStringLiteral("run/system"), prompt_->systemText());
  settings.setValue(QStringLiteral("run/max_tokens"), prompt_->maxTokens());
  settings.setValue(QStringLiteral("run/chat"), QString::fromUtf8(to_string(prompt_->chatMode())));
}

void MainWindow::showQuickGuide() {
  QMessageBox::information(
      this, tr("Quick guide"),
      tr("<h3>Try the central experiment</h3><ol>"
         "<li><b>Corpus &amp; retrieval</b>: pick a sample question (or type one) and press Enter: "
         "BM25 ranks the passages. Press <i>Use top-k as prompt</i>.</li>"
         "<li><b>Prompt &amp; run</b>: keep <i>lazy</i> and <i>materialized</i> ticked and press "
         "<b>Run</b>. "
         "Both columns stream their answer; TTFT and tokens/s sit under each.</li>"
         "<li>Drag the documents into a new order (or <i>Reverse</i>) and run again.</li>"
         "<li><b>KV block map</b>: lazy serves every document from the blocks it already has "
         "(green rings, <i>reused</i>); materialized writes re-rotated copies (magenta rings, "
         "hatched cells, "
         "<i>copied</i>).</li>"
         "<li><b>Equivalence</b>: each cell is one generated step, coloured by the largest logit "
         "difference; "
         "hover for the top-5 tokens of both runs.</li>"
         "<li><b>Cache stats</b>: hit ratios and bytes copied over your run history.</li></ol>"));
}

void MainWindow::showAbout() {
  QMessageBox::about(
      this, tr("About LazyScope"),
      tr("<h3>LazyScope workbench</h3><p>A visual RAG workbench for LazyAttention: documents are "
         "cached once with keys at document-local positions, and the attention kernel rotates "
         "the query instead of copying keys, so one KV copy serves every position.</p>"
         "<p>Model: %1<br>Backend: %2 (%3)</p>")
          .arg(model_info_.name.isEmpty() ? tr("none") : model_info_.name.toHtmlEscaped(),
               model_info_.backend.toHtmlEscaped(), model_info_.device.toHtmlEscaped()));
}

}  // namespace lazyscope::workbench

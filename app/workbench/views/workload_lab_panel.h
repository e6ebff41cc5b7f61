#pragma once
// The Workload Lab: configure a seeded RAG serving workload, choose policies, run it through the
// serving engine (accounting model or a real backend) on a worker thread and watch, per policy,
// the hit ratio, the pool, the batch and queue, TTFT and throughput; then compare the policies.
#include <QHash>
#include <QThread>
#include <QWidget>
#include <map>
#include <memory>
#include <string>

#include "app/workbench/models/workload_requests_model.h"
#include "app/workbench/models/workload_results_model.h"
#include "app/workbench/workload_worker.h"
#include "profiler/workload_tables.h"

class QCheckBox;
class QComboBox;
class QCustomPlot;
class QCPGraph;
class QDoubleSpinBox;
class QLabel;
class QLineEdit;
class QProgressBar;
class QPushButton;
class QSpinBox;
class QTableView;
class QTabWidget;
class QTextBrowser;
class QTimer;

namespace lazyscope::workbench {

class PoolStripsView;
class WorkloadComparisonCharts;
class WorkloadLiveCharts;

class WorkloadLabPanel : public QWidget {
  Q_OBJECT
 public:
  explicit WorkloadLabPanel(QWidget* parent = nullptr);
  ~WorkloadLabPanel() override;

  // The form <-> a config. config() throws Error naming the field when the form is invalid.
  void setConfig(const WorkloadLabConfig& config);
  WorkloadLabConfig config() const;
  void applyPaperPreset();
  // The model a real-backend run opens when the form names none.
  void setDefaultModel(const QString& path);
  // The corpus a corpus workload reads (the one the workbench loaded); empty: the bundled sample.
  void setCorpus(const QString& path, int questions);

  // Draws a saved run from a session report (no engine run): the table, bars, sweep, hit ratio
  // over time, batch/queue, TTFT and throughput, and the request details.
  void showReport(const WorkloadReport& report, const QString& path);
  bool isReplay() const { return replay_; }
  // What a session report keeps of the last run (or replay).
  bool hasResults() const { return !results_.results().empty(); }
  std::map<std::string, std::string> reportMetadata() const;
  const WorkloadPrompts& prompts() const { return prompts_; }

  // The requests of the run selected in the results table; a click shows one in the details pane.
  QTableView* requestsTable() { return requests_table_; }
  WorkloadRequestsModel* requestsModel() { return &request_rows_; }
  void selectRun(int row);
  void selectRequest(int row);
  QString requestDetailsHtml() const;

  // Starts a run from the form; false (message in statusText()) if the form is invalid or busy.
  bool startRun();
  void stopRun();
  bool isRunning() const { return running_; }
  // The last run ended (stopped or failed) before its workload was ready, so the results shown
  // are the ones from before it.
  bool keptPreviousResults() const { return kept_previous_; }
  QString lastError() const { return error_; }  // what stopped the last run before it began
  QString statusText() const;
  WorkloadWorker* worker() { return worker_; }  // tests watch its reports

  WorkloadResultsModel* resultsModel() { return &results_; }
  QTableView* resultsTable() { return table_; }
  QCustomPlot* hitRatioPlot() { return hit_plot_; }
  WorkloadLiveCharts* liveCharts() { return live_charts_; }
  WorkloadComparisonCharts* comparisonCharts() { return comparison_; }
  PoolStripsView* poolStrips() { return pools_; }
  QTabWidget* tabs() { return tabs_; }
  // Live hit ratio (tokens, %) of the last point of each run's curve, by "policy@budget".
  double liveHitRatio(const QString& policy, qint64 budget) const;
  // Requests streamed so far over all runs (tests).
  qint64 streamedRequests() const { return streamed_requests_; }

 Q_SIGNALS:
  // A run was started from the form (`title` names it); progress until runFinished.
  void runBegan(const QString& title);
  void progressChanged(double fraction, const QString& what);
  void runFinished(bool cancelled);

 private:
  struct Live {
    QString policy;
    qint64 budget = 0;
    int num_blocks = 0;
    QCPGraph* hit = nullptr;
    qint64 cached_tokens = 0, tokens = 0;
  };
  void buildForm(QWidget* form);
  void onRunStarted(const WorkloadRunKey& key, int num_blocks);
  void onRequests(const WorkloadRunKey& key, const QVector<RequestRecord>& records);
  void onRunFinished(const WorkloadRunKey& key, const ServingResult& result);
  void onFinished(bool cancelled);
  void setStatus(const QString& text);
  void replotVisible();
  void resetPlots();
  void clearResults();
  void updateBackendFields();
  void updateSourceFields();
  void onRunSelected(int row);
  void onRequestSelected(int row);
  void fillRequestsIfShown();

  QThread thread_;
  WorkloadWorker* worker_ = nullptr;
  WorkloadResultsModel results_;
  QHash<int, Live> live_;
  std::shared_ptr<const Workload> workload_;
  qint64 bytes_per_block_ = 0;
  QString default_model_, preset_;
  QString corpus_ = QStringLiteral("sample");
  int corpus_questions_ = 0;
  WorkloadPrompts prompts_;
  WorkloadLabConfig last_config_;     // the config of the results shown
  WorkloadLabConfig pending_config_;  // the run started, until its workload is ready
  bool workload_ready_ = false;       // the run started has begun serving
  bool stop_requested_ = false;
  bool kept_previous_ = false;
  std::map<std::string, std::string> replay_metadata_;
  bool replay_ = false;
  int selected_run_ = -1;
  bool requests_stale_ = false;  // the selected run's requests are not in the list yet
  QString details_html_;  // what the details pane shows, as written
  WorkloadRequestsModel request_rows_;
  QString error_;  // what stopped the last run before it began, if anything
  bool running_ = false;
  bool dirty_ = false;
  qint64 streamed_requests_ = 0;

  QComboBox* backend_ = nullptr;
  QComboBox* shape_ = nullptr;
  QComboBox* source_ = nullptr;
  QSpinBox* top_k_ = nullptr;
  QLabel* corpus_label_ = nullptr;
  QLineEdit* model_ = nullptr;
  QSpinBox* documents_ = nullptr;
  QSpinBox* doc_tokens_ = nullptr;
  QSpinBox* docs_per_request_ = nullptr;
  QComboBox* layout_ = nullptr;
  QDoubleSpinBox* zipf_ = nullptr;
  QComboBox* order_ = nullptr;
  QSpinBox* requests_ = nullptr;
  QComboBox* arrivals_ = nullptr;
  QSpinBox* concurrency_ = nullptr;
  QDoubleSpinBox* rate_ = nullptr;
  QSpinBox* query_tokens_ = nullptr;
  QSpinBox* output_tokens_ = nullptr;
  QSpinBox* prefix_tokens_ = nullptr;
  QSpinBox* seed_ = nullptr;
  QLineEdit* budget_ = nullptr;
  QLineEdit* sweep_ = nullptr;
  QSpinBox* block_size_ = nullptr;
  QHash<QString, QCheckBox*> policy_boxes_;
  QPushButton* run_button_ = nullptr;
  QPushButton* stop_button_ = nullptr;
  QProgressBar* progress_ = nullptr;
  QLabel* status_ = nullptr;
  QTabWidget* tabs_ = nullptr;
  QCustomPlot* hit_plot_ = nullptr;
  QTableView* table_ = nullptr;
  QTableView* requests_table_ = nullptr;
  QTextBrowser* details_ = nullptr;
  WorkloadLiveCharts* live_charts_ = nullptr;
  WorkloadComparisonCharts* comparison_ = nullptr;
  PoolStripsView* pools_ = nullptr;
  QTimer* replot_timer_ = nullptr;
};

}  // namespace lazyscope::workbench

#pragma once
// Evaluation: run the sample's (or the open corpus's) questions under several modes and
// policies, a bar chart of exact match / containment / F1 per configuration, the lazy vs
// materialized identity verdict, the block-vs-full warning, and a table of the questions where
// the configurations disagree; clicking a row loads that question and its passages.
#include <QList>
#include <QThread>
#include <QWidget>
#include <functional>
#include <vector>

#include "app/workbench/models/document_list_model.h"
#include "app/workbench/models/evaluation_model.h"

class QCheckBox;
class QComboBox;
class QCustomPlot;
class QLabel;
class QProgressBar;
class QPushButton;
class QSpinBox;
class QTableView;
class QTextBrowser;

namespace lazyscope::workbench {

class EvaluationWorker;

class EvaluationPanel : public QWidget {
  Q_OBJECT
 public:
  explicit EvaluationPanel(QWidget* parent = nullptr);
  ~EvaluationPanel() override;

  // The model the evaluation loads (its own sessions, one per configuration, each with a KV pool
  // of kv_budget_bytes). Plain values: this header stays free of engine backend headers, so the
  // panel's source can include qcustomplot.h (which needs Qt's lower-case keywords).
  void setModel(const QString& name, const QString& path, const QString& backend,
                qint64 kv_budget_bytes);
  // The open corpus (empty path: the bundled sample) and how many questions it holds.
  void setCorpus(const QString& path, int question_count);
  // Where the system text and the chat setting come from (the prompt panel's), read when Run is
  // pressed, so the evaluation runs the prompt the Run button would.
  void setPromptSource(std::function<QString()> system_text, std::function<ChatMode()> chat) {
    system_text_ = std::move(system_text);
    chat_mode_ = std::move(chat);
  }

  EvaluationModel* model() { return &model_; }
  QCustomPlot* chart() { return chart_; }
  int chartBarCount() const;  // one bar series per configuration
  QTableView* table() { return table_; }
  QString summaryText() const;
  QString noteText() const;
  bool running() const { return running_; }
  void setLimit(int limit);
  void setConfigChecked(const QString& key, bool checked);

 public Q_SLOTS:
  bool start();
  void stop();
  // Shows the results of `lazyscope-cli eval --json FILE`; false (with the reason in the status
  // line) when the file is not one.
  bool openResults(const QString& path);

 Q_SIGNALS:
  // A row of the table was clicked: the question and the passages it ran with.
  void questionActivated(const QString& question,
                         const std::vector<lazyscope::workbench::DocumentEntry>& passages);
  void evaluationFinished(bool cancelled);
  // For the window's status bar: a run began, and how far it is (fraction of the questions).
  void evaluationStarted();
  void progressChanged(double fraction, const QString& what);

 private:
  void onStarted(const std::vector<corpora::EvalConfig>& configs, int total, const QString& model);
  void onQuestion(const corpora::QuestionResult& result, int done, int total, double remaining_s);
  void onFinished(bool cancelled, double wall_seconds, const QList<double>& config_seconds);
  void onFailed(const QString& message);
  void activateRow(const QModelIndex& index);
  void replot();
  void setRunning(bool running);

  EvaluationModel model_;
  QThread thread_;
  EvaluationWorker* worker_ = nullptr;
  std::function<QString()> system_text_;
  std::function<ChatMode()> chat_mode_;
  QString model_name_, model_path_, backend_;
  qint64 kv_budget_bytes_ = 0;
  bool model_ready_ = false;
  bool running_ = false;
  QString corpus_path_;
  int corpus_questions_ = 0;

  QComboBox* source_ = nullptr;
  QSpinBox* limit_ = nullptr;
  QComboBox* retrieval_ = nullptr;
  QSpinBox* k_ = nullptr;
  QSpinBox* max_tokens_ = nullptr;
  std::vector<QCheckBox*> config_boxes_;
  QPushButton* run_ = nullptr;
  QPushButton* stop_ = nullptr;
  QPushButton* open_ = nullptr;
  QProgressBar* progress_ = nullptr;
  QLabel* status_ = nullptr;
  QCustomPlot* chart_ = nullptr;
  QTextBrowser* summary_ = nullptr;
  QLabel* note_ = nullptr;
  QCheckBox* disagreements_only_ = nullptr;
  QTableView* table_ = nullptr;
};

}  // namespace lazyscope::workbench

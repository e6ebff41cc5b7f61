#pragma once
// Runs an evaluation (corpora::EvaluationRunner) on its own thread with its own session (one KV
// pool and history per policy), and reports each finished question as a queued signal.
#include <QList>
#include <QObject>
#include <QString>
#include <atomic>
#include <vector>

#include "corpora/evaluation_run.h"

namespace lazyscope::workbench {

struct EvaluationPlan {
  QString model_path;
  QString backend;                // "auto", "cpu", "cuda"
  qint64 kv_budget_bytes = 0;     // per configuration; <= 0: 256 MiB
  QString corpus_path;            // empty: the bundled sample
  bool corpus_questions = false;  // the store's own questions instead of the sample's
  int limit = 0;                  // first N questions; 0: all
  std::vector<corpora::EvalConfig> configs;
  corpora::EvalOptions options;
};

class EvaluationWorker : public QObject {
  Q_OBJECT
 public:
  explicit EvaluationWorker(QObject* parent = nullptr) : QObject(parent) {}
  // Thread-safe: stop after the current request, keeping the finished questions.
  void requestStop() { cancel_.store(true); }
  void clearStop() { cancel_.store(false); }

 public Q_SLOTS:
  void run(const lazyscope::workbench::EvaluationPlan& plan);

 Q_SIGNALS:
  void status(const QString& text);
  void started(const std::vector<lazyscope::corpora::EvalConfig>& configs, int total,
               const QString& model);
  void questionFinished(const lazyscope::corpora::QuestionResult& result, int done, int total,
                        double remaining_s);
  // config_seconds: EvalReport::config_seconds, one per configuration.
  void finished(bool cancelled, double wall_seconds, const QList<double>& config_seconds);
  void failed(const QString& message);

 private:
  std::atomic<bool> cancel_{false};
};

void register_evaluation_metatypes();

}  // namespace lazyscope::workbench

Q_DECLARE_METATYPE(lazyscope::workbench::EvaluationPlan)
Q_DECLARE_METATYPE(lazyscope::corpora::QuestionResult)
Q_DECLARE_METATYPE(std::vector<lazyscope::corpora::EvalConfig>)

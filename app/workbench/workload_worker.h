#pragma once
// The Workload Lab's engine thread: a QObject that runs lazyscope's serving engine (the same
// ServingEngine, workload generator and result structs as `lazyscope-cli workload`) and streams
// scheduler steps and finished requests to the GUI in batches, at most ~30 per second.
#include <QObject>
#include <QString>
#include <QStringList>
#include <QVector>
#include <atomic>
#include <memory>

#include "base/progress.h"
#include "engine/serving/serving_result.h"
#include "engine/workload/workload.h"

namespace lazyscope::workbench {

struct WorkloadLabConfig {
  QString backend = QStringLiteral("accounting");  // accounting, cpu (or cuda)
  QString shape = QStringLiteral("llama-3.2-1b");  // accounting: the model shape
  QString model;                                   // real backends: a checkpoint or .gguf
  QString preset;                                  // "paper" or empty, for the report only
  WorkloadOptions workload;
  // Documents from a corpus instead of synthetic tokens: "sample" or a store path (empty:
  // synthetic). trace "questions": each question with its BM25 top_k passages; "zipf": the
  // passages drawn by the workload's layout. Tokenized by the model's tokenizer (the default
  // model's for the accounting backend).
  QString corpus;
  QString trace = QStringLiteral("questions");
  int top_k = 4;
  int questions = 0;  // the first N questions (0: all)
  QVector<qint64> budgets{1ll << 30};              // bytes per policy pool; 0 = unlimited
  QStringList policies{QStringLiteral("none"), QStringLiteral("prefix"), QStringLiteral("positional"),
                       QStringLiteral("materialized"), QStringLiteral("lazy")};
  int block_size = 16;
  int step_tokens = 2048;
  int max_running = 256;
  int cpu_threads = 0;
};

// The paper's serving setup (`lazyscope-cli workload --preset paper`).
WorkloadLabConfig paper_preset();
// A run small enough for the CPU backend on the default model: 12 documents x 64 tokens, 2 per
// request, 10 requests, concurrency 3, 4 output tokens, none / materialized / lazy at 24 MiB.
WorkloadLabConfig small_cpu_preset();

// The small CPU run on the loaded corpus's questions: the first 8 questions, each with its BM25
// top-2 passages, concurrency 3, 4 output tokens, none / materialized / lazy at 64 MiB.
WorkloadLabConfig corpus_trace_cpu_preset(const QString& corpus);

// The workload a config describes, as the worker builds it (tests compare it with the CLI's).
// `vocab_size`: the model's; corpus workloads fail when their tokenizer needs more.
Workload make_lab_workload(const WorkloadLabConfig& config, int vocab_size, const ProgressFn& progress = {});

// One block of a pool map.
enum class PoolCell : quint8 { Free, Prefix, DocumentCached, DocumentHeld, Copy, Query, Evicted };

// A run's pool as the scheduler left it after a step: one cell per block, and the blocks evicted
// so far (a block evicted since the previous map and not reused shows as Evicted).
struct PoolMapSnapshot {
  QVector<quint8> cells;
  qint64 evictions = 0;
  double t_s = 0;
};

// Identifies one (budget, policy) run of a lab run.
struct WorkloadRunKey {
  int run = 0;  // index in budgets x policies order
  QString policy;
  qint64 budget = 0;
};

class WorkloadWorker : public QObject {
  Q_OBJECT
 public:
  explicit WorkloadWorker(QObject* parent = nullptr) : QObject(parent) {}
  // Thread-safe: a model load or workload preparation stops at its next progress report (no
  // workloadReady follows), a (budget, policy) run at its next step; the rest are skipped.
  void requestStop() { cancel_.store(true); }
  void clearStop() { cancel_.store(false); }

 public Q_SLOTS:
  void run(const lazyscope::workbench::WorkloadLabConfig& config);

 Q_SIGNALS:
  void progress(double fraction, const QString& what);
  // The workload every run serves (shared, read-only), before the first run starts.
  void workloadReady(std::shared_ptr<const lazyscope::Workload> workload, qint64 bytes_per_block);
  void runStarted(const lazyscope::workbench::WorkloadRunKey& key, int num_blocks);
  void stepsStreamed(const lazyscope::workbench::WorkloadRunKey& key,
                     const QVector<lazyscope::StepSample>& steps);
  void requestsStreamed(const lazyscope::workbench::WorkloadRunKey& key,
                        const QVector<lazyscope::RequestRecord>& requests);
  void poolStreamed(const lazyscope::workbench::WorkloadRunKey& key,
                    const lazyscope::workbench::PoolMapSnapshot& pool);
  void runFinished(const lazyscope::workbench::WorkloadRunKey& key, const lazyscope::ServingResult& result);
  // A (budget, policy) the budget cannot serve; the other runs go on.
  void runFailed(const lazyscope::workbench::WorkloadRunKey& key, const QString& message);
  // A problem before any run (bad options, model not loadable).
  void failed(const QString& message);
  void finished(bool cancelled);

 private:
  std::atomic<bool> cancel_{false};
};

void register_workload_metatypes();

}  // namespace lazyscope::workbench

Q_DECLARE_METATYPE(lazyscope::workbench::WorkloadLabConfig)
Q_DECLARE_METATYPE(lazyscope::workbench::WorkloadRunKey)
Q_DECLARE_METATYPE(lazyscope::workbench::PoolMapSnapshot)
Q_DECLARE_METATYPE(lazyscope::StepSample)
Q_DECLARE_METATYPE(lazyscope::RequestRecord)
Q_DECLARE_METATYPE(lazyscope::ServingResult)
Q_DECLARE_METATYPE(std::shared_ptr<const lazyscope::Workload>)

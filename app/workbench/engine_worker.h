#pragma once
// The engine's home in the GUI: a QObject that lives on its own QThread, owns the Session and
// turns engine events into queued Qt signals. The GUI only talks to it through queued calls.
#include <QObject>
#include <QString>
#include <atomic>
#include <memory>
#include <mutex>

#include "app/workbench/workbench_types.h"
#include "engine/events/event_fanout.h"
#include "engine/runtime/session.h"
#include "profiler/session_recorder.h"

namespace lazyscope::workbench {

class QtEventSink;

class EngineWorker : public QObject {
  Q_OBJECT
 public:
  explicit EngineWorker(QObject* parent = nullptr);
  ~EngineWorker() override;

  // Thread-safe: asks a running (or queued) plan to stop after the current token.
  void requestStop() { cancel_.store(true); }
  // Called by the GUI before it queues a plan, so a Stop pressed before the worker starts counts.
  void clearStop() { cancel_.store(false); }
  // Thread-safe: a model load in progress (or queued) stops at its next progress report; the
  // session open before it stays. The GUI clears the flag before it queues a load.
  void requestLoadCancel() { load_cancel_.store(true); }
  void clearLoadCancel() { load_cancel_.store(false); }
  // Thread-safe: a copy of what the current session has recorded so far (empty before a model
  // is open). Cheap enough to call on the GUI thread after each request.
  SessionRecording recordingSnapshot() const;
  // Thread-safe: puts lazy-overhead probe rows into the current session's report.
  void addOverhead(const std::vector<OverheadProbeRow>& rows);
  // Ask sessions opened from now on for a CUPTI device trace (SessionOptions::trace_device).
  void setTraceDevice(bool on) { trace_device_ = on; }
  // CPU sessions opened from now on use the exact fp32 reference instead of the fast kernels.
  void setCpuExact(bool on) { cpu_exact_ = on; }

 public Q_SLOTS:
  // Loads the model and builds a fresh Session; on failure the previous session stays usable.
  // Every policy gets its own pool of kv_budget_bytes; <= 0 sizes each pool automatically
  // (kAutoKvBlocksPerPolicy blocks).
  void openModel(const QString& path, const QString& backend, qint64 kv_budget_bytes);
  // The installed default model, else the tiny model (written to the user cache on first use).
  void openDefaultModel(const QString& backend, qint64 kv_budget_bytes);
  // Prepares the request once and runs every policy column of the plan on it, one after the
  // other, each policy on its own KV pool.
  void runPlan(const lazyscope::workbench::RunPlan& plan);
  void clearCache();
  // Emits snapshotReady for the pool of `policy` ("lazy", "materialized", ...).
  void emitSnapshot(const QString& policy);

 Q_SIGNALS:
  void progress(double fraction, const QString& what);
  void modelOpened(const lazyscope::workbench::ModelInfo& info);
  // Once per openModel/openDefaultModel call, after modelOpened or failed (or neither, when
  // the load was cancelled).
  void loadEnded(bool cancelled);
  void failed(const QString& what, const QString& message);
  void busyChanged(bool busy);
  void runStarted(int run_index, const QString& key);
  void tokenProduced(const QString& key, int step, const QString& text, double ms_since_submit);
  void runFinished(const lazyscope::workbench::RunSummary& summary);
  void planFinished(int run_index, bool cancelled);
  void equivalenceReady(const lazyscope::workbench::EquivalenceReport& report);
  void segmentEvent(const lazyscope::SegmentEvent& event);
  void blockEvent(const lazyscope::BlockEvent& event);
  void requestFinished(const lazyscope::RequestFinishedEvent& event);
  void poolEvent(const lazyscope::PoolEvent& event);
  void snapshotReady(const lazyscope::PoolSnapshot& snapshot);

 private:
  // Builds and installs the session; false when the load was cancelled (the old one stays).
  bool load(const QString& path, const QString& backend, qint64 kv_budget_bytes);

  // The session reports to fanout_, which forwards to the GUI adapter and the recorder; all
  // three are declared before session_ so they outlive it.
  std::unique_ptr<QtEventSink> sink_;
  std::shared_ptr<SessionRecorder> recorder_;  // replaced with each opened model
  std::unique_ptr<EventFanout> fanout_;
  mutable std::mutex recorder_mutex_;  // guards the recorder_ pointer (the GUI reads it)
  std::unique_ptr<Session> session_;
  std::atomic<bool> cancel_{false};
  std::atomic<bool> load_cancel_{false};
  std::atomic<bool> trace_device_{false};
  std::atomic<bool> cpu_exact_{false};
};

// Registers the value types above for queued connections; call once before connecting.
void register_workbench_metatypes();

}  // namespace lazyscope::workbench

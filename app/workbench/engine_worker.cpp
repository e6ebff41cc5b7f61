#include "app/workbench/engine_worker.h"

#include <exception>
#include <map>
#include <string>

#include "app/workbench/command_line.h"
#include "app/workbench/models/equivalence_model.h"
#include "engine/model/config.h"
#include "engine/model/model_loader.h"
#include "engine/runtime/default_model.h"
#include "engine/tokenizer/tokenizer.h"
#include "base/error.h"
#include "base/progress.h"

namespace lazyscope::workbench {

// Forwards engine callbacks (worker thread) as signals; receivers on the GUI thread get them
// queued.
class QtEventSink : public EventSink {
 public:
  explicit QtEventSink(EngineWorker* worker) : worker_(worker) {}
  void on_segment(const SegmentEvent& e) override { Q_EMIT worker_->segmentEvent(e); }
  void on_block(const BlockEvent& e) override { Q_EMIT worker_->blockEvent(e); }
  void on_request_finished(const RequestFinishedEvent& e) override {
    Q_EMIT worker_->requestFinished(e);
  }
  void on_pool(const PoolEvent& e) override { Q_EMIT worker_->poolEvent(e); }

 private:
  EngineWorker* worker_;
};

void register_workbench_metatypes() {
  qRegisterMetaType<SegmentEvent>();
  qRegisterMetaType<BlockEvent>();
  qRegisterMetaType<TokenEvent>();
  qRegisterMetaType<RequestFinishedEvent>();
  qRegisterMetaType<PoolEvent>();
  qRegisterMetaType<PoolSnapshot>();
  qRegisterMetaType<RunPlan>();
  qRegisterMetaType<RunSummary>();
  qRegisterMetaType<ModelInfo>();
  qRegisterMetaType<EquivalenceReport>();
}

EngineWorker::EngineWorker(QObject* parent)
    : QObject(parent), sink_(std::make_unique<QtEventSink>(this)) {}

EngineWorker::~EngineWorker() {
  session_.reset();  // before the sinks it reports to
}

void EngineWorker::addOverhead(const std::vector<OverheadProbeRow>& rows) {
  std::lock_guard<std::mutex> lock(recorder_mutex_);
  if (recorder_) recorder_->add_overhead(rows);
}

SessionRecording EngineWorker::recordingSnapshot() const {
  std::shared_ptr<SessionRecorder> recorder;
  {
    std::lock_guard<std::mutex> lock(recorder_mutex_);
    recorder = recorder_;
  }
  return recorder ? recorder->snapshot() : SessionRecording{};
}

void EngineWorker::openModel(const QString& path, const QString& backend, qint64 kv_budget_bytes) {
  Q_EMIT busyChanged(true);
  const bool cancelled = !load(path, backend, kv_budget_bytes);
  Q_EMIT busyChanged(false);
  Q_EMIT loadEnded(cancelled);
}

bool EngineWorker::load(const QString& path, const QString& backend, qint64 kv_budget_bytes) {
  try {
    SessionOptions options;
    options.model = std::filesystem::path(path.toStdString());
    options.backend = parse_backend_kind(backend.toStdString());
    // One pool per policy the prompt panel offers, each of the full budget (fair comparisons).
    options.policies = all_policies();
    if (kv_budget_bytes <= 0)
      options.kv_budget_blocks = kAutoKvBlocksPerPolicy;
    else
      options.kv_budget_bytes = std::size_t(kv_budget_bytes);
    options.trace_device = trace_device_;
    options.cpu_precision = cpu_exact_ ? CpuPrecision::Exact : CpuPrecision::Fast;
    // Cancel throws Cancelled from the next report: the new session is never installed.
    auto progress = cancellable(
        [this](double fraction, std::string_view what) {
          Q_EMIT this->progress(fraction, QString::fromUtf8(what.data(), qsizetype(what.size())));
        },
        &load_cancel_);
    // A fresh recorder per session: the recorder first, so it has the request before the GUI
    // hears that it finished.
    auto recorder = std::make_shared<SessionRecorder>();
    auto fanout = std::make_unique<EventFanout>();
    fanout->add(recorder.get());
    fanout->add(sink_.get());
    auto session = std::make_unique<Session>(options, fanout.get(), progress);
    if (load_cancel_.load()) return false;  // pressed after the last report: still cancelled
    session_.reset();  // the old session reports to the old fanout: drop it first
    fanout_ = std::move(fanout);
    {
      std::lock_guard<std::mutex> lock(recorder_mutex_);
      recorder_ = recorder;
    }
    session_ = std::move(session);
    const PoolSnapshot snapshot = session_->snapshot(Policy::Lazy);
    kv_budget_bytes = qint64(snapshot.bytes_per_block) * qint64(snapshot.blocks.size());
    ModelInfo info;
    info.name = QString::fromStdString(session_->config().name);
    info.path = path;
    info.backend = QString::fromStdString(session_->backend_name());
    info.device = QString::fromStdString(session_->device());
    info.block_size = snapshot.block_size;
    info.pool_blocks = int(snapshot.blocks.size());
    info.policy_pools = int(session_->policies().size());
    info.bytes_per_block = qint64(snapshot.bytes_per_block);
    info.kv_budget_bytes = kv_budget_bytes;
    info.num_heads = session_->config().shape.num_heads;
    info.num_kv_heads = session_->config().shape.num_kv_heads;
    info.head_dim = session_->config().shape.head_dim;
    recorder->set_metadata("model", session_->config().name);
    recorder->set_metadata("model_path", path.toStdString());
    recorder->set_metadata("backend", session_->backend_name());
    recorder->set_metadata("device", session_->device());
    recorder->set_metadata("kv_budget_bytes", std::to_string(kv_budget_bytes));
    recorder->set_metadata("block_size", std::to_string(snapshot.block_size));
    recorder->set_metadata("pool_blocks", std::to_string(snapshot.blocks.size()));
    recorder->set_metadata("policy_pools", std::to_string(session_->policies().size()));
    recorder->set_metadata("tool", "lazyscope workbench");
    if (options.trace_device) {
      const std::string& why = session_->device_trace_note();
      recorder->set_metadata("device_trace", why.empty() ? "cupti" : "off: " + why);
      info.trace_note = QString::fromStdString(why);
    }
    Q_EMIT modelOpened(info);
    for (Policy policy : session_->policies()) Q_EMIT snapshotReady(session_->snapshot(policy));
  } catch (const Cancelled&) {
    return false;
  } catch (const std::exception& e) {
    Q_EMIT failed(QStringLiteral("Could not open the model %1").arg(path),
                  QString::fromUtf8(e.what()));
  }
  return true;
}

void EngineWorker::openDefaultModel(const QString& backend, qint64 kv_budget_bytes) {
  ResolvedModel resolved;
  Q_EMIT busyChanged(true);
  bool cancelled = false;
  try {
    // The installed default, else the generated tiny model (made on first use, as the CLI does).
    resolved = resolve_model("default", cancellable(
                                            [this](double fraction, std::string_view what) {
                                              Q_EMIT progress(fraction, QStringLiteral("Making the tiny model: ") +
                                                                            QString::fromUtf8(what.data(), qsizetype(what.size())));
                                            },
                                            &load_cancel_));
    cancelled = !load(QString::fromStdString(resolved.path.string()), backend, kv_budget_bytes);
  } catch (const Cancelled&) {
    cancelled = true;  // the half-made model was removed; the next start makes it again
  } catch (const std::exception& e) {
    Q_EMIT failed(QStringLiteral("Could not find or make the default model"), QString::fromUtf8(e.what()));
  }
  Q_EMIT busyChanged(false);
  Q_EMIT loadEnded(cancelled);
}

void EngineWorker::runPlan(const RunPlan& plan) {
  if (!session_) {
    Q_EMIT failed(QStringLiteral("Cannot run"),
                  QStringLiteral("No model is loaded. Use File ▸ Open Model…"));
    Q_EMIT planFinished(plan.run_index, false);
    return;
  }
  Q_EMIT busyChanged(true);
  // One preparation for every column: each policy runs exactly the same prompt.
  PreparedRequest prepared;
  try {
    prepared = session_->prepare(plan.request, plan.preparation);
  } catch (const std::exception& e) {
    Q_EMIT failed(QStringLiteral("Cannot run this request"), QString::fromUtf8(e.what()));
    Q_EMIT planFinished(plan.run_index, true);
    Q_EMIT busyChanged(false);
    return;
  }
  const std::vector<int32_t> ids = prompt_ids(prepared.layout);
  std::map<QString, RunResult> kept;  // lazy and materialized results, for the equivalence view
  bool cancelled = false;
  for (const PolicyChoice& choice : plan.policies) {
    if (cancel_.load()) {
      cancelled = true;
      break;
    }
    Q_EMIT runStarted(plan.run_index, choice.key);
    RunSummary summary;
    summary.run_index = plan.run_index;
    summary.key = choice.key;
    summary.prompt_ids = ids;
    summary.chat_template_applied = prepared.chat_template_applied;
    try {
      RunOptions options;
      options.mode = choice.mode;
      options.policy = choice.policy;
      options.max_new_tokens = plan.request.max_new_tokens;
      options.keep_logits = choice.key == "lazy" || choice.key == "materialized";
      options.cancel = &cancel_;
      const QString key = choice.key;
      auto on_token = [this, key](const TokenEvent& e) {
        Q_EMIT tokenProduced(key, e.step, QString::fromStdString(e.text), e.ms_since_submit);
      };
      RunResult result = session_->submit(prepared, options, on_token);
      summary.prompt_tokens = result.prompt_tokens;
      summary.generated_tokens = int(result.generated_ids.size());
      summary.generated_text = QString::fromStdString(result.generated_text);
      summary.ttft_ms = result.ttft_ms;
      summary.decode_ms_per_token = result.decode_ms_per_token;
      summary.stats = result.stats;
      summary.cancelled = result.cancelled;
      cancelled = cancelled || result.cancelled;
      if (options.keep_logits) kept[choice.key] = std::move(result);
    } catch (const std::exception& e) {
      Q_EMIT failed(QStringLiteral("The %1 run failed").arg(choice.key),
                    QString::fromUtf8(e.what()));
      summary.cancelled = true;
      Q_EMIT runFinished(summary);
      Q_EMIT snapshotReady(session_->snapshot(choice.policy));
      cancelled = true;
      break;
    }
    Q_EMIT runFinished(summary);
    Q_EMIT snapshotReady(session_->snapshot(choice.policy));
  }
  if (kept.count("lazy") && kept.count("materialized")) {
    const Tokenizer& tokenizer = session_->tokenizer();
    EquivalenceReport report = compare_runs(kept["lazy"], kept["materialized"], [&](int32_t id) {
      return QString::fromStdString(tokenizer.token_text(id));
    });
    report.key_a = "lazy";
    report.key_b = "materialized";
    Q_EMIT equivalenceReady(report);
  }
  Q_EMIT planFinished(plan.run_index, cancelled);
  Q_EMIT busyChanged(false);
}

void EngineWorker::clearCache() {
  if (!session_) return;
  session_->clear_cache();
  for (Policy policy : session_->policies()) Q_EMIT snapshotReady(session_->snapshot(policy));
}

void EngineWorker::emitSnapshot(const QString& policy) {
  if (!session_) return;
  try {
    Q_EMIT snapshotReady(session_->snapshot(parse_policy(policy.toStdString())));
  } catch (const std::exception& e) {
    Q_EMIT failed(QStringLiteral("Cannot show the KV pool of %1").arg(policy), QString::fromUtf8(e.what()));
  }
}

}  // namespace lazyscope::workbench

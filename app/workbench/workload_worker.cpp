#include "app/workbench/workload_worker.h"

#include <QElapsedTimer>
#include <exception>
#include <unordered_map>
#include <unordered_set>

#include "base/error.h"
#include "corpora/workload_trace.h"
#include "engine/events/events.h"
#include "engine/model/tokenizer_loader.h"
#include "engine/runtime/default_model.h"
#include "engine/serving/serving_engine.h"

namespace lazyscope::workbench {
namespace {

constexpr qint64 kFlushMs = 33;

// Buffers what the scheduler reports and hands it to the GUI thread in batches, with a map of
// the pool read from the run's cache at each flush.
class StreamingObserver final : public ServingObserver, public EventSink {
 public:
  StreamingObserver(WorkloadWorker* worker, WorkloadRunKey key, int requests, int run, int runs)
      : worker_(worker), key_(std::move(key)), requests_(requests), run_(run), runs_(runs) {
    clock_.start();
  }
  void on_step(const StepSample& s) override {
    steps_.push_back(s);
    last_t_ = s.t_s + s.duration_s;
    maybe_flush();
  }
  // The engine's event of the same name stays as EventSink has it (not hidden by this one).
  using EventSink::on_request_finished;
  void on_request_finished(const RequestRecord& r) override {
    records_.push_back(r);
    ++done_;
    maybe_flush();
  }
  void on_start(const KvCacheManager& cache) override { cache_ = &cache; }
  // The last batch and the pool as the run leaves it; the cache is not read after this.
  void on_end(const KvCacheManager&) override {
    flush();
    cache_ = nullptr;
  }
  EventSink* cache_events() override { return this; }
  // Called inside the cache: only note what happened.
  void on_block(const BlockEvent& e) override {
    if (e.action == BlockAction::Evicted) {
      ++evictions_;
      evicted_.insert(e.block);
    } else if (e.action == BlockAction::Allocated) {
      evicted_.erase(e.block);
    }
  }
  void flush() {
    if (!steps_.isEmpty()) Q_EMIT worker_->stepsStreamed(key_, steps_);
    if (!records_.isEmpty()) Q_EMIT worker_->requestsStreamed(key_, records_);
    steps_.clear();
    records_.clear();
    if (cache_) Q_EMIT worker_->poolStreamed(key_, pool_map());
    Q_EMIT worker_->progress((run_ + double(done_) / std::max(1, requests_)) / std::max(1, runs_),
                             QStringLiteral("%1: %2 of %3 requests").arg(key_.policy).arg(done_).arg(requests_));
    clock_.restart();
  }

 private:
  PoolMapSnapshot pool_map() {
    PoolMapSnapshot map;
    std::unordered_map<int64_t, SegmentKind> kinds;
    for (const CachedSegment& s : cache_->segments()) kinds.emplace(s.id, s.kind);
    const std::vector<BlockState> blocks = cache_->blocks();
    map.cells.resize(qsizetype(blocks.size()));
    for (std::size_t i = 0; i < blocks.size(); ++i) {
      const BlockState& b = blocks[i];
      PoolCell cell = PoolCell::Free;
      if (b.segment < 0) {
        if (evicted_.count(int32_t(i))) cell = PoolCell::Evicted;
      } else {
        const auto k = kinds.find(b.segment);
        const SegmentKind kind = k == kinds.end() ? SegmentKind::Document : k->second;
        switch (kind) {
          case SegmentKind::Prefix: cell = PoolCell::Prefix; break;
          case SegmentKind::Document: cell = b.refcount > 0 ? PoolCell::DocumentHeld : PoolCell::DocumentCached; break;
          // A copy held by its request; positional copies stay cached at their position after it.
          case SegmentKind::Copy: cell = b.refcount > 0 ? PoolCell::Copy : PoolCell::DocumentCached; break;
          case SegmentKind::Query: cell = PoolCell::Query; break;
        }
      }
      map.cells[qsizetype(i)] = quint8(cell);
    }
    map.evictions = evictions_;
    map.t_s = last_t_;
    evicted_.clear();
    return map;
  }
  void maybe_flush() {
    if (clock_.elapsed() >= kFlushMs) flush();
  }
  WorkloadWorker* worker_;
  WorkloadRunKey key_;
  int requests_, run_, runs_, done_ = 0;
  QVector<StepSample> steps_;
  QVector<RequestRecord> records_;
  QElapsedTimer clock_;
  const KvCacheManager* cache_ = nullptr;
  std::unordered_set<int32_t> evicted_;
  qint64 evictions_ = 0;
  double last_t_ = 0;
};

}  // namespace

WorkloadLabConfig paper_preset() {
  WorkloadLabConfig c;
  c.preset = QStringLiteral("paper");
  c.backend = QStringLiteral("accounting");
  c.shape = QStringLiteral("llama-3.2-1b");
  c.workload.documents = 100;
  c.workload.doc_tokens = 2048;
  c.workload.docs_per_request = 5;
  c.workload.zipf = 2.1;
  c.workload.requests = 200;
  c.workload.concurrency = 16;
  c.workload.rate = 0.0;
  c.workload.query_tokens = 16;
  c.workload.output_tokens = 8;
  c.budgets = {1ll << 30};
  return c;
}

WorkloadLabConfig small_cpu_preset() {
  WorkloadLabConfig c;
  c.preset = QStringLiteral("small-cpu");
  c.backend = QStringLiteral("cpu");
  c.workload.documents = 12;
  c.workload.doc_tokens = 64;
  c.workload.docs_per_request = 2;
  c.workload.zipf = 1.0;
  c.workload.requests = 10;
  c.workload.concurrency = 3;
  c.workload.query_tokens = 16;
  c.workload.output_tokens = 4;
  c.budgets = {24ll << 20};
  c.policies = {QStringLiteral("none"), QStringLiteral("materialized"), QStringLiteral("lazy")};
  return c;
}

WorkloadLabConfig corpus_trace_cpu_preset(const QString& corpus) {
  WorkloadLabConfig c = small_cpu_preset();
  c.preset = QStringLiteral("corpus-trace-cpu");
  c.corpus = corpus.isEmpty() ? QStringLiteral("sample") : corpus;
  c.trace = QStringLiteral("questions");
  c.top_k = 2;
  c.questions = 8;
  c.workload.requests = 8;
  c.workload.concurrency = 3;
  c.workload.output_tokens = 4;
  c.budgets = {64ll << 20};  // SmolLM2's fp32 KV: a materialized request holds about 40 blocks of 0.7 MiB
  return c;
}

Workload make_lab_workload(const WorkloadLabConfig& config, int vocab_size, const ProgressFn& progress) {
  WorkloadOptions options = config.workload;
  options.vocab_size = vocab_size;
  if (config.corpus.isEmpty()) return make_workload(options);
  corpora::CorpusWorkloadOptions co;
  co.trace = corpora::parse_trace_kind(config.trace.toStdString());
  co.top_k = config.top_k;
  co.questions = config.questions;
  co.source = config.corpus == QLatin1String("sample") ? "sample corpus" : config.corpus.toStdString();
  corpora::validate(co);
  // The model's own tokenizer; the accounting model (a shape) borrows the default model's.
  const bool own = config.backend != QLatin1String("accounting") && !config.model.isEmpty();
  const std::filesystem::path tokenizer_path =
      own ? std::filesystem::path(config.model.toStdString()) : resolve_model("", progress).path;
  const Tokenizer tokenizer = load_tokenizer_only(tokenizer_path);
  corpora::CorpusSource source = corpora::open_corpus_source(config.corpus.toStdString(), co.trace, {}, progress);
  Workload w = corpora::make_corpus_workload(source.store, source.questions, tokenizer, options, co);
  if (w.options.vocab_size > vocab_size) {
    throw Error("Corpus workload: the tokenizer of " + tokenizer_path.string() + " has " +
                std::to_string(w.options.vocab_size) + " token ids but the model's vocabulary has " +
                std::to_string(vocab_size) + "; choose a larger model shape");
  }
  return w;
}

void WorkloadWorker::run(const WorkloadLabConfig& config) {
  bool cancelled = false;
  try {
    std::string policy_list;
    for (const QString& p : config.policies) policy_list += (policy_list.empty() ? "" : ",") + p.toStdString();
    const std::vector<Policy> policies = parse_policy_list(policy_list);
    if (config.budgets.isEmpty()) throw Error("KV budget: no budget given");
    WorkloadOptions options = config.workload;
    validate(options);
    ServingConfig sc;
    sc.backend = config.backend.toStdString();
    if (config.backend == QLatin1String("accounting")) {
      sc.synthetic = config.shape.toStdString();
    } else if (config.model.isEmpty()) {
      sc.synthetic = config.shape.toStdString();
    } else {
      sc.model = config.model.toStdString();
    }
    sc.block_size = config.block_size;
    sc.cpu_threads = config.cpu_threads;
    // Stop while the model loads or the workload is made: the next report throws Cancelled, and
    // the panel never hears workloadReady, so it keeps the previous run's results.
    ServingEngine engine(sc, cancellable(
                                 [this](double f, std::string_view what) {
                                   Q_EMIT progress(f, QStringLiteral("loading: ") +
                                                          QString::fromUtf8(what.data(), qsizetype(what.size())));
                                 },
                                 &cancel_));
    if (cancel_.load()) throw Cancelled();  // pressed after the last report
    auto workload = std::make_shared<const Workload>(make_lab_workload(
        config, engine.shape().vocab_size,
        cancellable(
            [this](double f, std::string_view what) {
              Q_EMIT progress(f, QStringLiteral("preparing: ") + QString::fromUtf8(what.data(), qsizetype(what.size())));
            },
            &cancel_)));
    if (cancel_.load()) throw Cancelled();
    Q_EMIT workloadReady(workload, qint64(engine.bytes_per_block()));
    SchedulerOptions so;
    so.step_tokens = config.step_tokens;
    so.max_running = config.max_running;
    so.keep_samples = true;
    const int runs = int(config.budgets.size() * qsizetype(policies.size()));
    int run = 0;
    for (qint64 budget : config.budgets) {
      for (Policy policy : policies) {
        WorkloadRunKey key{run, QString::fromLatin1(to_string(policy)), budget};
        if (cancel_.load()) {
          cancelled = true;
          break;
        }
        try {
          Q_EMIT runStarted(key, engine.blocks_for_budget(budget, *workload));
          StreamingObserver observer(this, key, int(workload->requests.size()), run, runs);
          ServingResult r = engine.run(*workload, budget, policy, so, &observer, &cancel_);
          observer.flush();  // on_end flushed already; this sends nothing more unless it was not called
          if (r.cancelled) cancelled = true;
          Q_EMIT runFinished(key, r);
        } catch (const Error& e) {
          if (runs == 1) throw;
          Q_EMIT runFailed(key, QString::fromUtf8(e.what()));
        }
        ++run;
      }
      if (cancelled) break;
    }
  } catch (const Cancelled&) {
    cancelled = true;  // before the first run: nothing was served
  } catch (const std::exception& e) {
    Q_EMIT failed(QString::fromUtf8(e.what()));
  }
  Q_EMIT progress(1.0, cancelled ? QStringLiteral("stopped") : QStringLiteral("done"));
  Q_EMIT finished(cancelled);
}

void register_workload_metatypes() {
  qRegisterMetaType<WorkloadLabConfig>();
  qRegisterMetaType<WorkloadRunKey>();
  qRegisterMetaType<PoolMapSnapshot>();
  qRegisterMetaType<StepSample>();
  qRegisterMetaType<RequestRecord>();
  qRegisterMetaType<ServingResult>();
  qRegisterMetaType<QVector<StepSample>>();
  qRegisterMetaType<QVector<RequestRecord>>();
  qRegisterMetaType<std::shared_ptr<const Workload>>();
}

}  // namespace lazyscope::workbench

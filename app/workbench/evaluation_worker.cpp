#include "app/workbench/evaluation_worker.h"

#include <memory>

#include "base/progress.h"
#include "corpora/document_store.h"
#include "corpora/sample_corpus.h"
#include "engine/model/model_loader.h"
#include "engine/runtime/session.h"

namespace lazyscope::workbench {

void register_evaluation_metatypes() {
  qRegisterMetaType<EvaluationPlan>();
  qRegisterMetaType<corpora::QuestionResult>();
  qRegisterMetaType<std::vector<corpora::EvalConfig>>();
}

void EvaluationWorker::run(const EvaluationPlan& plan) {
  try {
    using namespace corpora;
    Q_EMIT status(tr("Opening the corpus…"));
    const std::filesystem::path db = plan.corpus_path.isEmpty()
                                         ? default_sample_corpus_db()
                                         : std::filesystem::path(plan.corpus_path.toStdString());
    DocumentStore store = DocumentStore::open(db, DocumentStore::Mode::read_only);
    QuestionSet questions =
        plan.corpus_questions ? store_question_set(store) : sample_question_set();
    limit_questions(questions, plan.limit);
    EvaluationRunner runner(store, std::move(questions), plan.configs, plan.options);

    SessionOptions options;
    options.model = std::filesystem::path(plan.model_path.toStdString());
    options.backend = parse_backend_kind(plan.backend.toStdString());
    options.kv_budget_bytes =
        plan.kv_budget_bytes > 0 ? std::size_t(plan.kv_budget_bytes) : (256ull << 20);
    options.policies = runner.policies();  // one KV pool and history per policy
    Q_EMIT status(tr("Loading the model…"));
    // Stop pressed while the model loads ends the load at its next progress report.
    std::unique_ptr<Session> loaded;
    try {
      loaded = std::make_unique<Session>(options, nullptr, cancellable({}, &cancel_));
    } catch (const Cancelled&) {
      Q_EMIT finished(true, 0.0);
      return;
    }
    Session& session = *loaded;
    if (cancel_.load()) {
      Q_EMIT finished(true, 0.0, {});
      return;
    }
    const int total = int(runner.questions().questions.size());
    Q_EMIT started(plan.configs, total, QString::fromStdString(session.config().name));
    Q_EMIT status(tr("Evaluating %1 questions…").arg(total));
    const EvalReport report = runner.run(
        session,
        [this](const EvalProgress& p) {
          if (p.last) Q_EMIT questionFinished(*p.last, p.done, p.total, p.remaining_s);
        },
        &cancel_);
    Q_EMIT finished(report.cancelled, report.wall_seconds,
                    QList<double>(report.config_seconds.begin(), report.config_seconds.end()));
  } catch (const std::exception& e) {
    Q_EMIT failed(QString::fromUtf8(e.what()));
  }
}

}  // namespace lazyscope::workbench

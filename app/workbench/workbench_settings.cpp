#include "app/workbench/workbench_settings.h"

#include <QFileInfo>

namespace lazyscope::workbench {
namespace {

constexpr int kMaxRecentReports = 8;

const QString kModel = QStringLiteral("session/model");
const QString kCorpus = QStringLiteral("session/corpus");
const QString kBackend = QStringLiteral("session/backend");
const QString kBudget = QStringLiteral("session/kv_budget_bytes");
const QString kReports = QStringLiteral("recent/reports");

bool exists(const QString& path) { return !path.isEmpty() && QFileInfo::exists(path); }

}  // namespace

QSettings workbench_settings() {
  return QSettings(QStringLiteral("LazyScope"), QStringLiteral("workbench"));
}

void apply_remembered_session(WorkbenchOptions* options) {
  const QSettings settings = workbench_settings();
  if (!options->model_given) {
    const QString model = settings.value(kModel).toString();
    if (exists(model)) options->model = model;
  }
  if (!options->corpus_given) {
    const QString corpus = settings.value(kCorpus).toString();
    if (exists(corpus)) options->corpus = corpus;
  }
  if (!options->backend_given) {
    const QString backend = settings.value(kBackend).toString();
    if (backend == QStringLiteral("auto") || backend == QStringLiteral("cpu") ||
        backend == QStringLiteral("cuda"))
      options->backend = backend;
  }
  if (!options->kv_budget_given) {
    bool ok = false;
    const qint64 bytes = settings.value(kBudget).toLongLong(&ok);
    if (ok && bytes >= 0) options->kv_budget_bytes = bytes;
  }
}

void remember_model(const QString& path) { workbench_settings().setValue(kModel, path); }
void remember_corpus(const QString& path) { workbench_settings().setValue(kCorpus, path); }
void remember_backend(const QString& backend) { workbench_settings().setValue(kBackend, backend); }
void remember_kv_budget(qint64 bytes) { workbench_settings().setValue(kBudget, bytes); }

QStringList recent_reports() {
  QStringList reports;
  for (const QString& path : workbench_settings().value(kReports).toStringList())
    if (exists(path) && !reports.contains(path)) reports << path;
  return reports.mid(0, kMaxRecentReports);
}

void add_recent_report(const QString& path) {
  const QString absolute = QFileInfo(path).absoluteFilePath();
  QStringList reports = recent_reports();
  reports.removeAll(absolute);
  reports.prepend(absolute);
  workbench_settings().setValue(kReports, reports.mid(0, kMaxRecentReports));
}

void clear_recent_reports() { workbench_settings().remove(kReports); }

}  // namespace lazyscope::workbench

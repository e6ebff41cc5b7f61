#include "app/workbench/overhead_runner.h"

#include <exception>

namespace lazyscope::workbench {

OverheadRunner::OverheadRunner(QObject* parent) : QObject(parent) {
  qRegisterMetaType<lazyscope::OverheadProbeRow>();
  qRegisterMetaType<std::vector<lazyscope::OverheadProbeRow>>();
}

OverheadRunner::~OverheadRunner() {
  if (thread_) {
    thread_->wait();
    delete thread_;
  }
}

int OverheadRunner::expectedRows(const OverheadProbeOptions& o) {
  return int(o.shapes.size() * o.batches.size() * o.contexts.size());
}

bool OverheadRunner::start(const OverheadProbeOptions& options) {
  if (thread_) return false;
  thread_ = QThread::create([this, options] {
    try {
      const std::vector<OverheadProbeRow> rows = run_overhead_probe(options, [this](const OverheadProbeRow& row) {
        QMetaObject::invokeMethod(this, [this, row] { Q_EMIT rowMeasured(row); }, Qt::QueuedConnection);
      });
      QMetaObject::invokeMethod(this, [this, rows] { Q_EMIT finished(rows); }, Qt::QueuedConnection);
    } catch (const std::exception& e) {
      const QString message = QString::fromUtf8(e.what());
      QMetaObject::invokeMethod(this, [this, message] { Q_EMIT failed(message); }, Qt::QueuedConnection);
    }
  });
  thread_->setObjectName(QStringLiteral("lazyscope-overhead"));
  connect(thread_, &QThread::finished, this, [this] {
    thread_->deleteLater();
    thread_ = nullptr;
  });
  thread_->start();
  return true;
}

}  // namespace lazyscope::workbench

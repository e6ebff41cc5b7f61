#include "app/workbench/views/report_window.h"

#include <QFileInfo>
#include <QLabel>
#include <QSplitter>
#include <QVBoxLayout>

#include "app/workbench/views/cache_stats_view.h"
#include "app/workbench/views/timeline_view.h"

namespace lazyscope::workbench {
namespace {

QString meta(const SessionRecording& recording, const char* key) {
  const auto it = recording.metadata.find(key);
  return it == recording.metadata.end() ? QObject::tr("unknown")
                                        : QString::fromStdString(it->second);
}

}  // namespace

ReportWindow::ReportWindow(const SessionRecording& recording, const QString& path, QWidget* parent)
    : QWidget(parent, Qt::Window) {
  setAttribute(Qt::WA_DeleteOnClose);
  setObjectName(QStringLiteral("report_window"));
  setWindowTitle(tr("Session report %1 — LazyScope").arg(QFileInfo(path).fileName()));
  summary_ = new QLabel(this);
  summary_->setWordWrap(true);
  summary_->setTextInteractionFlags(Qt::TextSelectableByMouse);
  summary_->setText(tr("<b>%1</b><br>model %2 · backend %3 (%4) · %5 requests · %6 spans")
                        .arg(path.toHtmlEscaped(), meta(recording, "model").toHtmlEscaped(),
                             meta(recording, "backend").toHtmlEscaped(),
                             meta(recording, "device").toHtmlEscaped())
                        .arg(recording.requests.size())
                        .arg(recording.spans.size()));
  stats_ = new CacheStatsView(this);
  // The run axis counts the report's requests: each request is its own point.
  for (const RecordedRequest& request : recording.requests)
    stats_->model()->add(request.id, request.event);
  timeline_ = new TimelineView(this);
  timeline_->setRecording(recording);
  auto* splitter = new QSplitter(Qt::Vertical, this);
  splitter->addWidget(stats_);
  splitter->addWidget(timeline_);
  splitter->setStretchFactor(0, 3);
  splitter->setStretchFactor(1, 2);
  auto* layout = new QVBoxLayout(this);
  layout->addWidget(summary_);
  layout->addWidget(splitter, 1);
  resize(1000, 760);
}

QString ReportWindow::summary() const { return summary_->text(); }

}  // namespace lazyscope::workbench

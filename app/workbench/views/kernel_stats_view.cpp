#include "app/workbench/views/kernel_stats_view.h"

#include <QHeaderView>
#include <QLabel>
#include <QSortFilterProxyModel>
#include <QTableView>
#include <QVBoxLayout>

#include "app/workbench/models/gpu_timeline_data.h"

namespace lazyscope::workbench {

KernelStatsView::KernelStatsView(QWidget* parent) : QWidget(parent) {
  setObjectName(QStringLiteral("kernel_stats"));
  model_ = new KernelStatsModel(this);
  proxy_ = new QSortFilterProxyModel(this);
  proxy_->setSourceModel(model_);
  proxy_->setSortRole(KernelStatsModel::kSortRole);
  table_ = new QTableView(this);
  table_->setModel(proxy_);
  table_->setSortingEnabled(true);
  table_->sortByColumn(KernelStatsModel::kTotal, Qt::DescendingOrder);
  table_->setSelectionBehavior(QAbstractItemView::SelectRows);
  table_->setAlternatingRowColors(true);
  table_->verticalHeader()->hide();
  table_->verticalHeader()->setDefaultSectionSize(table_->fontMetrics().height() + 6);
  table_->horizontalHeader()->setSectionResizeMode(QHeaderView::ResizeToContents);
  table_->horizontalHeader()->setSectionResizeMode(KernelStatsModel::kName, QHeaderView::Stretch);
  summary_ = new QLabel(this);
  summary_->setWordWrap(true);
  note_ = new QLabel(this);
  note_->setObjectName(QStringLiteral("kernel_detail_note"));
  note_->setWordWrap(true);
  note_->setStyleSheet(QStringLiteral("QLabel { background: #fadef0; color: #3c1432; padding: 3px; }"));
  note_->hide();
  auto* layout = new QVBoxLayout(this);
  layout->setContentsMargins(4, 4, 4, 4);
  layout->addWidget(summary_);
  layout->addWidget(note_);
  layout->addWidget(table_, 1);
  updateSummary();
}

void KernelStatsView::setKernels(const std::vector<KernelRecord>& kernels, qint64 origin_ns) {
  setRecords(kernels, {}, {}, origin_ns);
}

void KernelStatsView::setRecording(const SessionRecording& recording, qint64 origin_ns) {
  setRecords(recording.kernels, recording.graphs, recording.traces, origin_ns);
}

void KernelStatsView::setRecords(const std::vector<KernelRecord>& kernels, const std::vector<GraphRecord>& graphs,
                                 const std::vector<RecordedTraceSummary>& traces, qint64 origin_ns) {
  origin_ns_ = origin_ns;
  any_kernels_ = !kernels.empty() || !graphs.empty();
  model_->setRecords(kernels, graphs);
  std::string note = kernel_detail_note(traces);
  // Graph records without device_trace rows (a hand-made recording): still say what they are.
  if (note.empty() && !graphs.empty())
    note = "Kernels inside CUDA graph launches are not itemised: each of the " + std::to_string(graphs.size()) +
           " graph launches is counted whole in its graph's row.";
  note_->setText(QString::fromStdString(note));
  note_->setVisible(!note.empty());
  updateSummary();
}

QString KernelStatsView::detailNote() const { return note_->text(); }

void KernelStatsView::setRange(qint64 from_ns, qint64 to_ns) {
  model_->setRange(from_ns, to_ns);
  updateSummary();
}

QString KernelStatsView::summary() const { return summary_->text(); }

void KernelStatsView::updateSummary() {
  const KernelStats& s = model_->stats();
  if (!any_kernels_) {
    summary_->setText(tr("No GPU kernels in this session. Start the workbench with --backend cuda --trace-gpu, "
                         "or open a GPU-traced report (File ▸ Open Session Report)."));
    return;
  }
  QString counts;
  if (s.graph_launches > 0)
    counts = (s.kernels == 1 ? tr("1 kernel (%1)") : tr("%1 kernels (%2)").arg(s.kernels))
                 .arg(duration_text(double(s.total_ns))) +
             (s.graph_launches == 1 ? tr(" and 1 CUDA graph launch (%1)")
                                    : tr(" and %1 CUDA graph launches (%2)").arg(s.graph_launches))
                 .arg(duration_text(double(s.graph_total_ns))) +
             (s.rows.size() == 1 ? tr(": %1 of GPU busy time in 1 row").arg(duration_text(double(s.busy_ns())))
                                 : tr(": %1 of GPU busy time in %2 rows")
                                       .arg(duration_text(double(s.busy_ns())))
                                       .arg(s.rows.size()));
  else
    counts = tr("%n kernel(s), %1 of GPU time, %2 names", nullptr, int(s.kernels))
                 .arg(duration_text(double(s.total_ns)))
                 .arg(s.rows.size());
  if (model_->rangeTo() > model_->rangeFrom())
    summary_->setText(tr("Selected range %1 – %2 (records that start in it): %3. Double-click the timeline to "
                         "clear the selection.")
                          .arg(QString::fromStdString(format_time_ns(double(model_->rangeFrom() - origin_ns_))),
                               QString::fromStdString(format_time_ns(double(model_->rangeTo() - origin_ns_))), counts));
  else
    summary_->setText(tr("Whole session: %1. Shift+drag on the GPU timeline to select a range.").arg(counts));
}

}  // namespace lazyscope::workbench

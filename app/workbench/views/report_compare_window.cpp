#include "app/workbench/views/report_compare_window.h"

#include <QGroupBox>
#include <algorithm>
#include <QHeaderView>
#include <QLabel>
#include <QSortFilterProxyModel>
#include <QSplitter>
#include <QTableView>
#include <QVBoxLayout>

#include "app/workbench/views/kernel_stats_view.h"

namespace lazyscope::workbench {
namespace {

QGroupBox* boxed(const QString& title, QWidget* content, QWidget* parent) {
  auto* box = new QGroupBox(title, parent);
  auto* layout = new QVBoxLayout(box);
  layout->setContentsMargins(4, 4, 4, 4);
  layout->addWidget(content);
  return box;
}

// The earliest start among the kernels and graph launches (0: none).
int64_t origin_of(const std::vector<KernelRecord>& k, const std::vector<GraphRecord>& g) {
  bool any = false;
  int64_t t = 0;
  auto take = [&](int64_t start) {
    t = any ? std::min(t, start) : start;
    any = true;
  };
  for (const KernelRecord& r : k) take(r.start_ns);
  for (const GraphRecord& r : g) take(r.start_ns);
  return t;
}

}  // namespace

ReportCompareWindow::ReportCompareWindow(const std::vector<KernelRecord>& a, const std::vector<GraphRecord>& graphs_a,
                                         const QString& name_a, const std::vector<KernelRecord>& b,
                                         const std::vector<GraphRecord>& graphs_b, const QString& name_b,
                                         QWidget* parent)
    : QWidget(parent, Qt::Window) {
  setAttribute(Qt::WA_DeleteOnClose);
  setObjectName(QStringLiteral("report_compare_window"));
  setWindowTitle(tr("Compare %1 and %2 — LazyScope").arg(name_a, name_b));
  const KernelStats sa = kernel_stats_graphs_combined(a, graphs_a), sb = kernel_stats_graphs_combined(b, graphs_b);
  summary_ = new QLabel(this);
  summary_->setWordWrap(true);
  summary_->setTextInteractionFlags(Qt::TextSelectableByMouse);
  const QString ratio = sa.busy_ns() > 0 ? tr("%1×").arg(double(sb.busy_ns()) / double(sa.busy_ns()), 0, 'f', 3) : tr("–");
  auto side = [](const KernelStats& s) {
    if (s.graph_launches == 0) return tr("%1 kernels, %2 of GPU time").arg(s.kernels).arg(duration_text(double(s.total_ns)));
    return tr("%1 kernels (%2) and %3 graph launches (%4): %5 of GPU busy time")
        .arg(s.kernels)
        .arg(duration_text(double(s.total_ns)))
        .arg(s.graph_launches)
        .arg(duration_text(double(s.graph_total_ns)))
        .arg(duration_text(double(s.busy_ns())));
  };
  summary_->setText(tr("<b>A</b> = %1: %2 · <b>B</b> = %3: %4 · B ÷ A = %5")
                        .arg(name_a.toHtmlEscaped(), side(sa), name_b.toHtmlEscaped(), side(sb), ratio));
  auto* left = new KernelStatsView(this);
  left->setRecords(a, graphs_a, {}, origin_of(a, graphs_a));
  auto* right = new KernelStatsView(this);
  right->setRecords(b, graphs_b, {}, origin_of(b, graphs_b));
  auto* sides = new QSplitter(Qt::Horizontal, this);
  sides->addWidget(boxed(tr("A: %1").arg(name_a), left, this));
  sides->addWidget(boxed(tr("B: %1").arg(name_b), right, this));

  diff_ = new KernelDiffModel(this);
  diff_->setReports(sa, sb, QStringLiteral("A"), QStringLiteral("B"));
  auto* proxy = new QSortFilterProxyModel(this);
  proxy->setSourceModel(diff_);
  proxy->setSortRole(KernelDiffModel::kSortRole);
  auto* table = new QTableView(this);
  table->setObjectName(QStringLiteral("kernel_diff"));
  table->setModel(proxy);
  table->setSortingEnabled(true);
  table->sortByColumn(-1, Qt::AscendingOrder);  // the model's order: largest difference first
  table->verticalHeader()->hide();
  table->setAlternatingRowColors(true);
  table->horizontalHeader()->setSectionResizeMode(QHeaderView::ResizeToContents);
  table->horizontalHeader()->setSectionResizeMode(KernelDiffModel::kName, QHeaderView::Stretch);

  auto* split = new QSplitter(Qt::Vertical, this);
  split->addWidget(sides);
  split->addWidget(boxed(tr("Per-kernel time: B − A (largest difference first; every graph's launches in one row)"),
                         table, this));
  auto* layout = new QVBoxLayout(this);
  layout->addWidget(summary_);
  layout->addWidget(split, 1);
  resize(1400, 860);
}

QString ReportCompareWindow::summary() const { return summary_->text(); }

}  // namespace lazyscope::workbench

#include "app/workbench/views/report_compare_window.h"

#include <QGroupBox>
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

int64_t origin_of(const std::vector<KernelRecord>& k) {
  int64_t t = k.empty() ? 0 : k.front().start_ns;
  for (const KernelRecord& r : k) t = std::min(t, r.start_ns);
  return t;
}

}  // namespace

ReportCompareWindow::ReportCompareWindow(const std::vector<KernelRecord>& a, const QString& name_a,
                                         const std::vector<KernelRecord>& b, const QString& name_b, QWidget* parent)
    : QWidget(parent, Qt::Window) {
  setAttribute(Qt::WA_DeleteOnClose);
  setObjectName(QStringLiteral("report_compare_window"));
  setWindowTitle(tr("Compare %1 and %2 — LazyScope").arg(name_a, name_b));
  const KernelStats sa = kernel_stats(a), sb = kernel_stats(b);
  summary_ = new QLabel(this);
  summary_->setWordWrap(true);
  summary_->setTextInteractionFlags(Qt::TextSelectableByMouse);
  const QString ratio = sa.total_ns > 0 ? tr("%1×").arg(double(sb.total_ns) / double(sa.total_ns), 0, 'f', 3) : tr("–");
  summary_->setText(tr("<b>A</b> = %1: %2 kernels, %3 of GPU time · <b>B</b> = %4: %5 kernels, %6 · B ÷ A = %7")
                        .arg(name_a.toHtmlEscaped())
                        .arg(sa.kernels)
                        .arg(duration_text(double(sa.total_ns)))
                        .arg(name_b.toHtmlEscaped())
                        .arg(sb.kernels)
                        .arg(duration_text(double(sb.total_ns)))
                        .arg(ratio));
  auto* left = new KernelStatsView(this);
  left->setKernels(a, origin_of(a));
  auto* right = new KernelStatsView(this);
  right->setKernels(b, origin_of(b));
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
  split->addWidget(boxed(tr("Per-kernel time: B − A (largest difference first)"), table, this));
  auto* layout = new QVBoxLayout(this);
  layout->addWidget(summary_);
  layout->addWidget(split, 1);
  resize(1400, 860);
}

QString ReportCompareWindow::summary() const { return summary_->text(); }

}  // namespace lazyscope::workbench

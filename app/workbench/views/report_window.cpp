#include "app/workbench/views/report_window.h"

#include <QComboBox>
#include <QFileInfo>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QLabel>
#include <QPushButton>
#include <QSlider>
#include <QSplitter>
#include <QTabWidget>
#include <QTableWidget>
#include <QVBoxLayout>
#include <algorithm>
#include <map>
#include <set>

#include "app/workbench/models/block_map_model.h"
#include "app/workbench/models/cache_stats_model.h"
#include "app/workbench/views/block_map_view.h"
#include "app/workbench/views/cache_stats_view.h"
#include "app/workbench/views/gpu_timeline_view.h"
#include "app/workbench/views/kernel_stats_view.h"
#include "app/workbench/views/overhead_panel.h"
#include "app/workbench/views/report_compare_window.h"
#include "app/workbench/views/timeline_view.h"
#include "profiler/kernel_stats.h"

namespace lazyscope::workbench {
namespace {

QString meta(const SessionRecording& recording, const char* key) {
  const auto it = recording.metadata.find(key);
  return it == recording.metadata.end() ? QObject::tr("unknown") : QString::fromStdString(it->second);
}

int meta_int(const SessionRecording& recording, const char* key, int fallback) {
  const auto it = recording.metadata.find(key);
  if (it == recording.metadata.end()) return fallback;
  bool ok = false;
  const int v = QString::fromStdString(it->second).toInt(&ok);
  return ok && v > 0 ? v : fallback;
}

QTableWidget* make_table(const QStringList& headers, QWidget* parent) {
  auto* t = new QTableWidget(0, int(headers.size()), parent);
  t->setHorizontalHeaderLabels(headers);
  t->verticalHeader()->hide();
  t->setEditTriggers(QAbstractItemView::NoEditTriggers);
  t->setAlternatingRowColors(true);
  t->horizontalHeader()->setSectionResizeMode(QHeaderView::ResizeToContents);
  t->horizontalHeader()->setStretchLastSection(true);
  return t;
}

}  // namespace

ReportWindow::ReportWindow(const SessionRecording& recording, const QString& path, QWidget* parent)
    : QWidget(parent, Qt::Window), recording_(recording), path_(path) {
  setAttribute(Qt::WA_DeleteOnClose);
  setObjectName(QStringLiteral("report_window"));
  setWindowTitle(tr("Session report %1 — LazyScope").arg(QFileInfo(path).fileName()));
  summary_ = new QLabel(this);
  summary_->setWordWrap(true);
  summary_->setTextInteractionFlags(Qt::TextSelectableByMouse);
  summary_->setText(tr("<b>%1</b><br>model %2 · backend %3 (%4) · %5 requests · %6 spans · %7 NVTX ranges · "
                       "%8 GPU kernels · %10 CUDA graph launches · %9 CUDA calls")
                        .arg(path.toHtmlEscaped(), meta(recording, "model").toHtmlEscaped(),
                             meta(recording, "backend").toHtmlEscaped(), meta(recording, "device").toHtmlEscaped())
                        .arg(recording.requests.size())
                        .arg(recording.spans.size())
                        .arg(recording.ranges.size())
                        .arg(recording.kernels.size())
                        .arg(recording.api_calls.size())
                        .arg(recording.graphs.size()));
  tabs_ = new QTabWidget(this);
  buildRuns();
  buildEquivalence();
  buildBlockMap();

  stats_ = new CacheStatsView(this);
  // The run axis counts the report's requests: each request is its own point.
  for (const RecordedRequest& request : recording.requests) stats_->model()->add(request.id, request.event);
  tabs_->addTab(stats_, tr("Cache stats"));

  timeline_ = new TimelineView(this);
  timeline_->setRecording(recording);
  tabs_->addTab(timeline_, tr("Host timeline"));

  // The GPU timeline over its kernel statistics: a selected range there narrows the table.
  gpu_timeline_ = new GpuTimelineView(this);
  gpu_timeline_->setRecording(recording);
  kernel_stats_ = new KernelStatsView(this);
  kernel_stats_->setRecording(recording, gpu_timeline_->data().beginNs());
  connect(gpu_timeline_, &GpuTimelineView::selectionChanged, kernel_stats_, &KernelStatsView::setRange);
  auto* gpu_page = new QWidget(this);
  auto* gpu_split = new QSplitter(Qt::Vertical, gpu_page);
  gpu_split->addWidget(gpu_timeline_);
  gpu_split->addWidget(kernel_stats_);
  gpu_split->setStretchFactor(0, 3);
  gpu_split->setStretchFactor(1, 2);
  auto* gpu_layout = new QVBoxLayout(gpu_page);
  gpu_layout->setContentsMargins(0, 0, 0, 0);
  std::set<std::string> policies;
  for (const RecordedRequest& r : recording.requests) policies.insert(r.event.policy);
  if (!recording.kernels.empty() && policies.count("lazy") && policies.count("materialized")) {
    auto* compare = new QPushButton(tr("Compare the lazy and the materialized requests' kernels…"), gpu_page);
    compare->setObjectName(QStringLiteral("compare_policies"));
    connect(compare, &QPushButton::clicked, this, [this] { compareLazyMaterialized(); });
    auto* row = new QHBoxLayout;
    row->addWidget(compare);
    row->addStretch(1);
    gpu_layout->addLayout(row);
  }
  gpu_layout->addWidget(gpu_split, 1);
  tabs_->addTab(gpu_page, tr("GPU timeline && kernels"));

  overhead_ = new OverheadPanel(this);
  overhead_->setRows(recording.overhead);
  overhead_->setMeasureEnabled(false);
  tabs_->addTab(overhead_, tr("Lazy overhead"));

  // A traced report opens on its kernels, any other on its runs.
  if (!recording.kernels.empty() || !recording.graphs.empty()) tabs_->setCurrentWidget(gpu_page);
  auto* layout = new QVBoxLayout(this);
  layout->addWidget(summary_);
  layout->addWidget(tabs_, 1);
  resize(1400, 900);
}

QString ReportWindow::summary() const { return summary_->text(); }
QString ReportWindow::equivalenceSummary() const { return equivalence_summary_->text(); }

void ReportWindow::buildRuns() {
  runs_ = make_table({tr("Request"), tr("Policy"), tr("Mode"), tr("Prompt tokens"), tr("Cached tokens"),
                      tr("Documents from cache"), tr("Generated"), tr("TTFT ms"), tr("Decode ms/token"),
                      tr("KV copied"), tr("Blocks allocated"), tr("Blocks evicted"), tr("Cancelled")},
                     this);
  runs_->setObjectName(QStringLiteral("report_runs"));
  runs_->setRowCount(int(recording_.requests.size()));
  for (int i = 0; i < int(recording_.requests.size()); ++i) {
    const RecordedRequest& r = recording_.requests[size_t(i)];
    const RequestFinishedEvent& e = r.event;
    const QStringList cells = {QString::number(r.id),
                               QString::fromStdString(e.policy),
                               QString::fromStdString(e.mode),
                               QString::number(e.prompt_tokens),
                               QString::number(e.stats.cached_tokens),
                               QStringLiteral("%1 of %2").arg(e.stats.document_hits).arg(e.stats.documents),
                               QString::number(e.generated_tokens),
                               QString::number(e.ttft_ms, 'f', 2),
                               QString::number(e.decode_ms_per_token, 'f', 3),
                               format_bytes(e.stats.bytes_copied),
                               QString::number(e.stats.blocks_allocated),
                               QString::number(e.stats.blocks_evicted),
                               e.cancelled ? tr("yes") : tr("no")};
    for (int c = 0; c < cells.size(); ++c) runs_->setItem(i, c, new QTableWidgetItem(cells[c]));
  }
  tabs_->addTab(runs_, tr("Runs"));
}

void ReportWindow::buildEquivalence() {
  // The report keeps every generated token, not the logits: the replay compares the tokens. Each
  // request is set against the request before it when their policies differ (one run of a plan:
  // lazy, then materialized on the same prompt).
  std::map<int, std::vector<const RecordedToken*>> by_request;
  for (const RecordedToken& t : recording_.tokens) by_request[t.request].push_back(&t);
  for (auto& [id, tokens] : by_request)
    std::sort(tokens.begin(), tokens.end(), [](const RecordedToken* a, const RecordedToken* b) { return a->event.step < b->event.step; });
  QStringList headers;
  size_t steps = 0;
  for (const RecordedRequest& r : recording_.requests) {
    headers << tr("%1 (request %2)").arg(QString::fromStdString(r.event.policy)).arg(r.id);
    steps = std::max(steps, by_request[r.id].size());
  }
  auto* page = new QWidget(this);
  tokens_ = make_table(headers, page);
  tokens_->setObjectName(QStringLiteral("report_tokens"));
  tokens_->setRowCount(int(steps));
  QStringList lines;
  for (int c = 0; c < int(recording_.requests.size()); ++c) {
    const RecordedRequest& r = recording_.requests[size_t(c)];
    const std::vector<const RecordedToken*>& mine = by_request[r.id];
    const RecordedRequest* ref = c > 0 && recording_.requests[size_t(c - 1)].event.policy != r.event.policy
                                     ? &recording_.requests[size_t(c - 1)]
                                     : nullptr;
    // A request compared with its predecessor is not its successor's reference as well.
    if (ref && c > 1 && recording_.requests[size_t(c - 2)].event.policy != ref->event.policy) {
      int pairs_before = 0;
      for (int k = 1; k < c; ++k)
        if (recording_.requests[size_t(k - 1)].event.policy != recording_.requests[size_t(k)].event.policy) ++pairs_before;
      if (pairs_before % 2 == 1) ref = nullptr;
    }
    const std::vector<const RecordedToken*>* theirs = ref ? &by_request[ref->id] : nullptr;
    int same = 0, first_diff = -1;
    for (int s = 0; s < int(mine.size()); ++s) {
      auto* item = new QTableWidgetItem(QString::fromStdString(mine[size_t(s)]->event.text).replace('\n', QStringLiteral("⏎")));
      item->setToolTip(tr("token id %1 at %2 ms").arg(mine[size_t(s)]->event.id).arg(mine[size_t(s)]->event.ms_since_submit, 0, 'f', 2));
      if (theirs && s < int(theirs->size())) {
        const bool equal = (*theirs)[size_t(s)]->event.id == mine[size_t(s)]->event.id;
        item->setBackground(equal ? QColor(200, 235, 200) : QColor(245, 190, 190));
        if (equal) ++same;
        else if (first_diff < 0) first_diff = s;
      }
      tokens_->setItem(s, c, item);
    }
    if (theirs) {
      const int compared = int(std::min(mine.size(), theirs->size()));
      lines << (first_diff < 0 ? tr("request %1 (%2) vs %3 (%4): the same %5 tokens")
                                     .arg(r.id).arg(QString::fromStdString(r.event.policy)).arg(ref->id)
                                     .arg(QString::fromStdString(ref->event.policy)).arg(compared)
                               : tr("request %1 (%2) vs %3 (%4): %5 of %6 tokens the same, first difference at step %7")
                                     .arg(r.id).arg(QString::fromStdString(r.event.policy)).arg(ref->id)
                                     .arg(QString::fromStdString(ref->event.policy)).arg(same).arg(compared).arg(first_diff));
    }
  }
  equivalence_summary_ = new QLabel(page);
  equivalence_summary_->setWordWrap(true);
  equivalence_summary_->setText(
      (lines.isEmpty() ? tr("No pair of requests with different policies to compare.") : lines.join(QStringLiteral("<br>"))) +
      tr("<br><i>The report holds the generated tokens, not the logits: green where a request chose the same token as "
         "the request before it, red where not.</i>"));
  auto* layout = new QVBoxLayout(page);
  layout->setContentsMargins(4, 4, 4, 4);
  layout->addWidget(equivalence_summary_);
  layout->addWidget(tokens_, 1);
  tabs_->addTab(page, tr("Equivalence"));
}

void ReportWindow::buildBlockMap() {
  auto* page = new QWidget(this);
  block_map_ = new BlockMapView(page);
  scrubber_ = new QSlider(Qt::Horizontal, page);
  scrubber_->setObjectName(QStringLiteral("block_scrubber"));
  scrubber_->setToolTip(tr("Drag to replay the pool's block events one by one (←/→ step, Home/End)"));
  scrub_label_ = new QLabel(page);
  connect(scrubber_, &QSlider::valueChanged, this, &ReportWindow::scrubTo);
  // The policy box lists the report's policies; choosing one replays that pool.
  QComboBox* box = block_map_->policySelector();
  std::vector<std::string> policies;
  for (const RecordedRequest& r : recording_.requests)
    if (std::find(policies.begin(), policies.end(), r.event.policy) == policies.end()) policies.push_back(r.event.policy);
  if (box) {
    box->blockSignals(true);
    box->clear();
    for (const std::string& p : policies) box->addItem(QString::fromStdString(p), QString::fromStdString(p));
    box->blockSignals(false);
  }
  connect(block_map_, &BlockMapView::policyChanged, this, &ReportWindow::selectBlockPolicy);
  auto* row = new QHBoxLayout;
  row->addWidget(new QLabel(tr("Block event:"), page));
  row->addWidget(scrubber_, 1);
  row->addWidget(scrub_label_);
  auto* layout = new QVBoxLayout(page);
  layout->setContentsMargins(4, 4, 4, 4);
  layout->addLayout(row);
  layout->addWidget(block_map_, 1);
  tabs_->addTab(page, tr("KV block map"));
  selectBlockPolicy(policies.empty() ? QStringLiteral("lazy") : QString::fromStdString(policies.front()));
}

void ReportWindow::selectBlockPolicy(const QString& policy) {
  std::map<int, std::string> policy_of;
  for (const RecordedRequest& r : recording_.requests) policy_of[r.id] = r.event.policy;
  const std::string p = policy.toStdString();
  policy_blocks_.clear();
  policy_segments_.clear();
  for (RecordedBlockEvent b : recording_.blocks) {
    if (b.event.policy.empty()) b.event.policy = policy_of[b.request];
    if (b.event.policy == p) policy_blocks_.push_back(b);
  }
  for (RecordedSegment s : recording_.segments) {
    if (s.event.policy.empty()) s.event.policy = policy_of[s.request];
    if (s.event.policy == p) policy_segments_.push_back(s);
  }
  if (QComboBox* box = block_map_->policySelector()) {
    box->blockSignals(true);
    block_map_->showPolicy(policy);
    box->blockSignals(false);
  }
  block_map_->model()->setPolicy(policy);
  scrubber_->blockSignals(true);
  scrubber_->setRange(0, int(policy_blocks_.size()));
  scrubber_->setValue(int(policy_blocks_.size()));
  scrubber_->blockSignals(false);
  scrubTo(int(policy_blocks_.size()));
}

void ReportWindow::scrubTo(int index) {
  index = std::clamp(index, 0, int(policy_blocks_.size()));
  BlockMapModel* model = block_map_->model();
  int blocks = meta_int(recording_, "pool_blocks", 0);
  for (const RecordedBlockEvent& b : policy_blocks_) blocks = std::max(blocks, b.event.block + 1);
  const int block_size = meta_int(recording_, "block_size", 16);
  model->resize(std::max(blocks, 1), block_size, model->bytesPerBlock());  // an empty pool of this policy
  // Segments known by the time of the last event shown, then the events in order.
  const double until = index == 0 ? -1.0 : policy_blocks_[size_t(index - 1)].t_ms;
  size_t s = 0;
  for (int i = 0; i < index; ++i) {
    const RecordedBlockEvent& b = policy_blocks_[size_t(i)];
    while (s < policy_segments_.size() && policy_segments_[s].t_ms <= b.t_ms) model->applySegment(policy_segments_[s++].event);
    model->applyBlock(b.event);
  }
  while (s < policy_segments_.size() && policy_segments_[s].t_ms <= until) model->applySegment(policy_segments_[s++].event);
  if (index == 0) {
    scrub_label_->setText(tr("0 of %1 (empty pool)").arg(policy_blocks_.size()));
  } else {
    const RecordedBlockEvent& b = policy_blocks_[size_t(index - 1)];
    scrub_label_->setText(tr("%1 of %2: %3 block %4 at %5 ms (request %6)")
                              .arg(index)
                              .arg(policy_blocks_.size())
                              .arg(QString::fromUtf8(to_string(b.event.action)))
                              .arg(b.event.block)
                              .arg(b.t_ms, 0, 'f', 2)
                              .arg(b.request));
  }
  if (scrubber_->value() != index) {
    scrubber_->blockSignals(true);
    scrubber_->setValue(index);
    scrubber_->blockSignals(false);
  }
}

QWidget* ReportWindow::compareLazyMaterialized() {
  const std::vector<KernelRecord> lazy = kernels_of_policy(recording_, "lazy");
  const std::vector<KernelRecord> materialized = kernels_of_policy(recording_, "materialized");
  if (lazy.empty() && materialized.empty()) return nullptr;
  auto* window = new ReportCompareWindow(lazy, graphs_of_policy(recording_, "lazy"), tr("lazy"), materialized,
                                         graphs_of_policy(recording_, "materialized"), tr("materialized"), this);
  window->setWindowTitle(tr("Lazy vs materialized kernels in %1 — LazyScope").arg(QFileInfo(path_).fileName()));
  window->show();
  return window;
}

}  // namespace lazyscope::workbench

// qcustomplot.h uses Qt's lower-case keywords; this file includes no engine backend header.
#undef QT_NO_KEYWORDS
#include "app/workbench/views/workload_lab_panel.h"

#include <qcustomplot.h>

#include <QCheckBox>
#include <QComboBox>
#include <QDoubleSpinBox>
#include <QFileInfo>
#include <QFormLayout>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QLabel>
#include <QLineEdit>
#include <QProgressBar>
#include <QPushButton>
#include <QScrollArea>
#include <QSpinBox>
#include <QSplitter>
#include <QTableView>
#include <QTabWidget>
#include <QTextBrowser>
#include <QTimer>
#include <QVBoxLayout>
#include <algorithm>
#include <cstdlib>

#include "app/workbench/views/cache_stats_view.h"
#include "app/workbench/views/pool_strips_view.h"
#include "app/workbench/views/workload_charts.h"
#include "base/byte_size.h"
#include "base/error.h"
#include "engine/model/model_registry.h"

namespace lazyscope::workbench {
namespace {

const char* const kPolicies[] = {"none", "prefix", "positional", "materialized", "lazy"};

// "unlimited" -> 0, else a positive size as the CLI's --kv-budget reads it.
qint64 parse_budget(const QString& text, const char* field) {
  const std::string t = text.trimmed().toStdString();
  if (t == "unlimited" || t == "inf") return 0;
  try {
    const std::size_t v = parse_byte_size(t);
    if (v == 0) throw Error("zero");
    return qint64(v);
  } catch (const Error& e) {
    throw Error(std::string(field) + ": '" + t + "' is not a KV budget (a positive size such as 512MiB, 1GiB, 8GB, " +
                "or 'unlimited'): " + e.what());
  }
}

QSpinBox* spin(int lo, int hi, int value, QWidget* parent) {
  auto* s = new QSpinBox(parent);
  s->setRange(lo, hi);
  s->setValue(value);
  s->setGroupSeparatorShown(true);
  return s;
}

void style_plot(QCustomPlot* plot, const QString& title, const QString& x_label, const QString& y_label) {
  plot->plotLayout()->insertRow(0);
  plot->plotLayout()->addElement(0, 0, new QCPTextElement(plot, title, QFont(plot->font().family(), 9, QFont::Bold)));
  plot->xAxis->setLabel(x_label);
  plot->yAxis->setLabel(y_label);
  plot->legend->setVisible(true);
  QFont f = plot->font();
  f.setPointSizeF(f.pointSizeF() * 0.85);
  plot->legend->setFont(f);
  plot->legend->setBrush(QColor(255, 255, 255, 210));
  plot->axisRect()->insetLayout()->setInsetAlignment(0, Qt::AlignBottom | Qt::AlignRight);
  plot->setMinimumHeight(160);
}

QString run_label(const QString& policy, qint64 budget, bool several_budgets) {
  return several_budgets ? QStringLiteral("%1 @ %2").arg(policy, budget_label(budget)) : policy;
}

}  // namespace

WorkloadLabPanel::WorkloadLabPanel(QWidget* parent) : QWidget(parent) {
  register_workload_metatypes();
  auto* outer = new QHBoxLayout(this);
  outer->setContentsMargins(4, 4, 4, 4);
  auto* splitter = new QSplitter(Qt::Horizontal, this);
  outer->addWidget(splitter);

  auto* scroll = new QScrollArea(splitter);
  scroll->setWidgetResizable(true);
  auto* form = new QWidget(scroll);
  buildForm(form);
  scroll->setWidget(form);
  scroll->setMinimumWidth(300);

  auto* right = new QSplitter(Qt::Vertical, splitter);
  tabs_ = new QTabWidget(right);
  hit_plot_ = new QCustomPlot(tabs_);
  style_plot(hit_plot_, tr("Hit ratio over the run (cached document tokens / document + query tokens)"),
             tr("run time s (the run's clock)"), tr("hit ratio %"));
  hit_plot_->yAxis->setRange(0, 100);
  tabs_->addTab(hit_plot_, tr("Hit ratio"));
  live_charts_ = new WorkloadLiveCharts(tabs_);
  tabs_->addTab(live_charts_, tr("Batch, TTFT, throughput"));
  comparison_ = new WorkloadComparisonCharts(tabs_);
  tabs_->addTab(comparison_, tr("Comparison"));
  auto* requests_split = new QSplitter(Qt::Horizontal, tabs_);
  requests_table_ = new QTableView(requests_split);
  requests_table_->setObjectName(QStringLiteral("workload_requests"));
  requests_table_->setModel(&request_rows_);
  requests_table_->setSelectionBehavior(QAbstractItemView::SelectRows);
  requests_table_->setSelectionMode(QAbstractItemView::SingleSelection);
  // Fixed widths: measuring 10,000 rows' contents would stall the window.
  requests_table_->horizontalHeader()->setSectionResizeMode(QHeaderView::Interactive);
  requests_table_->horizontalHeader()->setDefaultSectionSize(110);
  requests_table_->verticalHeader()->setVisible(false);
  requests_table_->setToolTip(tr("The requests of the run selected in the results table; click one for its details"));
  details_ = new QTextBrowser(requests_split);
  details_->setObjectName(QStringLiteral("workload_request_details"));
  details_->setPlaceholderText(tr("Select a run in the results table, then click a request: its documents, their "
                                  "placements and shifts, and what the policy shared, encoded or copied for it."));
  requests_split->setStretchFactor(0, 2);
  requests_split->setStretchFactor(1, 3);
  tabs_->addTab(requests_split, tr("Requests"));
  connect(tabs_, &QTabWidget::currentChanged, this, [this] {
    dirty_ = true;
    live_charts_->markDirty();
    fillRequestsIfShown();
  });

  auto* pool_scroll = new QScrollArea(right);
  pool_scroll->setWidgetResizable(true);
  pools_ = new PoolStripsView(pool_scroll);
  pool_scroll->setWidget(pools_);
  pool_scroll->setMinimumHeight(120);

  table_ = new QTableView(right);
  table_->setModel(&results_);
  table_->setSelectionBehavior(QAbstractItemView::SelectRows);
  table_->setSelectionMode(QAbstractItemView::SingleSelection);
  table_->horizontalHeader()->setSectionResizeMode(QHeaderView::ResizeToContents);
  table_->verticalHeader()->setVisible(false);
  connect(table_->selectionModel(), &QItemSelectionModel::currentRowChanged, this,
          [this](const QModelIndex& current) { onRunSelected(current.row()); });
  connect(requests_table_->selectionModel(), &QItemSelectionModel::currentRowChanged, this,
          [this](const QModelIndex& current) { onRequestSelected(current.row()); });
  connect(&results_, &QAbstractItemModel::modelReset, this, [this] {
    // A reset (a new row) keeps the chosen run's requests on screen.
    if (selected_run_ >= 0 && selected_run_ < results_.rowCount()) table_->selectRow(selected_run_);
  });
  right->setStretchFactor(0, 4);
  right->setStretchFactor(1, 2);
  right->setStretchFactor(2, 2);
  splitter->setStretchFactor(0, 0);
  splitter->setStretchFactor(1, 1);

  // Plots are redrawn at most 20 times a second, and only when shown.
  replot_timer_ = new QTimer(this);
  replot_timer_->setInterval(50);
  connect(replot_timer_, &QTimer::timeout, this, &WorkloadLabPanel::replotVisible);
  replot_timer_->start();

  worker_ = new WorkloadWorker;
  worker_->moveToThread(&thread_);
  connect(&thread_, &QThread::finished, worker_, &QObject::deleteLater);
  thread_.setObjectName(QStringLiteral("lazyscope-workload"));
  thread_.start();
  connect(worker_, &WorkloadWorker::progress, this, [this](double f, const QString& what) {
    progress_->setValue(int(1000 * f));
    if (!stop_requested_) setStatus(what);
    Q_EMIT progressChanged(f, what);
  });
  connect(worker_, &WorkloadWorker::workloadReady, this,
          [this](std::shared_ptr<const Workload> w, qint64 bytes_per_block) {
            if (stop_requested_) return;  // stopped (or a report opened) while it loaded
            // The first run is about to start: only now does the previous run's picture go.
            clearResults();
            last_config_ = pending_config_;
            workload_ = std::move(w);
            bytes_per_block_ = bytes_per_block;
            prompts_ = workload_prompts(*workload_);
            workload_ready_ = true;
          });
  connect(worker_, &WorkloadWorker::runStarted, this, &WorkloadLabPanel::onRunStarted);
  connect(worker_, &WorkloadWorker::requestsStreamed, this, &WorkloadLabPanel::onRequests);
  connect(worker_, &WorkloadWorker::runFinished, this, &WorkloadLabPanel::onRunFinished);
  connect(worker_, &WorkloadWorker::stepsStreamed, this, [this](const WorkloadRunKey& key, const QVector<StepSample>& steps) {
    live_charts_->addSteps(key.run, steps);
  });
  connect(worker_, &WorkloadWorker::poolStreamed, this, [this](const WorkloadRunKey& key, const PoolMapSnapshot& pool) {
    pools_->setSnapshot(key.run, pool);
  });
  connect(worker_, &WorkloadWorker::runFailed, this, [this](const WorkloadRunKey& key, const QString& message) {
    results_.addFailure(key.policy, key.budget, message);
  });
  connect(worker_, &WorkloadWorker::failed, this, [this](const QString& message) { error_ = message; });
  connect(worker_, &WorkloadWorker::finished, this, &WorkloadLabPanel::onFinished);
  if (auto model = default_model_path()) default_model_ = QString::fromStdString(model->string());
  applyPaperPreset();
}

WorkloadLabPanel::~WorkloadLabPanel() {
  worker_->requestStop();
  thread_.quit();
  thread_.wait();
}

void WorkloadLabPanel::buildForm(QWidget* form) {
  auto* layout = new QFormLayout(form);
  auto* preset = new QPushButton(tr("Paper preset"), form);
  preset->setToolTip(tr("Llama-3.2-1B shape, 100 documents × 2,048 tokens, 5 per request, Zipf α 2.1, 200 requests, "
                        "concurrency 16, 1 GiB per policy, 16-token queries, 8 output tokens"));
  connect(preset, &QPushButton::clicked, this, &WorkloadLabPanel::applyPaperPreset);
  auto* cpu_preset = new QPushButton(tr("Small CPU run"), form);
  cpu_preset->setToolTip(tr("The default model on the CPU: 12 documents × 64 tokens, 2 per request, 10 requests, "
                            "concurrency 3, none / materialized / lazy at 24 MiB per policy"));
  connect(cpu_preset, &QPushButton::clicked, this, [this] {
    setConfig(small_cpu_preset());
    setStatus(tr("Small CPU run: press Run (the default model on the CPU; a few minutes on a small machine)."));
  });
  auto* trace_preset = new QPushButton(tr("Corpus trace on CPU"), form);
  trace_preset->setObjectName(QStringLiteral("workload_trace_preset"));
  trace_preset->setToolTip(tr("The default model on the CPU: the loaded corpus's first 8 questions, each with its "
                              "BM25 top-2 passages, concurrency 3, 4 output tokens, none / materialized / lazy at "
                              "64 MiB per policy"));
  connect(trace_preset, &QPushButton::clicked, this, [this] {
    setConfig(corpus_trace_cpu_preset(corpus_));
    setStatus(tr("Corpus trace on CPU: press Run (the default model on the CPU; a few minutes on a small machine)."));
  });
  auto* presets = new QWidget(form);
  auto* presets_row = new QHBoxLayout(presets);
  presets_row->setContentsMargins(0, 0, 0, 0);
  presets_row->addWidget(preset);
  presets_row->addWidget(cpu_preset);
  presets_row->addWidget(trace_preset);
  layout->addRow(presets);
  source_ = new QComboBox(form);
  source_->setObjectName(QStringLiteral("workload_source"));
  source_->addItem(tr("synthetic token documents"), QString());
  source_->addItem(tr("corpus questions + BM25 top-k (trace)"), QStringLiteral("questions"));
  source_->addItem(tr("corpus passages by popularity"), QStringLiteral("zipf"));
  source_->setToolTip(tr("Synthetic documents of random tokens, or the loaded corpus: each question with its BM25 "
                         "top-k passages in rank order, or its passages drawn by Zipf popularity; passages are "
                         "tokenized by the model's tokenizer"));
  layout->addRow(tr("Documents"), source_);
  corpus_label_ = new QLabel(form);
  corpus_label_->setWordWrap(true);
  layout->addRow(tr("Corpus"), corpus_label_);
  top_k_ = spin(1, 64, 4, form);
  top_k_->setToolTip(tr("Passages BM25 retrieves per question (1-64)"));
  layout->addRow(tr("Top-k passages"), top_k_);
  connect(source_, &QComboBox::currentIndexChanged, this, &WorkloadLabPanel::updateSourceFields);
  backend_ = new QComboBox(form);
  backend_->addItem(tr("accounting (H200 step-time model)"), QStringLiteral("accounting"));
  backend_->addItem(tr("CPU (real tensors)"), QStringLiteral("cpu"));
  backend_->addItem(tr("CUDA (real tensors)"), QStringLiteral("cuda"));
  layout->addRow(tr("Backend"), backend_);
  shape_ = new QComboBox(form);
  for (const char* s : {"tiny", "small", "smollm2-135m", "llama-3.2-1b", "llama-3.1-8b", "llama-3.1-70b"})
    shape_->addItem(QString::fromLatin1(s));
  layout->addRow(tr("Model shape"), shape_);
  model_ = new QLineEdit(form);
  model_->setPlaceholderText(tr("the default model"));
  layout->addRow(tr("Model file"), model_);
  connect(backend_, &QComboBox::currentIndexChanged, this, &WorkloadLabPanel::updateBackendFields);

  documents_ = spin(1, 100000, 100, form);
  layout->addRow(tr("Documents in pool"), documents_);
  doc_tokens_ = spin(1, 131072, 2048, form);
  layout->addRow(tr("Tokens per document"), doc_tokens_);
  docs_per_request_ = spin(1, 64, 5, form);
  layout->addRow(tr("Documents per request"), docs_per_request_);
  layout_ = new QComboBox(form);
  layout_->addItem(tr("Zipf popularity"), QStringLiteral("zipf"));
  layout_->addItem(tr("cyclic window (paper script)"), QStringLiteral("window"));
  layout->addRow(tr("Layout"), layout_);
  zipf_ = new QDoubleSpinBox(form);
  zipf_->setRange(0.0, 10.0);
  zipf_->setSingleStep(0.1);
  layout->addRow(tr("Zipf α"), zipf_);
  order_ = new QComboBox(form);
  order_->addItem(tr("shuffled"), QStringLiteral("shuffled"));
  order_->addItem(tr("retrieved"), QStringLiteral("retrieved"));
  layout->addRow(tr("Document order"), order_);
  requests_ = spin(1, 1000000, 200, form);
  layout->addRow(tr("Requests"), requests_);
  arrivals_ = new QComboBox(form);
  arrivals_->addItem(tr("closed loop (clients)"));
  arrivals_->addItem(tr("open loop (Poisson rate)"));
  layout->addRow(tr("Arrivals"), arrivals_);
  concurrency_ = spin(1, 4096, 16, form);
  layout->addRow(tr("Concurrency"), concurrency_);
  rate_ = new QDoubleSpinBox(form);
  rate_->setRange(0.01, 1e6);
  rate_->setValue(10.0);
  rate_->setSuffix(tr(" req/s"));
  layout->addRow(tr("Rate"), rate_);
  auto arrivals_changed = [this] {
    concurrency_->setEnabled(arrivals_->currentIndex() == 0);
    rate_->setEnabled(arrivals_->currentIndex() == 1);
  };
  connect(arrivals_, &QComboBox::currentIndexChanged, this, arrivals_changed);
  connect(layout_, &QComboBox::currentIndexChanged, this, [this] { updateSourceFields(); });
  query_tokens_ = spin(1, 131072, 16, form);
  layout->addRow(tr("Query tokens"), query_tokens_);
  output_tokens_ = spin(1, 65536, 8, form);
  layout->addRow(tr("Output tokens"), output_tokens_);
  prefix_tokens_ = spin(0, 131072, 1, form);
  layout->addRow(tr("Shared prefix tokens"), prefix_tokens_);
  seed_ = spin(0, 2147483647, 1, form);
  layout->addRow(tr("Seed"), seed_);
  budget_ = new QLineEdit(QStringLiteral("1GiB"), form);
  budget_->setObjectName(QStringLiteral("workload_budget"));
  budget_->setToolTip(tr("KV pool of each policy: 512MiB, 1GiB, 8GB, or unlimited (accounting)"));
  layout->addRow(tr("KV budget per policy"), budget_);
  sweep_ = new QLineEdit(form);
  sweep_->setObjectName(QStringLiteral("workload_sweep"));
  sweep_->setPlaceholderText(tr("e.g. 256MiB,512MiB,1GiB (optional)"));
  sweep_->setToolTip(tr("Comma-separated budgets: every policy runs at each; replaces the budget above"));
  layout->addRow(tr("Budget sweep"), sweep_);
  block_size_ = spin(1, 1024, 16, form);
  layout->addRow(tr("Tokens per KV block"), block_size_);
  auto* policies = new QWidget(form);
  auto* pl = new QVBoxLayout(policies);
  pl->setContentsMargins(0, 0, 0, 0);
  for (const char* p : kPolicies) {
    auto* box = new QCheckBox(QString::fromLatin1(p), policies);
    box->setChecked(true);
    pl->addWidget(box);
    policy_boxes_.insert(QString::fromLatin1(p), box);
  }
  layout->addRow(tr("Policies"), policies);
  auto* buttons = new QWidget(form);
  auto* bl = new QHBoxLayout(buttons);
  bl->setContentsMargins(0, 0, 0, 0);
  run_button_ = new QPushButton(tr("Run"), buttons);
  stop_button_ = new QPushButton(tr("Stop"), buttons);
  stop_button_->setEnabled(false);
  bl->addWidget(run_button_);
  bl->addWidget(stop_button_);
  layout->addRow(buttons);
  connect(run_button_, &QPushButton::clicked, this, [this] { startRun(); });
  connect(stop_button_, &QPushButton::clicked, this, &WorkloadLabPanel::stopRun);
  progress_ = new QProgressBar(form);
  progress_->setRange(0, 1000);
  progress_->setTextVisible(false);
  layout->addRow(progress_);
  status_ = new QLabel(form);
  status_->setWordWrap(true);
  status_->setTextInteractionFlags(Qt::TextSelectableByMouse);
  layout->addRow(status_);
  arrivals_changed();
  setCorpus({}, 0);
}

void WorkloadLabPanel::setCorpus(const QString& path, int questions) {
  corpus_ = path.isEmpty() ? QStringLiteral("sample") : path;
  corpus_questions_ = questions;
  const QString name = path.isEmpty() ? tr("the bundled sample") : path;
  corpus_label_->setText(questions > 0 ? tr("%1 (%2 questions)").arg(name).arg(questions) : name);
}

void WorkloadLabPanel::updateSourceFields() {
  const QString trace = source_->currentData().toString();
  const bool corpus = !trace.isEmpty();
  const bool questions = trace == QLatin1String("questions");
  top_k_->setEnabled(questions);
  corpus_label_->setEnabled(corpus);
  // The corpus decides passage lengths; a trace also decides documents, order and queries.
  doc_tokens_->setEnabled(!corpus);
  prefix_tokens_->setEnabled(!corpus);
  for (QWidget* w : std::initializer_list<QWidget*>{documents_, docs_per_request_, layout_, order_, query_tokens_})
    w->setEnabled(!questions);
  zipf_->setEnabled(!questions && layout_->currentIndex() == 0);
  requests_->setToolTip(questions ? tr("Serve the first N questions (all of them when N is larger)") : QString());
}

void WorkloadLabPanel::updateBackendFields() {
  const bool accounting = backend_->currentData().toString() == QLatin1String("accounting");
  model_->setEnabled(!accounting);
  shape_->setEnabled(accounting);
  if (!accounting && budget_->text().trimmed() == QLatin1String("unlimited")) budget_->setText(QStringLiteral("64MiB"));
}

void WorkloadLabPanel::setDefaultModel(const QString& path) { default_model_ = path; }

void WorkloadLabPanel::applyPaperPreset() {
  setConfig(paper_preset());
  if (!running_) setStatus(tr("Paper preset: press Run (accounting mode, no model: seconds)."));
}

void WorkloadLabPanel::setConfig(const WorkloadLabConfig& c) {
  backend_->setCurrentIndex(std::max(0, backend_->findData(c.backend)));
  shape_->setCurrentText(c.shape);
  model_->setText(c.model);
  preset_ = c.preset;
  const WorkloadOptions& w = c.workload;
  documents_->setValue(w.documents);
  doc_tokens_->setValue(w.doc_tokens);
  docs_per_request_->setValue(w.docs_per_request);
  layout_->setCurrentIndex(w.layout == DocumentLayout::Zipf ? 0 : 1);
  zipf_->setValue(w.zipf);
  order_->setCurrentIndex(w.order == DocumentOrder::Shuffled ? 0 : 1);
  requests_->setValue(w.requests);
  arrivals_->setCurrentIndex(w.open_loop() ? 1 : 0);
  concurrency_->setValue(w.concurrency);
  if (w.open_loop()) rate_->setValue(w.rate);
  query_tokens_->setValue(w.query_tokens);
  output_tokens_->setValue(w.output_tokens);
  prefix_tokens_->setValue(w.prefix_tokens);
  seed_->setValue(int(w.seed));
  if (c.budgets.size() == 1) {
    budget_->setText(budget_label(c.budgets.front()));
    sweep_->clear();
  } else {
    QStringList list;
    for (qint64 b : c.budgets) list << budget_label(b);
    sweep_->setText(list.join(QLatin1Char(',')));
  }
  block_size_->setValue(c.block_size);
  source_->setCurrentIndex(c.corpus.isEmpty() ? 0 : std::max(1, source_->findData(c.trace)));
  if (!c.corpus.isEmpty() && c.corpus != corpus_) setCorpus(c.corpus == QLatin1String("sample") ? QString() : c.corpus, 0);
  top_k_->setValue(c.top_k);
  if (!c.corpus.isEmpty() && c.trace == QLatin1String("questions") && c.questions > 0) requests_->setValue(c.questions);
  for (auto it = policy_boxes_.begin(); it != policy_boxes_.end(); ++it) it.value()->setChecked(c.policies.contains(it.key()));
  updateBackendFields();
  updateSourceFields();
}

WorkloadLabConfig WorkloadLabPanel::config() const {
  WorkloadLabConfig c;
  c.backend = backend_->currentData().toString();
  c.shape = shape_->currentText();
  c.model = model_->text().trimmed();
  if (c.backend != QLatin1String("accounting") && c.model.isEmpty()) c.model = default_model_;
  c.preset = preset_;
  WorkloadOptions& w = c.workload;
  w.documents = documents_->value();
  w.doc_tokens = doc_tokens_->value();
  w.docs_per_request = docs_per_request_->value();
  w.layout = layout_->currentIndex() == 0 ? DocumentLayout::Zipf : DocumentLayout::Window;
  w.zipf = zipf_->value();
  w.order = order_->currentIndex() == 0 ? DocumentOrder::Shuffled : DocumentOrder::Retrieved;
  w.requests = requests_->value();
  w.concurrency = concurrency_->value();
  w.rate = arrivals_->currentIndex() == 1 ? rate_->value() : 0.0;
  w.query_tokens = query_tokens_->value();
  w.output_tokens = output_tokens_->value();
  w.prefix_tokens = prefix_tokens_->value();
  w.seed = uint64_t(seed_->value());
  c.budgets.clear();
  if (sweep_->text().trimmed().isEmpty()) {
    c.budgets.push_back(parse_budget(budget_->text(), "KV budget"));
  } else {
    for (const QString& item : sweep_->text().split(QLatin1Char(','), Qt::SkipEmptyParts))
      c.budgets.push_back(parse_budget(item, "Budget sweep"));
    if (c.budgets.isEmpty()) throw Error("Budget sweep: empty list (expected e.g. 512MiB,1GiB,unlimited)");
  }
  c.block_size = block_size_->value();
  c.trace = source_->currentData().toString();
  if (!c.trace.isEmpty()) {
    c.corpus = corpus_;
    c.top_k = top_k_->value();
    c.questions = c.trace == QLatin1String("questions") ? requests_->value() : 0;
  } else {
    c.trace = QStringLiteral("questions");
  }
  c.policies.clear();
  for (const char* p : kPolicies) {
    if (policy_boxes_.value(QString::fromLatin1(p))->isChecked()) c.policies << QString::fromLatin1(p);
  }
  if (c.policies.isEmpty()) throw Error("Policies: choose at least one of none, prefix, positional, materialized, lazy");
  validate(c.workload);
  return c;
}

bool WorkloadLabPanel::startRun() {
  if (running_) {
    setStatus(tr("A workload is already running; press Stop first."));
    return false;
  }
  WorkloadLabConfig c;
  try {
    c = config();
  } catch (const std::exception& e) {
    setStatus(tr("Cannot run: %1").arg(QString::fromUtf8(e.what())));
    return false;
  }
  if (c.backend != QLatin1String("accounting") && c.model.isEmpty()) {
    setStatus(tr("Cannot run: the %1 backend needs a model file (none given and no default model)").arg(c.backend));
    return false;
  }
  // The previous results stay on screen while the model loads and the workload is made; they
  // go when the worker says the workload is ready (a load stopped or failed keeps them).
  pending_config_ = c;
  workload_ready_ = false;
  stop_requested_ = false;
  error_.clear();
  running_ = true;
  run_button_->setEnabled(false);
  stop_button_->setEnabled(true);
  progress_->setValue(0);
  setStatus(tr("starting…"));
  worker_->clearStop();
  Q_EMIT runBegan(c.backend == QLatin1String("accounting")
                      ? tr("Workload (%1 shape)").arg(c.shape)
                      : tr("Workload (%1, %2)").arg(c.backend, QFileInfo(c.model).fileName()));
  QMetaObject::invokeMethod(worker_, "run", Qt::QueuedConnection, Q_ARG(lazyscope::workbench::WorkloadLabConfig, c));
  return true;
}

void WorkloadLabPanel::clearResults() {
  results_.clear();
  resetPlots();
  workload_.reset();
  prompts_ = {};
  replay_ = false;
  replay_metadata_.clear();
  streamed_requests_ = 0;
}

void WorkloadLabPanel::stopRun() {
  if (!running_) return;
  stop_requested_ = true;
  worker_->requestStop();
  setStatus(workload_ready_ ? tr("stopping…") : tr("stopping the model load…"));
}

QString WorkloadLabPanel::statusText() const { return status_->text(); }

void WorkloadLabPanel::setStatus(const QString& text) { status_->setText(text); }

void WorkloadLabPanel::resetPlots() {
  selected_run_ = -1;
  requests_stale_ = false;
  request_rows_.setRun(nullptr);
  details_->clear();
  details_html_.clear();
  hit_plot_->clearGraphs();
  live_charts_->clear();
  pools_->clear();
  comparison_->setResults({});
  live_.clear();
  dirty_ = true;
}

void WorkloadLabPanel::onRunStarted(const WorkloadRunKey& key, int num_blocks) {
  bool several_budgets = false;
  for (const Live& l : live_) several_budgets |= l.budget != key.budget;
  Live l;
  l.policy = key.policy;
  l.budget = key.budget;
  l.num_blocks = num_blocks;
  l.hit = hit_plot_->addGraph();
  l.hit->setName(run_label(key.policy, key.budget, several_budgets));
  QPen pen(policy_color(key.policy), 2.0);
  l.hit->setPen(pen);
  live_.insert(key.run, l);
  live_charts_->addRun(key.run, l.hit->name(), policy_color(key.policy));
  pools_->addRun(key.run, l.hit->name(), num_blocks);
  dirty_ = true;
}

void WorkloadLabPanel::onRequests(const WorkloadRunKey& key, const QVector<RequestRecord>& records) {
  auto it = live_.find(key.run);
  if (it == live_.end()) return;
  Live& l = it.value();
  QVector<double> xs, ys;
  xs.reserve(records.size());
  ys.reserve(records.size());
  for (const RequestRecord& r : records) {
    // The scheduler's own definition: document + query tokens, the prefix left out.
    l.tokens += r.prompt_tokens - r.prefix_tokens;
    l.cached_tokens += r.cached_document_tokens;
    xs.push_back(r.finish_s);
    ys.push_back(l.tokens ? 100.0 * double(l.cached_tokens) / double(l.tokens) : 0.0);
  }
  l.hit->addData(xs, ys, true);
  live_charts_->addRequests(key.run, records);
  streamed_requests_ += records.size();
  dirty_ = true;
}

double WorkloadLabPanel::liveHitRatio(const QString& policy, qint64 budget) const {
  for (const Live& l : live_) {
    if (l.policy == policy && l.budget == budget) return l.tokens ? 100.0 * double(l.cached_tokens) / double(l.tokens) : 0.0;
  }
  return -1.0;
}

void WorkloadLabPanel::onRunFinished(const WorkloadRunKey&, const ServingResult& result) {
  results_.add(result);
  if (selected_run_ < 0) selectRun(0);
  comparison_->setResults(results_.results());
  dirty_ = true;
}

void WorkloadLabPanel::onFinished(bool cancelled) {
  running_ = false;
  run_button_->setEnabled(true);
  stop_button_->setEnabled(false);
  kept_previous_ = !workload_ready_;
  if (!error_.isEmpty()) {
    setStatus(hasResults() ? tr("Error: %1 (the results shown are the previous run's)").arg(error_)
                           : tr("Error: %1").arg(error_));
  } else if (cancelled && !workload_ready_) {
    setStatus(hasResults()
                  ? tr("Stopped before the first run (while loading); the previous results stay")
                  : tr("Stopped before the first run (while loading); nothing ran"));
  } else {
    setStatus(cancelled ? tr("Stopped: %1 runs completed or cut short").arg(results_.rowCount())
                        : tr("Done: %1 runs").arg(results_.rowCount()));
  }
  dirty_ = true;
  replotVisible();
  Q_EMIT runFinished(cancelled);
}

void WorkloadLabPanel::replotVisible() {
  if (!isVisible()) return;  // shown again: the next tick draws
  live_charts_->replotVisible();
  if (!dirty_) return;
  dirty_ = false;
  if (hit_plot_->isVisible()) {
    hit_plot_->xAxis->rescale();
    hit_plot_->replot(QCustomPlot::rpQueuedReplot);
  }
}

void WorkloadLabPanel::selectRun(int row) {
  if (row < 0 || row >= results_.rowCount()) return;
  table_->selectRow(row);
  onRunSelected(row);
}

void WorkloadLabPanel::selectRequest(int row) {
  if (requests_stale_) {
    requests_stale_ = false;
    request_rows_.setRun(results_.resultAt(selected_run_));
  }
  if (row < 0 || row >= request_rows_.rowCount()) return;
  requests_table_->selectRow(row);
  onRequestSelected(row);
}

void WorkloadLabPanel::onRunSelected(int row) {
  const ServingResult* run = results_.resultAt(row);
  if (!run || row == selected_run_) return;
  selected_run_ = row;
  requests_stale_ = true;
  request_rows_.setRun(nullptr);
  details_->clear();
  details_html_.clear();
  fillRequestsIfShown();
}

void WorkloadLabPanel::fillRequestsIfShown() {
  // The request list is filled when the Requests tab is on screen (or asked for), not per row added.
  if (!requests_stale_ || tabs_->currentWidget() != requests_table_->parentWidget()) return;
  requests_stale_ = false;
  request_rows_.setRun(results_.resultAt(selected_run_));
}

void WorkloadLabPanel::onRequestSelected(int row) {
  const ServingResult* run = results_.resultAt(selected_run_);
  const RequestRecord* record = request_rows_.recordAt(row);
  if (!run || !record) return;
  details_html_ = request_details_html(*run, *record, prompts_, bytes_per_block_);
  details_->setHtml(details_html_);
}

QString WorkloadLabPanel::requestDetailsHtml() const { return details_html_; }

std::map<std::string, std::string> WorkloadLabPanel::reportMetadata() const {
  if (replay_) return replay_metadata_;
  // The keys `lazyscope-cli workload --record` writes, from the config of the last run.
  const WorkloadLabConfig& c = last_config_;
  const WorkloadOptions& w = workload_ ? workload_->options : c.workload;
  std::map<std::string, std::string> m;
  auto put = [&m](const char* key, const std::string& value) { m[std::string("workload.") + key] = value; };
  put("origin", "workbench Workload Lab");
  put("backend", c.backend.toStdString());
  put("model", (c.backend == QLatin1String("accounting") || c.model.isEmpty() ? c.shape : c.model).toStdString());
  put("preset", c.preset.toStdString());
  put("documents", std::to_string(w.documents));
  put("doc_tokens", std::to_string(w.doc_tokens));
  put("docs_per_request", std::to_string(w.docs_per_request));
  put("zipf", std::to_string(w.zipf));
  put("layout", to_string(w.layout));
  put("doc_order", to_string(w.order));
  put("requests", std::to_string(w.requests));
  put("concurrency", w.open_loop() ? "null" : std::to_string(w.concurrency));
  put("rate", w.open_loop() ? std::to_string(w.rate) : "null");
  put("query_tokens", std::to_string(w.query_tokens));
  put("output_tokens", std::to_string(w.output_tokens));
  put("prefix_tokens", std::to_string(w.prefix_tokens));
  put("seed", std::to_string(w.seed));
  put("block_size", std::to_string(c.block_size));
  put("step_tokens", std::to_string(c.step_tokens));
  put("bytes_per_block", std::to_string(bytes_per_block_));
  if (!c.corpus.isEmpty()) {
    put("corpus", c.corpus.toStdString());
    put("trace", c.trace.toStdString());
    if (c.trace == QLatin1String("questions")) put("top_k", std::to_string(c.top_k));
  }
  if (workload_) put("source", workload_->source);
  return m;
}

void WorkloadLabPanel::showReport(const WorkloadReport& report, const QString& path) {
  if (running_) stopRun();
  results_.clear();
  resetPlots();
  workload_.reset();
  streamed_requests_ = 0;
  error_.clear();
  replay_ = true;
  replay_metadata_ = report.metadata;
  prompts_ = report.prompts;
  const auto bpb = report.metadata.find("workload.bytes_per_block");
  bytes_per_block_ = bpb == report.metadata.end() ? 0 : std::atoll(bpb->second.c_str());
  // The saved runs go through the same paths as a live run's stream, so the plots are the same.
  for (std::size_t i = 0; i < report.runs.size(); ++i) {
    const ServingResult& r = report.runs[i];
    const WorkloadRunKey key{int(i), QString::fromStdString(r.policy), r.kv_budget_bytes};
    onRunStarted(key, r.num_blocks);
    live_charts_->addSteps(key.run, QVector<StepSample>(r.samples.begin(), r.samples.end()));
    QVector<RequestRecord> finished;
    for (const RequestRecord& q : r.records) {
      if (q.output_tokens > 0) finished.push_back(q);
    }
    std::stable_sort(finished.begin(), finished.end(),
                     [](const RequestRecord& a, const RequestRecord& b) { return a.finish_s < b.finish_s; });
    onRequests(key, finished);
    onRunFinished(key, r);
  }
  progress_->setValue(1000);
  setStatus(tr("Replayed from the session report %1: %2 runs (no engine run; the pool maps are not saved)")
                .arg(path)
                .arg(report.runs.size()));
  dirty_ = true;
  replotVisible();
}

}  // namespace lazyscope::workbench

// qcustomplot.h uses Qt's lower-case keywords; this file includes no engine backend header.
#undef QT_NO_KEYWORDS
#include "app/workbench/views/evaluation_panel.h"

#include <qcustomplot.h>

#include <QCheckBox>
#include <QComboBox>
#include <QFileDialog>
#include <QGridLayout>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QLabel>
#include <QProgressBar>
#include <QPushButton>
#include <QSpinBox>
#include <QSplitter>
#include <QTableView>
#include <QTextBrowser>
#include <QVBoxLayout>
#include <optional>

#include "app/workbench/evaluation_worker.h"
#include "app/workbench/views/cache_stats_view.h"
#include "corpora/document_store.h"
#include "corpora/sample_corpus.h"

namespace lazyscope::workbench {
namespace {

struct ConfigChoice {
  const char* key;
  Mode mode;
  Policy policy;
  bool checked;
};

const ConfigChoice kChoices[] = {
    {"full/none", Mode::Full, Policy::None, true},
    {"full/prefix", Mode::Full, Policy::Prefix, false},
    {"block/lazy", Mode::Block, Policy::Lazy, true},
    {"block/materialized", Mode::Block, Policy::Materialized, true},
    {"block/positional", Mode::Block, Policy::Positional, false},
    {"block/none", Mode::Block, Policy::None, false},
};

QColor config_color(const std::string& key) {
  const auto slash = key.find('/');
  const QString mode = QString::fromStdString(key.substr(0, slash));
  const QString policy = QString::fromStdString(key.substr(slash + 1));
  if (mode == QLatin1String("full"))
    return policy_color(policy == QLatin1String("prefix") ? policy : mode);
  return policy_color(policy);
}

QString format_seconds(double seconds) {
  if (seconds < 0) return QStringLiteral("?");
  const int s = int(seconds + 0.5);
  if (s >= 3600) return QStringLiteral("%1 h %2 min").arg(s / 3600).arg((s / 60) % 60);
  if (s >= 60) return QStringLiteral("%1 min %2 s").arg(s / 60).arg(s % 60);
  return QStringLiteral("%1 s").arg(s);
}

}  // namespace

EvaluationPanel::EvaluationPanel(QWidget* parent) : QWidget(parent) {
  register_evaluation_metatypes();
  auto* layout = new QVBoxLayout(this);
  layout->setContentsMargins(4, 4, 4, 4);

  auto* controls = new QHBoxLayout;
  source_ = new QComboBox(this);
  source_->setToolTip(tr(
      "Which questions to run: the bundled sample's, or those the open corpus was imported with"));
  limit_ = new QSpinBox(this);
  limit_->setRange(0, 100000);
  limit_->setValue(20);
  limit_->setSpecialValueText(tr("all"));
  limit_->setToolTip(
      tr("Run the first N questions (0 = all). On the CPU a question takes seconds per "
         "configuration."));
  retrieval_ = new QComboBox(this);
  retrieval_->addItems({QStringLiteral("bm25"), QStringLiteral("gold")});
  retrieval_->setToolTip(
      tr("bm25: the top-k passages for the question; gold: the question's gold passages"));
  k_ = new QSpinBox(this);
  k_->setRange(1, 64);
  k_->setValue(4);
  k_->setToolTip(tr("Passages per question (bm25)"));
  max_tokens_ = new QSpinBox(this);
  max_tokens_->setRange(1, 512);
  max_tokens_->setValue(24);
  max_tokens_->setToolTip(tr("Tokens generated per answer"));
  controls->addWidget(new QLabel(tr("Questions:"), this));
  controls->addWidget(source_);
  controls->addWidget(new QLabel(tr("first"), this));
  controls->addWidget(limit_);
  controls->addWidget(new QLabel(tr("retrieval"), this));
  controls->addWidget(retrieval_);
  controls->addWidget(new QLabel(tr("k"), this));
  controls->addWidget(k_);
  controls->addWidget(new QLabel(tr("max tokens"), this));
  controls->addWidget(max_tokens_);
  controls->addStretch(1);
  layout->addLayout(controls);
  // Short rows: the panel sits between the side docks, and one long row would widen the window.
  auto* configs = new QHBoxLayout;
  configs->addWidget(new QLabel(tr("Mode/policy:"), this));
  auto* boxes = new QGridLayout;
  boxes->setHorizontalSpacing(10);
  boxes->setVerticalSpacing(0);
  for (const ConfigChoice& choice : kChoices) {
    auto* box = new QCheckBox(QString::fromLatin1(choice.key), this);
    box->setChecked(choice.checked);
    box->setToolTip(tr("Run this mode/policy on its own KV pool"));
    const int i = int(config_boxes_.size());
    boxes->addWidget(box, i / 3, i % 3);
    config_boxes_.push_back(box);
  }
  configs->addLayout(boxes);
  configs->addStretch(1);
  layout->addLayout(configs);
  auto* actions = new QHBoxLayout;
  run_ = new QPushButton(tr("Run evaluation"), this);
  stop_ = new QPushButton(tr("Stop"), this);
  open_ = new QPushButton(tr("Open results…"), this);
  open_->setToolTip(tr("Show the results of lazyscope-cli eval --json FILE"));
  progress_ = new QProgressBar(this);
  progress_->setRange(0, 1);
  progress_->setValue(0);
  progress_->setMaximumWidth(160);
  status_ = new QLabel(tr("Load a model, then press Run evaluation."), this);
  status_->setMinimumWidth(80);
  status_->setSizePolicy(QSizePolicy::Ignored, QSizePolicy::Preferred);
  actions->addWidget(run_);
  actions->addWidget(stop_);
  actions->addWidget(open_);
  actions->addWidget(progress_);
  actions->addWidget(status_, 1);
  layout->addLayout(actions);

  // Top: chart beside the summary; below: the questions table (a splitter between them).
  auto* rows = new QSplitter(Qt::Vertical, this);
  auto* top = new QSplitter(Qt::Horizontal, rows);
  chart_ = new QCustomPlot(top);
  chart_->setMinimumSize(240, 160);
  chart_->plotLayout()->insertRow(0);
  chart_->plotLayout()->addElement(0, 0,
                                   new QCPTextElement(chart_, tr("Answer quality per mode/policy"),
                                                      QFont(font().family(), 9, QFont::Bold)));
  chart_->yAxis->setLabel(tr("%"));
  // The legend gets its own row under the axes so it never hides a bar.
  QFont legend_font = font();
  legend_font.setPointSizeF(legend_font.pointSizeF() * 0.85);
  chart_->legend->setFont(legend_font);
  chart_->legend->setBorderPen(Qt::NoPen);
  auto* legend_row = new QCPLayoutGrid;
  chart_->plotLayout()->addElement(2, 0, legend_row);
  chart_->axisRect()->insetLayout()->take(chart_->legend);
  legend_row->addElement(0, 0, chart_->legend);
  chart_->legend->setFillOrder(QCPLegend::foColumnsFirst);
  chart_->legend->setWrap(3);
  chart_->plotLayout()->setRowStretchFactor(2, 0.001);
  auto* summary_box = new QWidget(top);
  auto* summary_layout = new QVBoxLayout(summary_box);
  summary_layout->setContentsMargins(0, 0, 0, 0);
  summary_ = new QTextBrowser(summary_box);  // scrolls instead of widening the window
  summary_->setFrameShape(QFrame::NoFrame);
  summary_->setMinimumWidth(120);
  summary_->viewport()->setAutoFillBackground(false);
  note_ = new QLabel(summary_box);
  note_->setWordWrap(true);
  note_->setSizePolicy(QSizePolicy::Ignored, QSizePolicy::Preferred);
  note_->setStyleSheet(QStringLiteral("QLabel { color: #a01010; font-weight: bold; }"));
  note_->hide();
  summary_layout->addWidget(summary_, 1);
  summary_layout->addWidget(note_);
  top->addWidget(chart_);
  top->addWidget(summary_box);
  top->setStretchFactor(0, 2);
  top->setStretchFactor(1, 3);
  auto* bottom = new QWidget(rows);
  auto* bottom_layout = new QVBoxLayout(bottom);
  bottom_layout->setContentsMargins(0, 0, 0, 0);
  disagreements_only_ = new QCheckBox(
      tr("Only questions where the configurations disagree (click one to load it)"), bottom);
  disagreements_only_->setChecked(true);
  table_ = new QTableView(bottom);
  table_->setModel(&model_);
  table_->setSelectionBehavior(QAbstractItemView::SelectRows);
  table_->setSelectionMode(QAbstractItemView::SingleSelection);
  table_->setWordWrap(false);
  table_->horizontalHeader()->setStretchLastSection(true);
  table_->verticalHeader()->setVisible(false);
  table_->verticalHeader()->setDefaultSectionSize(fontMetrics().height() + 6);
  bottom_layout->addWidget(disagreements_only_);
  bottom_layout->addWidget(table_, 1);
  rows->addWidget(top);
  rows->addWidget(bottom);
  rows->setStretchFactor(0, 3);
  rows->setStretchFactor(1, 2);
  layout->addWidget(rows, 1);

  worker_ = new EvaluationWorker;
  worker_->moveToThread(&thread_);
  connect(&thread_, &QThread::finished, worker_, &QObject::deleteLater);
  thread_.setObjectName(QStringLiteral("lazyscope-evaluation"));
  thread_.start();
  connect(worker_, &EvaluationWorker::status, status_, &QLabel::setText);
  connect(worker_, &EvaluationWorker::started, this, &EvaluationPanel::onStarted);
  connect(worker_, &EvaluationWorker::questionFinished, this, &EvaluationPanel::onQuestion);
  connect(worker_, &EvaluationWorker::finished, this, &EvaluationPanel::onFinished);
  connect(worker_, &EvaluationWorker::failed, this, &EvaluationPanel::onFailed);
  connect(run_, &QPushButton::clicked, this, [this] { start(); });
  connect(stop_, &QPushButton::clicked, this, &EvaluationPanel::stop);
  connect(open_, &QPushButton::clicked, this, [this] {
    const QString path = QFileDialog::getOpenFileName(
        this, tr("Open evaluation results"), {}, tr("Evaluation JSON (*.json);;All files (*)"));
    if (!path.isEmpty()) openResults(path);
  });
  connect(disagreements_only_, &QCheckBox::toggled, &model_,
          &EvaluationModel::setDisagreementsOnly);
  connect(table_, &QTableView::clicked, this, &EvaluationPanel::activateRow);
  connect(&model_, &EvaluationModel::reportChanged, this, &EvaluationPanel::replot);
  setCorpus(QString(), 0);
  setRunning(false);
  replot();
}

EvaluationPanel::~EvaluationPanel() {
  worker_->requestStop();
  thread_.quit();
  thread_.wait();
}

void EvaluationPanel::setModel(const QString& name, const QString& path, const QString& backend,
                               qint64 kv_budget_bytes) {
  model_name_ = name;
  model_path_ = path;
  backend_ = backend;
  kv_budget_bytes_ = kv_budget_bytes;
  model_ready_ = true;
  if (!running_) status_->setText(tr("Ready: %1 on %2.").arg(name, backend));
  setRunning(running_);
}

void EvaluationPanel::setCorpus(const QString& path, int question_count) {
  corpus_path_ = path;
  corpus_questions_ = question_count;
  source_->clear();
  source_->addItem(tr("bundled sample"));
  if (!path.isEmpty() && question_count > 0) {
    source_->addItem(tr("open corpus (%1 questions)").arg(question_count));
    source_->setCurrentIndex(1);
  }
}

void EvaluationPanel::setLimit(int limit) { limit_->setValue(limit); }

void EvaluationPanel::setConfigChecked(const QString& key, bool checked) {
  for (QCheckBox* box : config_boxes_) {
    if (box->text() == key) box->setChecked(checked);
  }
}

bool EvaluationPanel::start() {
  if (running_ || !model_ready_) return false;
  EvaluationPlan plan;
  plan.model_path = model_path_;
  plan.backend = backend_;
  plan.kv_budget_bytes = kv_budget_bytes_;
  const bool use_corpus = source_->currentIndex() == 1;
  plan.corpus_path = use_corpus ? corpus_path_ : QString();
  plan.corpus_questions = use_corpus;
  plan.limit = limit_->value();
  for (std::size_t i = 0; i < config_boxes_.size(); ++i) {
    if (config_boxes_[i]->isChecked())
      plan.configs.push_back({kChoices[i].mode, kChoices[i].policy});
  }
  if (plan.configs.empty()) {
    status_->setText(tr("Tick at least one mode/policy."));
    return false;
  }
  plan.options.retrieval =
      retrieval_->currentIndex() == 1 ? corpora::Retrieval::gold : corpora::Retrieval::bm25;
  plan.options.k = k_->value();
  plan.options.max_new_tokens = max_tokens_->value();
  if (system_text_) plan.options.system = system_text_().trimmed().toStdString();
  if (chat_mode_) plan.options.chat = chat_mode_();
  worker_->clearStop();
  setRunning(true);
  progress_->setRange(0, 0);  // busy until the session is loaded
  QMetaObject::invokeMethod(worker_, "run", Qt::QueuedConnection,
                            Q_ARG(lazyscope::workbench::EvaluationPlan, plan));
  Q_EMIT evaluationStarted();
  return true;
}

void EvaluationPanel::stop() {
  if (!running_) return;
  worker_->requestStop();
  status_->setText(tr("Stopping after the current request…"));
}

bool EvaluationPanel::openResults(const QString& path) {
  if (running_) return false;
  try {
    model_.setReport(corpora::load_report_json(std::filesystem::path(path.toStdString())));
  } catch (const std::exception& e) {
    status_->setText(tr("Could not open the results: %1").arg(QString::fromUtf8(e.what())));
    return false;
  }
  setRunning(false);
  status_->setText(tr("Results from %1.").arg(path));
  return true;
}

void EvaluationPanel::onStarted(const std::vector<corpora::EvalConfig>& configs, int total,
                                const QString& model) {
  model_.start(configs, model, total);
  progress_->setRange(0, total);
  progress_->setValue(0);
}

void EvaluationPanel::onQuestion(const corpora::QuestionResult& result, int done, int total,
                                 double remaining_s) {
  model_.add(result);
  progress_->setValue(done);
  status_->setText(tr("Question %1 of %2 (%3), about %4 left")
                       .arg(done)
                       .arg(total)
                       .arg(QString::fromStdString(result.question.id))
                       .arg(format_seconds(remaining_s)));
  Q_EMIT progressChanged(total > 0 ? double(done) / total : 0.0, status_->text());
}

void EvaluationPanel::onFinished(bool cancelled, double wall_seconds,
                                 const QList<double>& config_seconds) {
  setRunning(false);
  model_.setConfigSeconds(std::vector<double>(config_seconds.begin(), config_seconds.end()));
  const int done = int(model_.report().questions.size());
  status_->setText(
      cancelled ? tr("Stopped: %1 of %2 questions finished (kept).")
                      .arg(done)
                      .arg(model_.report().planned_questions)
                : tr("Finished %1 questions in %2.").arg(done).arg(format_seconds(wall_seconds)));
  Q_EMIT evaluationFinished(cancelled);
}

void EvaluationPanel::onFailed(const QString& message) {
  setRunning(false);
  status_->setText(tr("Evaluation failed: %1").arg(message));
  Q_EMIT evaluationFinished(true);
}

void EvaluationPanel::setRunning(bool running) {
  running_ = running;
  run_->setEnabled(!running && model_ready_);
  stop_->setEnabled(running);
  if (!running) {
    progress_->setRange(0, std::max(1, model_.report().planned_questions));
    progress_->setValue(int(model_.report().questions.size()));
  }
}

void EvaluationPanel::activateRow(const QModelIndex& index) {
  if (!index.isValid()) return;
  const corpora::QuestionResult& q = model_.question(index.row());
  std::vector<DocumentEntry> passages;
  // Results opened from a file carry passage ids only: their texts come from the corpus the
  // evaluation ran on (else the open corpus).
  std::optional<corpora::DocumentStore> store;
  if (q.passage_texts.size() < q.passage_ids.size()) {
    try {
      const std::string& ran_on = model_.report().corpus;
      std::filesystem::path db =
          !ran_on.empty() && std::filesystem::exists(ran_on) ? std::filesystem::path(ran_on)
          : corpus_path_.isEmpty()                           ? corpora::default_sample_corpus_db()
                                   : std::filesystem::path(corpus_path_.toStdString());
      store.emplace(corpora::DocumentStore::open(db, corpora::DocumentStore::Mode::read_only));
    } catch (const std::exception& e) {
      status_->setText(tr("Passages not found: %1").arg(QString::fromUtf8(e.what())));
    }
  }
  for (std::size_t i = 0; i < q.passage_ids.size(); ++i) {
    DocumentEntry d;
    d.id = QString::fromStdString(q.passage_ids[i]);
    d.rank = int(i) + 1;
    if (i < q.passage_texts.size()) {
      d.title =
          i < q.passage_titles.size() ? QString::fromStdString(q.passage_titles[i]) : QString();
      d.text = QString::fromStdString(q.passage_texts[i]);
    } else if (store) {
      const std::optional<corpora::Document> doc = store->find(q.passage_ids[i]);
      if (!doc) continue;
      d.rowid = doc->rowid;
      d.title = QString::fromStdString(doc->title);
      d.text = QString::fromStdString(doc->text);
    } else {
      continue;
    }
    passages.push_back(d);
  }
  Q_EMIT questionActivated(QString::fromStdString(q.question.question), passages);
}

int EvaluationPanel::chartBarCount() const { return chart_->plottableCount(); }

QString EvaluationPanel::summaryText() const { return summary_->toPlainText(); }
QString EvaluationPanel::noteText() const { return note_->isVisible() ? note_->text() : QString(); }

void EvaluationPanel::replot() {
  const corpora::EvalReport& report = model_.report();
  const std::vector<corpora::ConfigSummary> summaries = report.summaries();
  chart_->clearPlottables();
  auto* group = new QCPBarsGroup(chart_);
  group->setSpacingType(QCPBarsGroup::stAbsolute);
  group->setSpacing(2.0);
  const double width = 0.8 / double(std::max<std::size_t>(1, summaries.size()));
  for (const corpora::ConfigSummary& s : summaries) {
    auto* bars = new QCPBars(chart_->xAxis, chart_->yAxis);
    bars->setName(QString::fromStdString(s.key));
    const QColor color = config_color(s.key);
    bars->setPen(QPen(color.darker(130)));
    bars->setBrush(color);
    bars->setWidth(width);
    bars->setBarsGroup(group);
    bars->setData({1, 2, 3}, {100 * s.exact_match, 100 * s.contains, 100 * s.f1});
  }
  QSharedPointer<QCPAxisTickerText> ticker(new QCPAxisTickerText);
  ticker->addTick(1, tr("EM"));
  ticker->addTick(2, tr("contains"));
  ticker->addTick(3, tr("F1"));
  chart_->xAxis->setTicker(ticker);
  chart_->xAxis->setRange(0.4, 3.6);
  chart_->yAxis->setRange(0, 105);
  chart_->legend->setVisible(!summaries.empty());
  chart_->replot();

  if (report.questions.empty()) {
    summary_->setText(tr(
        "No evaluation yet. <i>Exact match</i>: the normalised answer (lower case, no punctuation "
        "or articles) equals a gold answer; <i>contains gold</i>: a gold answer occurs in it."));
    note_->hide();
    return;
  }
  QString html =
      tr("<b>%1</b> of %2 questions, %3<br><table cellspacing=0 cellpadding=2>"
         "<tr><th align=left>configuration</th><th>EM %</th><th>contains %</th><th>F1 %</th>"
         "<th>recall@k</th><th>hit %</th><th>TTFT p50</th><th>tokens/s</th></tr>")
          .arg(report.questions.size())
          .arg(report.planned_questions)
          .arg(QString::fromStdString(report.model).toHtmlEscaped());
  for (const corpora::ConfigSummary& s : summaries) {
    html +=
        QStringLiteral(
            "<tr><td>%1</td><td align=right>%2</td><td align=right>%3</td><td align=right>%4</td>"
            "<td align=right>%5</td><td align=right>%6</td><td align=right>%7 ms</td>"
            "<td align=right>%8</td></tr>")
            .arg(QString::fromStdString(s.key))
            .arg(100 * s.exact_match, 0, 'f', 1)
            .arg(100 * s.contains, 0, 'f', 1)
            .arg(100 * s.f1, 0, 'f', 1)
            .arg(s.recall, 0, 'f', 2)
            .arg(100 * s.token_hit_ratio, 0, 'f', 1)
            .arg(s.ttft_p50_ms, 0, 'f', 0)
            .arg(s.output_tokens_per_s, 0, 'f', 1);
  }
  html += QStringLiteral("</table>");
  html += tr("Disagreements: %1 of %2 questions. %3")
              .arg(model_.disagreements())
              .arg(report.questions.size())
              .arg(QString::fromStdString(report.identity().describe()).toHtmlEscaped());
  summary_->setText(html);
  const QString note = QString::fromStdString(report.block_quality_note());
  note_->setText(note);
  note_->setVisible(!note.isEmpty());
}

}  // namespace lazyscope::workbench

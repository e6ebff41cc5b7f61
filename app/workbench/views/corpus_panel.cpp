#include "app/workbench/views/corpus_panel.h"

#include <QHBoxLayout>
#include <QHeaderView>
#include <QLabel>
#include <QLineEdit>
#include <QListView>
#include <QListWidget>
#include <QPushButton>
#include <QSortFilterProxyModel>
#include <QSpinBox>
#include <QSplitter>
#include <QTabWidget>
#include <QTableView>
#include <QTextBrowser>
#include <QVBoxLayout>

#include "app/workbench/corpus_source.h"

namespace lazyscope::workbench {
namespace {

QTableView* make_table(QAbstractItemModel* model, QWidget* parent) {
  auto* view = new QTableView(parent);
  view->setModel(model);
  view->setSelectionBehavior(QAbstractItemView::SelectRows);
  view->setSelectionMode(QAbstractItemView::ExtendedSelection);
  view->verticalHeader()->hide();
  view->verticalHeader()->setDefaultSectionSize(22);
  view->horizontalHeader()->setSectionResizeMode(DocumentListModel::TitleColumn,
                                                 QHeaderView::Stretch);
  view->horizontalHeader()->setSectionResizeMode(DocumentListModel::RankColumn,
                                                 QHeaderView::ResizeToContents);
  view->horizontalHeader()->setSectionResizeMode(DocumentListModel::ScoreColumn,
                                                 QHeaderView::ResizeToContents);
  view->horizontalHeader()->setSectionResizeMode(DocumentListModel::WordsColumn,
                                                 QHeaderView::ResizeToContents);
  view->setAlternatingRowColors(true);
  view->setEditTriggers(QAbstractItemView::NoEditTriggers);
  return view;
}

}  // namespace

CorpusPanel::CorpusPanel(QWidget* parent) : QWidget(parent) {
  auto* layout = new QVBoxLayout(this);
  layout->setContentsMargins(6, 6, 6, 6);
  corpus_label_ = new QLabel(tr("No corpus loaded"), this);
  corpus_label_->setWordWrap(true);
  layout->addWidget(corpus_label_);

  auto* ask = new QHBoxLayout;
  question_ = new QLineEdit(this);
  question_->setPlaceholderText(tr("Ask a question… (Enter runs BM25)"));
  top_k_ = new QSpinBox(this);
  top_k_->setRange(1, 50);
  top_k_->setValue(4);
  top_k_->setPrefix(tr("top-"));
  auto* search_button = new QPushButton(tr("Search"), this);
  ask->addWidget(question_, 1);
  ask->addWidget(top_k_);
  ask->addWidget(search_button);
  layout->addLayout(ask);
  connect(question_, &QLineEdit::returnPressed, this, &CorpusPanel::search);
  connect(search_button, &QPushButton::clicked, this, &CorpusPanel::search);
  connect(question_, &QLineEdit::textChanged, this, &CorpusPanel::questionChanged);

  auto* splitter = new QSplitter(Qt::Vertical, this);
  layout->addWidget(splitter, 1);

  tabs_ = new QTabWidget(splitter);
  // Retrieval tab: BM25 hits with scores.
  auto* retrieve = new QWidget(tabs_);
  auto* retrieve_layout = new QVBoxLayout(retrieve);
  retrieve_layout->setContentsMargins(2, 2, 2, 2);
  results_view_ = make_table(&results_, retrieve);
  retrieve_layout->addWidget(results_view_, 1);
  auto* result_buttons = new QHBoxLayout;
  auto* add_selected = new QPushButton(tr("Add to prompt ▾"), retrieve);
  auto* use_top = new QPushButton(tr("Use top-k as prompt"), retrieve);
  result_buttons->addWidget(add_selected);
  result_buttons->addWidget(use_top);
  result_buttons->addStretch();
  retrieve_layout->addLayout(result_buttons);
  connect(add_selected, &QPushButton::clicked, this, &CorpusPanel::addFromResults);
  connect(use_top, &QPushButton::clicked, this, [this] { useTopHits(top_k_->value()); });
  connect(results_view_, &QTableView::doubleClicked, this, &CorpusPanel::addFromResults);
  tabs_->addTab(retrieve, tr("BM25 results"));

  // Sample questions from the corpus.
  samples_ = new QListWidget(tabs_);
  samples_->setWordWrap(true);
  samples_->setAlternatingRowColors(true);
  connect(samples_, &QListWidget::itemActivated, this, [this](QListWidgetItem* item) {
    setQuestion(item->text());
    search();
    tabs_->setCurrentIndex(0);
  });
  tabs_->addTab(samples_, tr("Sample questions"));

  // Browser: every passage, filterable by title.
  auto* browse = new QWidget(tabs_);
  auto* browse_layout = new QVBoxLayout(browse);
  browse_layout->setContentsMargins(2, 2, 2, 2);
  auto* filter = new QLineEdit(browse);
  filter->setPlaceholderText(tr("Filter passages by title…"));
  filter->setClearButtonEnabled(true);
  browser_filter_ = new QSortFilterProxyModel(this);
  browser_filter_->setSourceModel(&browser_);
  browser_filter_->setFilterKeyColumn(DocumentListModel::TitleColumn);
  browser_filter_->setFilterCaseSensitivity(Qt::CaseInsensitive);
  connect(filter, &QLineEdit::textChanged, browser_filter_,
          &QSortFilterProxyModel::setFilterFixedString);
  browser_view_ = make_table(browser_filter_, browse);
  auto* add_browsed = new QPushButton(tr("Add to prompt ▾"), browse);
  browse_layout->addWidget(filter);
  browse_layout->addWidget(browser_view_, 1);
  browse_layout->addWidget(add_browsed, 0, Qt::AlignLeft);
  connect(add_browsed, &QPushButton::clicked, this, &CorpusPanel::addFromBrowser);
  connect(browser_view_, &QTableView::doubleClicked, this, &CorpusPanel::addFromBrowser);
  tabs_->addTab(browse, tr("Browse passages"));

  preview_ = new QTextBrowser(splitter);
  preview_->setPlaceholderText(tr("Select a passage to read it here."));

  // The prompt's documents, in order.
  auto* selected_box = new QWidget(splitter);
  auto* selected_layout = new QVBoxLayout(selected_box);
  selected_layout->setContentsMargins(0, 0, 0, 0);
  auto* selected_label =
      new QLabel(tr("<b>Documents in the prompt</b> — drag to reorder"), selected_box);
  selected_layout->addWidget(selected_label);
  selected_view_ = new QListView(selected_box);
  selected_view_->setModel(&selected_);
  selected_view_->setDragDropMode(QAbstractItemView::InternalMove);
  selected_view_->setDefaultDropAction(Qt::MoveAction);
  selected_view_->setDragEnabled(true);
  selected_view_->setAcceptDrops(true);
  selected_view_->setDropIndicatorShown(true);
  selected_view_->setSelectionMode(QAbstractItemView::SingleSelection);
  selected_view_->setAlternatingRowColors(true);
  selected_layout->addWidget(selected_view_, 1);
  auto* order_buttons = new QHBoxLayout;
  auto* up = new QPushButton(tr("▲"), selected_box);
  up->setToolTip(tr("Move up"));
  auto* down = new QPushButton(tr("▼"), selected_box);
  down->setToolTip(tr("Move down"));
  auto* reverse = new QPushButton(tr("⇅ Reverse"), selected_box);
  auto* remove = new QPushButton(tr("Remove"), selected_box);
  auto* clear = new QPushButton(tr("Clear"), selected_box);
  for (auto* b : {up, down, reverse, remove, clear}) {
    b->setMinimumWidth(0);
    order_buttons->addWidget(b);
  }
  order_buttons->addStretch();
  selected_layout->addLayout(order_buttons);
  connect(up, &QPushButton::clicked, this, [this] { moveSelected(-1); });
  connect(down, &QPushButton::clicked, this, [this] { moveSelected(+1); });
  connect(reverse, &QPushButton::clicked, &selected_, &SelectedDocumentsModel::reverse);
  connect(clear, &QPushButton::clicked, &selected_, &SelectedDocumentsModel::clear);
  connect(remove, &QPushButton::clicked, this, [this] {
    const QModelIndex current = selected_view_->currentIndex();
    if (current.isValid()) selected_.removeAt(current.row());
  });

  connect(results_view_->selectionModel(), &QItemSelectionModel::currentRowChanged, this,
          [this](const QModelIndex& index) {
            if (index.isValid()) showPreview(results_.document(index.row()));
          });
  connect(browser_view_->selectionModel(), &QItemSelectionModel::currentRowChanged, this,
          [this](const QModelIndex& index) {
            if (index.isValid())
              showPreview(browser_.document(browser_filter_->mapToSource(index).row()));
          });
  connect(selected_view_->selectionModel(), &QItemSelectionModel::currentRowChanged, this,
          [this](const QModelIndex& index) {
            if (index.isValid() && size_t(index.row()) < selected_.documents().size())
              showPreview(selected_.documents()[size_t(index.row())]);
          });

  splitter->setStretchFactor(0, 3);
  splitter->setStretchFactor(1, 2);
  splitter->setStretchFactor(2, 2);
  splitter->setSizes({380, 240, 200});
}

CorpusPanel::~CorpusPanel() = default;

void CorpusPanel::setCorpus(std::unique_ptr<CorpusSource> corpus) {
  corpus_ = std::move(corpus);
  results_.setDocuments({});
  samples_->clear();
  if (!corpus_) {
    browser_.setDocuments({});
    corpus_label_->setText(tr("No corpus loaded"));
    return;
  }
  browser_.setDocuments(corpus_->documents());
  const auto questions = corpus_->questions();
  for (const auto& q : questions) {
    auto* item = new QListWidgetItem(q.text, samples_);
    if (!q.answers.isEmpty())
      item->setToolTip(tr("Answer: %1").arg(q.answers.join(QStringLiteral(" / "))));
  }
  corpus_label_->setText(tr("<b>Corpus</b> %1 · %2 passages · %3 questions")
                             .arg(corpus_->name().toHtmlEscaped())
                             .arg(corpus_->documentCount())
                             .arg(questions.size()));
  corpus_label_->setToolTip(corpus_->path());
}

QString CorpusPanel::question() const { return question_->text(); }

void CorpusPanel::setQuestion(const QString& text) { question_->setText(text); }

void CorpusPanel::search() {
  if (!corpus_ || question_->text().trimmed().isEmpty()) return;
  results_.setDocuments(corpus_->search(question_->text(), top_k_->value()));
  tabs_->setCurrentIndex(0);
  if (results_.rowCount() > 0) results_view_->selectRow(0);
}

void CorpusPanel::useTopHits(int count) {
  std::vector<DocumentEntry> docs;
  for (int i = 0; i < std::min(count, results_.rowCount()); ++i)
    docs.push_back(results_.document(i));
  selected_.setDocuments(docs);
}

void CorpusPanel::addFromResults() {
  for (const QModelIndex& index : results_view_->selectionModel()->selectedRows())
    selected_.append(results_.document(index.row()));
}

void CorpusPanel::addFromBrowser() {
  for (const QModelIndex& index : browser_view_->selectionModel()->selectedRows())
    selected_.append(browser_.document(browser_filter_->mapToSource(index).row()));
}

void CorpusPanel::showPreview(const DocumentEntry& doc) {
  preview_->setHtml(QStringLiteral("<h3>%1</h3><p style='color:#666'>%2 · %3 words</p><p>%4</p>")
                        .arg(doc.title.toHtmlEscaped(), doc.id.toHtmlEscaped())
                        .arg(word_count(doc.text))
                        .arg(doc.text.toHtmlEscaped()));
}

void CorpusPanel::moveSelected(int delta) {
  const QModelIndex current = selected_view_->currentIndex();
  if (!current.isValid()) return;
  const int row = current.row();
  const int target = row + delta;
  if (target < 0 || target >= selected_.rowCount()) return;
  // moveRows takes the destination as "insert before": moving down needs one past the target.
  if (selected_.moveRows({}, row, 1, {}, delta > 0 ? target + 1 : target))
    selected_view_->setCurrentIndex(selected_.index(target));
}

void CorpusPanel::focusQuestion() {
  question_->setFocus(Qt::ShortcutFocusReason);
  question_->selectAll();
}

}  // namespace lazyscope::workbench

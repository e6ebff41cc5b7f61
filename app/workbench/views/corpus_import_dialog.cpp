#include "app/workbench/views/corpus_import_dialog.h"

#include <QComboBox>
#include <QDialogButtonBox>
#include <QFileDialog>
#include <QFileInfo>
#include <QFormLayout>
#include <QHBoxLayout>
#include <QLabel>
#include <QLineEdit>
#include <QPushButton>
#include <QSpinBox>

namespace lazyscope::workbench {
namespace {

QWidget* with_button(QLineEdit* edit, QPushButton* button, QWidget* parent) {
  auto* row = new QWidget(parent);
  auto* layout = new QHBoxLayout(row);
  layout->setContentsMargins(0, 0, 0, 0);
  layout->addWidget(edit, 1);
  layout->addWidget(button);
  return row;
}

}  // namespace

CorpusImportDialog::CorpusImportDialog(QWidget* parent) : QDialog(parent) {
  setWindowTitle(tr("Import a corpus"));
  auto* form = new QFormLayout(this);
  auto* intro = new QLabel(
      tr("Reads a dataset into a corpus store (SQLite with a BM25 index) and opens it. The store "
         "is written whole or not at all: Cancel leaves an existing file as it was."),
      this);
  intro->setWordWrap(true);
  form->addRow(intro);

  source_ = new QLineEdit(this);
  source_->setPlaceholderText(tr("a .jsonl/.json/.csv file, or a folder of passages.jsonl"));
  auto* browse_source = new QPushButton(tr("Browse…"), this);
  form->addRow(tr("&Dataset:"), with_button(source_, browse_source, this));

  format_ = new QComboBox(this);
  format_->addItem(tr("JSONL (documents and questions)"), QStringLiteral("jsonl"));
  format_->addItem(QStringLiteral("HotpotQA"), QStringLiteral("hotpotqa"));
  format_->addItem(QStringLiteral("2WikiMultihopQA"), QStringLiteral("2wiki"));
  format_->addItem(QStringLiteral("TriviaQA"), QStringLiteral("triviaqa"));
  format_->addItem(QStringLiteral("NarrativeQA"), QStringLiteral("narrativeqa"));
  format_->setToolTip(tr("The layout of the dataset (docs/formats.md describes each)"));
  form->addRow(tr("&Format:"), format_);

  db_ = new QLineEdit(this);
  db_->setPlaceholderText(tr("where the corpus store goes (.db)"));
  auto* browse_db = new QPushButton(tr("Browse…"), this);
  form->addRow(tr("&Store:"), with_button(db_, browse_db, this));

  chunk_ = new QSpinBox(this);
  chunk_->setRange(0, 100000);
  chunk_->setSpecialValueText(tr("whole documents"));
  chunk_->setSuffix(tr(" tokens"));
  chunk_->setToolTip(tr("Split long documents into passages of at most this many tokens (0 keeps "
                        "them whole; 256 suits long evidence articles)"));
  form->addRow(tr("&Chunks:"), chunk_);

  auto* buttons = new QDialogButtonBox(QDialogButtonBox::Ok | QDialogButtonBox::Cancel, this);
  buttons->button(QDialogButtonBox::Ok)->setText(tr("Import"));
  form->addRow(buttons);
  connect(buttons, &QDialogButtonBox::accepted, this, &QDialog::accept);
  connect(buttons, &QDialogButtonBox::rejected, this, &QDialog::reject);
  connect(browse_source, &QPushButton::clicked, this, [this] {
    const QString path = QFileDialog::getOpenFileName(
        this, tr("Dataset"), {}, tr("Datasets (*.jsonl *.json *.csv);;All files (*)"));
    if (path.isEmpty()) return;
    source_->setText(path);
    if (db_->text().isEmpty()) {
      const QFileInfo info(path);
      db_->setText(info.dir().filePath(info.completeBaseName() + QStringLiteral(".db")));
    }
  });
  connect(browse_db, &QPushButton::clicked, this, [this] {
    const QString path = QFileDialog::getSaveFileName(
        this, tr("Corpus store"), db_->text(), tr("LazyScope corpus (*.db);;All files (*)"));
    if (!path.isEmpty()) db_->setText(path);
  });
}

CorpusImportRequest CorpusImportDialog::request() const {
  CorpusImportRequest r;
  r.source = source_->text().trimmed();
  r.format = format_->currentData().toString();
  r.db = db_->text().trimmed();
  r.chunk_tokens = chunk_->value();
  return r;
}

}  // namespace lazyscope::workbench

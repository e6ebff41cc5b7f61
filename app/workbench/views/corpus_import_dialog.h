#pragma once
// File ▸ Import Corpus…: which dataset, in which format, into which corpus store.
#include <QDialog>

#include "app/workbench/corpus_importer.h"

class QComboBox;
class QLineEdit;
class QSpinBox;

namespace lazyscope::workbench {

class CorpusImportDialog : public QDialog {
  Q_OBJECT
 public:
  explicit CorpusImportDialog(QWidget* parent = nullptr);
  CorpusImportRequest request() const;

 private:
  QLineEdit* source_ = nullptr;
  QComboBox* format_ = nullptr;
  QLineEdit* db_ = nullptr;
  QSpinBox* chunk_ = nullptr;
};

}  // namespace lazyscope::workbench

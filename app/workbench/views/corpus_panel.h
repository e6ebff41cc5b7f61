#pragma once
// Corpus & retrieval: browse passages, ask a question, BM25 top-k, pick and order the documents
// that go into the prompt.
#include <QWidget>
#include <memory>

#include "app/workbench/models/document_list_model.h"
#include "app/workbench/models/selected_documents_model.h"

class QLabel;
class QLineEdit;
class QListView;
class QListWidget;
class QSpinBox;
class QTableView;
class QTabWidget;
class QTextBrowser;
class QSortFilterProxyModel;

namespace lazyscope::workbench {

class CorpusSource;

class CorpusPanel : public QWidget {
  Q_OBJECT
 public:
  explicit CorpusPanel(QWidget* parent = nullptr);
  ~CorpusPanel() override;

  void setCorpus(std::unique_ptr<CorpusSource> corpus);  // takes ownership; nullptr clears
  bool hasCorpus() const { return corpus_ != nullptr; }
  SelectedDocumentsModel* selectedModel() { return &selected_; }
  DocumentListModel* resultsModel() { return &results_; }
  QListView* selectedView() { return selected_view_; }
  QListWidget* sampleQuestions() { return samples_; }

  QString question() const;
  // Runs BM25 for the question box and shows the hits.
  void search();
  void setQuestion(const QString& text);
  // Puts the keyboard focus into the question box, its text selected (Edit ▸ Search).
  void focusQuestion();
  // Puts the top `count` hits into the prompt, replacing what was there.
  void useTopHits(int count);

 Q_SIGNALS:
  void questionChanged(const QString& text);

 private:
  void addFromResults();
  void addFromBrowser();
  void showPreview(const DocumentEntry& doc);
  void moveSelected(int delta);

  std::unique_ptr<CorpusSource> corpus_;
  DocumentListModel results_{true};
  DocumentListModel browser_{false};
  SelectedDocumentsModel selected_;
  QSortFilterProxyModel* browser_filter_ = nullptr;
  QLabel* corpus_label_ = nullptr;
  QLineEdit* question_ = nullptr;
  QSpinBox* top_k_ = nullptr;
  QListWidget* samples_ = nullptr;
  QTableView* results_view_ = nullptr;
  QTableView* browser_view_ = nullptr;
  QTextBrowser* preview_ = nullptr;
  QListView* selected_view_ = nullptr;
  QTabWidget* tabs_ = nullptr;
};

}  // namespace lazyscope::workbench

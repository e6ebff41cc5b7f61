#pragma once
// A table of passages: the corpus browser (all passages) and the BM25 results (with scores).
#include <QAbstractTableModel>
#include <QString>
#include <vector>

namespace lazyscope::workbench {

struct DocumentEntry {
  qint64 rowid = 0;
  QString id;
  QString title;
  QString text;
  double score = 0.0;  // BM25, higher is better; 0 in the browser
  int rank = 0;        // 1-based retrieval rank; 0 in the browser
};

class DocumentListModel : public QAbstractTableModel {
  Q_OBJECT
 public:
  enum Column { RankColumn, TitleColumn, ScoreColumn, WordsColumn, ColumnCount };
  explicit DocumentListModel(bool show_scores, QObject* parent = nullptr);

  void setDocuments(std::vector<DocumentEntry> documents);
  const DocumentEntry& document(int row) const { return documents_.at(size_t(row)); }
  const std::vector<DocumentEntry>& documents() const { return documents_; }

  int rowCount(const QModelIndex& parent = {}) const override;
  int columnCount(const QModelIndex& parent = {}) const override;
  QVariant data(const QModelIndex& index, int role) const override;
  QVariant headerData(int section, Qt::Orientation orientation, int role) const override;

 private:
  bool show_scores_;
  std::vector<DocumentEntry> documents_;
};

int word_count(const QString& text);

}  // namespace lazyscope::workbench

#include "app/workbench/models/document_list_model.h"

#include <QRegularExpression>

namespace lazyscope::workbench {

int word_count(const QString& text) {
  static const QRegularExpression spaces(QStringLiteral("\\s+"));
  return int(text.split(spaces, Qt::SkipEmptyParts).size());
}

DocumentListModel::DocumentListModel(bool show_scores, QObject* parent)
    : QAbstractTableModel(parent), show_scores_(show_scores) {}

void DocumentListModel::setDocuments(std::vector<DocumentEntry> documents) {
  beginResetModel();
  documents_ = std::move(documents);
  endResetModel();
}

int DocumentListModel::rowCount(const QModelIndex& parent) const {
  return parent.isValid() ? 0 : int(documents_.size());
}

int DocumentListModel::columnCount(const QModelIndex& parent) const {
  return parent.isValid() ? 0 : ColumnCount;
}

QVariant DocumentListModel::data(const QModelIndex& index, int role) const {
  if (!index.isValid() || index.row() >= rowCount()) return {};
  const DocumentEntry& doc = documents_[size_t(index.row())];
  if (role == Qt::DisplayRole) {
    switch (index.column()) {
      case RankColumn:
        return show_scores_ ? QVariant(doc.rank) : QVariant(doc.id);
      case TitleColumn:
        return doc.title;
      case ScoreColumn:
        return show_scores_ ? QString::number(doc.score, 'f', 2) : QString();
      case WordsColumn:
        return word_count(doc.text);
    }
  }
  if (role == Qt::ToolTipRole)
    return QStringLiteral("<b>%1</b><br>%2")
        .arg(doc.title.toHtmlEscaped(), doc.text.left(400).toHtmlEscaped());
  if (role == Qt::TextAlignmentRole &&
      (index.column() == ScoreColumn || index.column() == WordsColumn))
    return int(Qt::AlignRight | Qt::AlignVCenter);
  return {};
}

QVariant DocumentListModel::headerData(int section, Qt::Orientation orientation, int role) const {
  if (orientation != Qt::Horizontal || role != Qt::DisplayRole) return {};
  switch (section) {
    case RankColumn:
      return show_scores_ ? QStringLiteral("#") : QStringLiteral("id");
    case TitleColumn:
      return QStringLiteral("Title");
    case ScoreColumn:
      return show_scores_ ? QStringLiteral("BM25") : QString();
    case WordsColumn:
      return QStringLiteral("Words");
  }
  return {};
}

}  // namespace lazyscope::workbench

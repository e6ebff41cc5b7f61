#include "app/workbench/models/selected_documents_model.h"

#include <QMimeData>
#include <algorithm>

namespace lazyscope::workbench {

SelectedDocumentsModel::SelectedDocumentsModel(QObject* parent) : QAbstractListModel(parent) {}

void SelectedDocumentsModel::append(const DocumentEntry& document) {
  const int row = rowCount();
  beginInsertRows({}, row, row);
  documents_.push_back(document);
  endInsertRows();
  Q_EMIT orderChanged();
}

void SelectedDocumentsModel::removeAt(int row) { removeRows(row, 1); }

void SelectedDocumentsModel::clear() { setDocuments({}); }

void SelectedDocumentsModel::reverse() {
  beginResetModel();
  std::reverse(documents_.begin(), documents_.end());
  endResetModel();
  Q_EMIT orderChanged();
}

void SelectedDocumentsModel::setDocuments(std::vector<DocumentEntry> documents) {
  beginResetModel();
  documents_ = std::move(documents);
  endResetModel();
  Q_EMIT orderChanged();
}

QStringList SelectedDocumentsModel::titles() const {
  QStringList out;
  for (const auto& doc : documents_) out << doc.title;
  return out;
}

int SelectedDocumentsModel::rowCount(const QModelIndex& parent) const {
  return parent.isValid() ? 0 : int(documents_.size());
}

QVariant SelectedDocumentsModel::data(const QModelIndex& index, int role) const {
  if (!index.isValid() || index.row() >= rowCount()) return {};
  const DocumentEntry& doc = documents_[size_t(index.row())];
  if (role == Qt::DisplayRole) return QStringLiteral("%1. %2").arg(index.row() + 1).arg(doc.title);
  if (role == Qt::ToolTipRole) return doc.text.left(400);
  if (role == Qt::UserRole) return doc.rowid;
  return {};
}

Qt::ItemFlags SelectedDocumentsModel::flags(const QModelIndex& index) const {
  // Drops land between rows (on the invalid parent), never onto an item.
  if (!index.isValid()) return Qt::ItemIsDropEnabled;
  return Qt::ItemIsEnabled | Qt::ItemIsSelectable | Qt::ItemIsDragEnabled;
}

Qt::DropActions SelectedDocumentsModel::supportedDropActions() const { return Qt::MoveAction; }

bool SelectedDocumentsModel::moveRows(const QModelIndex& source_parent, int source_row, int count,
                                      const QModelIndex& destination_parent,
                                      int destination_child) {
  const int n = rowCount();
  if (source_parent.isValid() || destination_parent.isValid() || count <= 0 || source_row < 0 ||
      source_row + count > n || destination_child < 0 || destination_child > n)
    return false;
  // Moving a block onto itself or just after itself is a no-op that Qt refuses to announce.
  if (destination_child >= source_row && destination_child <= source_row + count) return false;
  if (!beginMoveRows({}, source_row, source_row + count - 1, {}, destination_child)) return false;
  std::vector<DocumentEntry> moved(documents_.begin() + source_row,
                                   documents_.begin() + source_row + count);
  documents_.erase(documents_.begin() + source_row, documents_.begin() + source_row + count);
  const int insert_at =
      destination_child > source_row ? destination_child - count : destination_child;
  documents_.insert(documents_.begin() + insert_at, moved.begin(), moved.end());
  endMoveRows();
  // Row numbers in the display text changed for every row.
  Q_EMIT dataChanged(index(0), index(rowCount() - 1));
  Q_EMIT orderChanged();
  return true;
}

bool SelectedDocumentsModel::removeRows(int row, int count, const QModelIndex& parent) {
  if (parent.isValid() || row < 0 || count <= 0 || row + count > rowCount()) return false;
  beginRemoveRows({}, row, row + count - 1);
  documents_.erase(documents_.begin() + row, documents_.begin() + row + count);
  endRemoveRows();
  if (rowCount() > 0) Q_EMIT dataChanged(index(0), index(rowCount() - 1));
  Q_EMIT orderChanged();
  return true;
}

namespace {
const QString kRowsMime = QStringLiteral("application/x-lazyscope-prompt-rows");
}

QStringList SelectedDocumentsModel::mimeTypes() const { return {kRowsMime}; }

QMimeData* SelectedDocumentsModel::mimeData(const QModelIndexList& indexes) const {
  QStringList rows;
  for (const QModelIndex& index : indexes)
    if (index.isValid()) rows << QString::number(index.row());
  auto* data = new QMimeData;
  data->setData(kRowsMime, rows.join(',').toUtf8());
  return data;
}

bool SelectedDocumentsModel::dropMimeData(const QMimeData* data, Qt::DropAction action, int row,
                                          int, const QModelIndex& parent) {
  if (!data || !data->hasFormat(kRowsMime) || action != Qt::MoveAction) return false;
  bool ok = false;
  const int source = QString::fromUtf8(data->data(kRowsMime)).section(',', 0, 0).toInt(&ok);
  if (!ok) return false;
  // Dropped onto an item means "before it"; below the last item means "at the end".
  const int destination = parent.isValid() ? parent.row() : (row < 0 ? rowCount() : row);
  moveRows({}, source, 1, {}, destination);
  // false: the view must not remove the source rows afterwards, the move already happened.
  return false;
}

}  // namespace lazyscope::workbench

#pragma once
// The documents placed in the prompt, in prompt order. Reordering goes through moveRows, so
// drag-and-drop in a QListView, the Up/Down buttons and tests all take the same path.
#include <QAbstractListModel>
#include <vector>

#include "app/workbench/models/document_list_model.h"

namespace lazyscope::workbench {

class SelectedDocumentsModel : public QAbstractListModel {
  Q_OBJECT
 public:
  explicit SelectedDocumentsModel(QObject* parent = nullptr);

  void append(const DocumentEntry& document);  // repeats are allowed (docs/design.md)
  void removeAt(int row);
  void clear();
  void reverse();  // the quickest way to show that order does not matter to the lazy cache
  void setDocuments(std::vector<DocumentEntry> documents);
  const std::vector<DocumentEntry>& documents() const { return documents_; }
  QStringList titles() const;

  int rowCount(const QModelIndex& parent = {}) const override;
  QVariant data(const QModelIndex& index, int role) const override;
  Qt::ItemFlags flags(const QModelIndex& index) const override;
  Qt::DropActions supportedDropActions() const override;
  bool moveRows(const QModelIndex& source_parent, int source_row, int count,
                const QModelIndex& destination_parent, int destination_child) override;
  bool removeRows(int row, int count, const QModelIndex& parent = {}) override;
  // Drag and drop carries row numbers; a drop becomes a moveRows, never a remove + insert.
  QStringList mimeTypes() const override;
  QMimeData* mimeData(const QModelIndexList& indexes) const override;
  bool dropMimeData(const QMimeData* data, Qt::DropAction action, int row, int column,
                    const QModelIndex& parent) override;

 Q_SIGNALS:
  void orderChanged();

 private:
  std::vector<DocumentEntry> documents_;
};

}  // namespace lazyscope::workbench

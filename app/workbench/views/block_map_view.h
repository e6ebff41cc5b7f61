#pragma once
// KV block map: every pool block as a cell coloured by its owning segment, shaded by refcount,
// flashing on hit/miss/copy/evict; a budget bar, a legend and what the last runs did.
#include <QWidget>

#include "app/workbench/models/block_map_model.h"

class QComboBox;
class QLabel;
class QScrollArea;
class QTimer;

namespace lazyscope::workbench {

// The grid itself; paints only the rows inside the exposed rectangle.
class BlockGrid : public QWidget {
  Q_OBJECT
 public:
  explicit BlockGrid(BlockMapModel* model, QWidget* parent = nullptr);
  int blockAt(const QPoint& pos) const;
  QRect cellRect(int block) const;
  int columns() const;
  int pitch() const { return cell_ + gap_; }
  // Chooses the cell size so the whole pool fits `viewport` when it can.
  void fitTo(const QSize& viewport);
  QSize sizeHint() const override;
  int paintedCells() const { return painted_cells_; }  // cells drawn by the last paint (tests)

 protected:
  void paintEvent(QPaintEvent* event) override;
  bool event(QEvent* event) override;

 private:
  BlockMapModel* model_;
  int cell_ = 14;
  int gap_ = 2;
  int painted_cells_ = 0;
};

// Stacked bar: blocks in use, cached and free against the pool budget.
class BudgetBar : public QWidget {
  Q_OBJECT
 public:
  explicit BudgetBar(BlockMapModel* model, QWidget* parent = nullptr);
  QSize sizeHint() const override { return {300, 22}; }

 protected:
  void paintEvent(QPaintEvent*) override;

 private:
  BlockMapModel* model_;
};

class BlockMapView : public QWidget {
  Q_OBJECT
 public:
  explicit BlockMapView(QWidget* parent = nullptr);
  BlockMapModel* model() { return &model_; }
  BlockGrid* grid() { return grid_; }
  QString tallyText() const;
  // Shows the pool of `policy` ("lazy", "materialized", ...): every policy has its own.
  void showPolicy(const QString& policy);
  QComboBox* policySelector() { return policy_; }

 Q_SIGNALS:
  // The user picked another policy's pool: the model needs a snapshot of it.
  void policyChanged(const QString& policy);

 protected:
  void resizeEvent(QResizeEvent* event) override;

 private:
  void refresh();
  BlockMapModel model_;
  QLabel* tally_ = nullptr;
  QComboBox* policy_ = nullptr;
  BudgetBar* budget_ = nullptr;
  QScrollArea* scroll_ = nullptr;
  BlockGrid* grid_ = nullptr;
  QLabel* legend_ = nullptr;
  QTimer* flash_timer_ = nullptr;
};

}  // namespace lazyscope::workbench

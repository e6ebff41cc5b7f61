#pragma once
// Equivalence: one cell per generated step coloured by max |Δlogit| between lazy and
// materialized, argmax mismatches marked, top-5 of both on hover, and a summary line.
#include <QWidget>

#include "app/workbench/models/equivalence_model.h"

class QLabel;

namespace lazyscope::workbench {

// Green (bit-identical) through yellow to red (|Δ| ≥ 0.1) on a log scale.
QColor difference_color(double max_abs_diff);

class EquivalenceStrip : public QWidget {
  Q_OBJECT
 public:
  explicit EquivalenceStrip(EquivalenceModel* model, QWidget* parent = nullptr);
  int stepAt(const QPoint& pos) const;
  QRect cellRect(int step) const;
  QSize sizeHint() const override;
  QSize minimumSizeHint() const override;

 protected:
  void paintEvent(QPaintEvent* event) override;
  bool event(QEvent* event) override;

 private:
  int cellWidth() const;
  EquivalenceModel* model_;
};

class EquivalenceView : public QWidget {
  Q_OBJECT
 public:
  explicit EquivalenceView(QWidget* parent = nullptr);
  EquivalenceModel* model() { return &model_; }
  QString summaryText() const;
  // At least the height the wrapped verdict needs at the current width.
  QSize minimumSizeHint() const override;

 protected:
  void resizeEvent(QResizeEvent* event) override;

 private:
  void refresh();
  EquivalenceModel model_;
  QLabel* summary_ = nullptr;
  EquivalenceStrip* strip_ = nullptr;
};

}  // namespace lazyscope::workbench

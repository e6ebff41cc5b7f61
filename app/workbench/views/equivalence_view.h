#pragma once
// Equivalence: one cell per generated step coloured by max |Δlogit| between lazy and
// materialized, argmax mismatches marked, top-5 of both on hover, and a summary line.
#include <QWidget>

#include "app/workbench/models/equivalence_model.h"

class QLabel;

namespace lazyscope::workbench {

// On a log scale relative to the rule's rounding bound: green up to the bound (darker the closer
// to bit-identical, from 1/1000 of it), then yellow, red from 1000 times the bound. With the
// exact CPU's 1e-4 that is green to 1e-4 and red from 0.1.
QColor difference_color(double max_abs_diff, double bound = 1e-4);

class DifferenceScale;

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
  QLabel* scale_label_ = nullptr;
  DifferenceScale* scale_ = nullptr;
};

}  // namespace lazyscope::workbench

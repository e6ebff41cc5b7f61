#pragma once
// The status bar's long jobs (model load, corpus import, generation, evaluation, workload): one
// row per running job with what it is doing, a bar and a Cancel button. Jobs on different
// threads may run at once, so each has a row of its own; a row leaves when its job ends.
#include <QString>
#include <QWidget>
#include <functional>
#include <map>

class QHBoxLayout;
class QLabel;
class QProgressBar;
class QToolButton;

namespace lazyscope::workbench {

class JobProgressArea : public QWidget {
  Q_OBJECT
 public:
  explicit JobProgressArea(QWidget* parent = nullptr);

  // Shows a row for `job` (replacing one of the same name). `cancel` runs when Cancel is pressed;
  // it only asks: the row stays, saying "Cancelling…", until end() is called.
  void begin(const QString& job, const QString& title, std::function<void()> cancel);
  // fraction in [0, 1]; below 0 the bar shows "busy" without a figure.
  void update(const QString& job, double fraction, const QString& what);
  void end(const QString& job);

  bool running(const QString& job) const { return rows_.count(job) > 0; }
  int runningCount() const { return int(rows_.size()); }
  QToolButton* cancelButton(const QString& job) const;
  QProgressBar* bar(const QString& job) const;
  QString text(const QString& job) const;  // the row's label

 Q_SIGNALS:
  void cancelRequested(const QString& job);

 private:
  struct Row {
    QWidget* widget = nullptr;
    QLabel* label = nullptr;
    QProgressBar* bar = nullptr;
    QToolButton* cancel = nullptr;
    QString title;
    std::function<void()> on_cancel;
  };
  void setLabel(Row& row, const QString& text);

  QHBoxLayout* layout_ = nullptr;
  std::map<QString, Row> rows_;
};

}  // namespace lazyscope::workbench

#pragma once
// "Start here": what the workbench shows, and three buttons that lead a newcomer to the honest
// comparison (a cold run, then the same documents reordered: lazy reuses, materialized copies).
#include <QWidget>

class QLabel;
class QPushButton;

namespace lazyscope::workbench {

class WelcomePage : public QWidget {
  Q_OBJECT
 public:
  // Ran: the last run came from the prompt's Run, not from this page.
  enum class Stage { Fresh, Asked, Reordered, Ran };

  explicit WelcomePage(QWidget* parent = nullptr);

  QPushButton* askButton() { return ask_; }
  QPushButton* reorderButton() { return reorder_; }
  QPushButton* workloadButton() { return workload_; }
  Stage stage() const { return stage_; }
  // Fresh: only "Ask" is enabled; Asked: "Reorder and re-run" too; Reordered, Ran: both.
  void setStage(Stage stage);
  // While a model loads or a run is in flight the buttons wait.
  void setBusy(bool busy);
  // The figures of the last run, one line per policy (hits, copies), shown under the buttons.
  void setSummary(const QString& html);
  // Enables "Open a workload" once a workload lab is there to open.
  void setWorkloadAvailable(bool available, const QString& tooltip = {});
  // At least the height the wrapped text needs at the current width.
  QSize minimumSizeHint() const override;

 Q_SIGNALS:
  void askSampleQuestion();
  void reorderAndRerun();
  void openWorkload();
  // The text changed: the page may need another height.
  void contentChanged();

 protected:
  void resizeEvent(QResizeEvent* event) override;

 private:
  void refresh();

  QLabel* explanation_ = nullptr;
  QLabel* summary_ = nullptr;
  QPushButton* ask_ = nullptr;
  QPushButton* reorder_ = nullptr;
  QPushButton* workload_ = nullptr;
  Stage stage_ = Stage::Fresh;
  bool busy_ = false;
  bool workload_available_ = false;
};

}  // namespace lazyscope::workbench

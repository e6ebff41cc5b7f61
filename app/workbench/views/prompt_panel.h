#pragma once
// Prompt & run: system text, query, max tokens, the policies to compare, Run/Stop, and one
// streaming output column per policy with TTFT and tokens/s.
#include <QWidget>
#include <vector>

#include "app/workbench/models/run_model.h"
#include "app/workbench/workbench_types.h"

class QCheckBox;
class QComboBox;
class QLabel;
class QLineEdit;
class QPlainTextEdit;
class QPushButton;
class QSpinBox;
class QHBoxLayout;

namespace lazyscope::workbench {

class PromptPanel : public QWidget {
  Q_OBJECT
 public:
  explicit PromptPanel(QWidget* parent = nullptr);

  RunModel* runModel() { return &runs_; }
  QString systemText() const;
  void setSystemText(const QString& text);
  QString query() const;
  void setQuery(const QString& text);
  int maxTokens() const;
  void setMaxTokens(int tokens);
  // Whether the engine wraps the request in the model's chat template (as `generate --chat`).
  ChatMode chatMode() const;
  void setChatMode(ChatMode mode);
  QStringList checkedPolicies() const;
  void setPolicyChecked(const QString& key, bool checked);
  void setBusy(bool busy);
  bool isBusy() const { return busy_; }
  QPushButton* runButton() { return run_; }
  QPushButton* stopButton() { return stop_; }
  // The output text widget of a policy column (nullptr when that column is not shown).
  QPlainTextEdit* output(const QString& key) const;

 Q_SIGNALS:
  void runRequested();
  void stopRequested();

 private:
  void rebuildColumns();
  void refreshColumn(int row);

  struct ColumnWidgets {
    QLabel* title = nullptr;
    QPlainTextEdit* text = nullptr;
    QLabel* status = nullptr;
  };
  RunModel runs_;
  QPlainTextEdit* system_ = nullptr;
  QLineEdit* query_ = nullptr;
  QSpinBox* max_tokens_ = nullptr;
  QComboBox* chat_ = nullptr;
  std::vector<std::pair<QString, QCheckBox*>> policy_boxes_;
  QPushButton* run_ = nullptr;
  QPushButton* stop_ = nullptr;
  QHBoxLayout* columns_layout_ = nullptr;
  QWidget* columns_host_ = nullptr;
  std::vector<ColumnWidgets> columns_;
  bool busy_ = false;
};

}  // namespace lazyscope::workbench

#pragma once
// The output columns of the current run: streamed text, TTFT and tokens/s per policy.
#include <QAbstractListModel>
#include <QString>
#include <vector>

#include "app/workbench/workbench_types.h"

namespace lazyscope::workbench {

struct RunColumn {
  QString key;
  QString text;
  int tokens = 0;
  double ttft_ms = -1.0;  // -1 until the first token
  double last_token_ms = 0.0;
  double tokens_per_second = 0.0;
  int prompt_tokens = 0;
  enum class State { Waiting, Running, Done, Stopped, Failed } state = State::Waiting;
};

class RunModel : public QAbstractListModel {
  Q_OBJECT
 public:
  enum Role { KeyRole = Qt::UserRole + 1, TextRole, StatusRole };
  explicit RunModel(QObject* parent = nullptr);

  void startPlan(int run_index, const QStringList& keys);
  void markRunning(const QString& key);
  void appendToken(const QString& key, int step, const QString& text, double ms_since_submit);
  void finish(const RunSummary& summary);
  void stopWaiting();  // columns that never started once the plan was stopped

  int runIndex() const { return run_index_; }
  int columnOf(const QString& key) const;
  const RunColumn& column(int i) const { return columns_.at(size_t(i)); }
  int columns() const { return int(columns_.size()); }
  QString status(int i) const;  // "TTFT 12.3 ms · 45.6 tok/s · 32 tokens"

  int rowCount(const QModelIndex& parent = {}) const override;
  QVariant data(const QModelIndex& index, int role) const override;

 Q_SIGNALS:
  void columnsReset();

 private:
  int run_index_ = 0;
  std::vector<RunColumn> columns_;
};

}  // namespace lazyscope::workbench

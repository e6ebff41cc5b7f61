#include "app/workbench/models/run_model.h"

namespace lazyscope::workbench {

RunModel::RunModel(QObject* parent) : QAbstractListModel(parent) {}

void RunModel::startPlan(int run_index, const QStringList& keys) {
  beginResetModel();
  run_index_ = run_index;
  columns_.clear();
  for (const QString& key : keys) {
    RunColumn column;
    column.key = key;
    columns_.push_back(column);
  }
  endResetModel();
  Q_EMIT columnsReset();
}

int RunModel::columnOf(const QString& key) const {
  for (size_t i = 0; i < columns_.size(); ++i)
    if (columns_[i].key == key) return int(i);
  return -1;
}

void RunModel::markRunning(const QString& key) {
  const int i = columnOf(key);
  if (i < 0) return;
  columns_[size_t(i)].state = RunColumn::State::Running;
  Q_EMIT dataChanged(index(i), index(i));
}

void RunModel::appendToken(const QString& key, int step, const QString& text,
                           double ms_since_submit) {
  const int i = columnOf(key);
  if (i < 0) return;
  RunColumn& column = columns_[size_t(i)];
  column.state = RunColumn::State::Running;
  column.text += text;
  column.tokens = step + 1;
  if (step == 0) column.ttft_ms = ms_since_submit;
  column.last_token_ms = ms_since_submit;
  // Decode speed counts the tokens after the first one, over the time after TTFT.
  if (step > 0 && ms_since_submit > column.ttft_ms)
    column.tokens_per_second = 1000.0 * step / (ms_since_submit - column.ttft_ms);
  Q_EMIT dataChanged(index(i), index(i));
}

void RunModel::finish(const RunSummary& summary) {
  const int i = columnOf(summary.key);
  if (i < 0) return;
  RunColumn& column = columns_[size_t(i)];
  column.text = summary.generated_text;  // the decoded whole beats concatenated pieces
  column.tokens = summary.generated_tokens;
  column.prompt_tokens = summary.prompt_tokens;
  if (summary.ttft_ms > 0) column.ttft_ms = summary.ttft_ms;
  if (summary.decode_ms_per_token > 0)
    column.tokens_per_second = 1000.0 / summary.decode_ms_per_token;
  column.state = summary.cancelled ? RunColumn::State::Stopped : RunColumn::State::Done;
  Q_EMIT dataChanged(index(i), index(i));
}

void RunModel::stopWaiting() {
  for (size_t i = 0; i < columns_.size(); ++i)
    if (columns_[i].state == RunColumn::State::Waiting ||
        columns_[i].state == RunColumn::State::Running) {
      columns_[i].state = RunColumn::State::Stopped;
      Q_EMIT dataChanged(index(int(i)), index(int(i)));
    }
}

QString RunModel::status(int i) const {
  const RunColumn& c = column(i);
  QString state;
  switch (c.state) {
    case RunColumn::State::Waiting:
      return QStringLiteral("waiting…");
    case RunColumn::State::Running:
      state = QStringLiteral("running");
      break;
    case RunColumn::State::Done:
      state = QStringLiteral("done");
      break;
    case RunColumn::State::Stopped:
      state = QStringLiteral("stopped");
      break;
    case RunColumn::State::Failed:
      state = QStringLiteral("failed");
      break;
  }
  QStringList parts;
  parts << (c.ttft_ms >= 0 ? QStringLiteral("TTFT %1 ms").arg(c.ttft_ms, 0, 'f', 1)
                           : QStringLiteral("TTFT –"));
  parts << QStringLiteral("%1 tok/s").arg(c.tokens_per_second, 0, 'f', 1);
  parts << QStringLiteral("%1 tokens").arg(c.tokens);
  if (c.prompt_tokens > 0) parts << QStringLiteral("prompt %1").arg(c.prompt_tokens);
  parts << state;
  return parts.join(QStringLiteral(" · "));
}

int RunModel::rowCount(const QModelIndex& parent) const {
  return parent.isValid() ? 0 : int(columns_.size());
}

QVariant RunModel::data(const QModelIndex& index, int role) const {
  if (!index.isValid() || index.row() >= rowCount()) return {};
  const RunColumn& c = columns_[size_t(index.row())];
  switch (role) {
    case Qt::DisplayRole:
    case KeyRole:
      return c.key;
    case TextRole:
      return c.text;
    case StatusRole:
      return status(index.row());
  }
  return {};
}

}  // namespace lazyscope::workbench

#include "app/workbench/models/evaluation_model.h"

#include <QBrush>
#include <QColor>

namespace lazyscope::workbench {

EvaluationModel::EvaluationModel(QObject* parent) : QAbstractTableModel(parent) {}

void EvaluationModel::start(const std::vector<corpora::EvalConfig>& configs, const QString& model,
                            int planned) {
  beginResetModel();
  report_ = corpora::EvalReport{};
  report_.configs = configs;
  report_.model = model.toStdString();
  report_.planned_questions = planned;
  rows_.clear();
  endResetModel();
  Q_EMIT reportChanged();
}

void EvaluationModel::add(const corpora::QuestionResult& result) {
  report_.questions.push_back(result);
  if (!disagreements_only_ || result.configurations_disagree()) {
    const int row = int(rows_.size());
    beginInsertRows({}, row, row);
    rows_.push_back(int(report_.questions.size()) - 1);
    endInsertRows();
  }
  Q_EMIT reportChanged();
}

void EvaluationModel::setConfigSeconds(std::vector<double> seconds) {
  report_.config_seconds = std::move(seconds);
  Q_EMIT reportChanged();
}

void EvaluationModel::setReport(corpora::EvalReport report) {
  beginResetModel();
  report_ = std::move(report);
  rebuildRows();
  endResetModel();
  Q_EMIT reportChanged();
}

void EvaluationModel::clear() { start({}, QString(), 0); }

void EvaluationModel::setDisagreementsOnly(bool only) {
  if (only == disagreements_only_) return;
  disagreements_only_ = only;
  beginResetModel();
  rebuildRows();
  endResetModel();
}

void EvaluationModel::rebuildRows() {
  rows_.clear();
  for (std::size_t i = 0; i < report_.questions.size(); ++i) {
    if (!disagreements_only_ || report_.questions[i].configurations_disagree())
      rows_.push_back(int(i));
  }
}

int EvaluationModel::disagreements() const {
  int n = 0;
  for (const corpora::QuestionResult& q : report_.questions)
    n += q.configurations_disagree() ? 1 : 0;
  return n;
}

const corpora::QuestionResult& EvaluationModel::question(int row) const {
  return report_.questions.at(std::size_t(rows_.at(std::size_t(row))));
}

int EvaluationModel::rowCount(const QModelIndex& parent) const {
  return parent.isValid() ? 0 : int(rows_.size());
}

int EvaluationModel::columnCount(const QModelIndex& parent) const {
  return parent.isValid() ? 0 : FirstAnswerColumn + int(report_.configs.size());
}

QVariant EvaluationModel::headerData(int section, Qt::Orientation orientation, int role) const {
  if (orientation != Qt::Horizontal || role != Qt::DisplayRole) return {};
  switch (section) {
    case IdColumn:
      return tr("id");
    case QuestionColumn:
      return tr("question");
    case GoldColumn:
      return tr("gold answer");
    default:
      break;
  }
  const int c = section - FirstAnswerColumn;
  if (c >= 0 && c < int(report_.configs.size()))
    return QString::fromStdString(report_.configs[std::size_t(c)].key());
  return {};
}

QVariant EvaluationModel::data(const QModelIndex& index, int role) const {
  if (!index.isValid() || index.row() >= int(rows_.size())) return {};
  const corpora::QuestionResult& q = question(index.row());
  const int c = index.column() - FirstAnswerColumn;
  const corpora::ConfigAnswer* answer =
      c >= 0 && c < int(q.answers.size()) && q.answers[std::size_t(c)].ran
          ? &q.answers[std::size_t(c)]
          : nullptr;
  if (role == Qt::DisplayRole) {
    switch (index.column()) {
      case IdColumn:
        return QString::fromStdString(q.question.id);
      case QuestionColumn:
        return QString::fromStdString(q.question.question);
      case GoldColumn:
        return q.question.answers.empty() ? QString()
                                          : QString::fromStdString(q.question.answers.front());
      default:
        return answer ? QString::fromStdString(answer->text).simplified() : QString();
    }
  }
  if (role == Qt::ToolTipRole) {
    if (answer) {
      return tr("%1\nexact match %2, contains a gold answer %3, F1 %4, TTFT %5 ms")
          .arg(QString::fromStdString(answer->text))
          .arg(answer->score.exact_match > 0 ? tr("yes") : tr("no"))
          .arg(answer->score.contains > 0 ? tr("yes") : tr("no"))
          .arg(answer->score.f1, 0, 'f', 2)
          .arg(answer->ttft_ms, 0, 'f', 0);
    }
    if (index.column() == GoldColumn) {
      QStringList golds;
      for (const std::string& g : q.question.answers) golds << QString::fromStdString(g);
      return tr("gold answers: %1\nclick the row to load the question and its passages into the "
                "prompt")
          .arg(golds.join(QStringLiteral(" | ")));
    }
    return tr("click the row to load the question and its passages into the prompt");
  }
  if (role == Qt::BackgroundRole && answer) {
    if (answer->score.exact_match > 0) return QBrush(QColor(200, 235, 200));
    if (answer->score.contains > 0) return QBrush(QColor(235, 245, 210));
    return QBrush(QColor(250, 225, 220));
  }
  return {};
}

}  // namespace lazyscope::workbench

#pragma once
// The evaluation's questions as a table (id, question, gold answer, one answer column per
// configuration), by default only those where the configurations disagree, plus the report the
// rows come from (summaries, identity check, block-vs-full note).
#include <QAbstractTableModel>
#include <QString>
#include <vector>

#include "corpora/evaluation_run.h"

namespace lazyscope::workbench {

class EvaluationModel : public QAbstractTableModel {
  Q_OBJECT
 public:
  enum Column { IdColumn, QuestionColumn, GoldColumn, FirstAnswerColumn };
  explicit EvaluationModel(QObject* parent = nullptr);

  void start(const std::vector<corpora::EvalConfig>& configs, const QString& model, int planned);
  void add(const corpora::QuestionResult& result);
  // Each configuration's seconds when the run ended (tokens/s divide by them; batched runs
  // overlap their requests, so the sum of request times would not be the time taken).
  void setConfigSeconds(std::vector<double> seconds);
  // Shows a finished report (an evaluation JSON opened from disk).
  void setReport(corpora::EvalReport report);
  void clear();
  // false: every finished question; true (the default): only those the configurations disagree on.
  void setDisagreementsOnly(bool only);
  bool disagreementsOnly() const { return disagreements_only_; }

  const corpora::EvalReport& report() const { return report_; }
  int disagreements() const;
  // The question behind a visible row.
  const corpora::QuestionResult& question(int row) const;

  int rowCount(const QModelIndex& parent = {}) const override;
  int columnCount(const QModelIndex& parent = {}) const override;
  QVariant data(const QModelIndex& index, int role) const override;
  QVariant headerData(int section, Qt::Orientation orientation, int role) const override;

 Q_SIGNALS:
  void reportChanged();

 private:
  void rebuildRows();
  corpora::EvalReport report_;
  std::vector<int> rows_;  // indexes into report_.questions
  bool disagreements_only_ = true;
};

}  // namespace lazyscope::workbench

// The evaluation panel: its table model over question results (disagreements only by default),
// and a real evaluation of two sample questions on the tiny model from the main window, whose
// table row loads the question and its passages into the prompt.
#include "app/workbench/views/evaluation_panel.h"

#include <gtest/gtest.h>

#include <QApplication>
#include <QSignalSpy>
#include <QTableView>
#include <QTest>

#include "app/workbench/main_window.h"
#include "app/workbench/models/evaluation_model.h"
#include "app/workbench/views/corpus_panel.h"
#include "app/workbench/views/prompt_panel.h"
#include "workbench_test_support.h"

namespace lazyscope::workbench {
namespace {

corpora::QuestionResult result(const std::string& id, const std::string& a, const std::string& b) {
  corpora::QuestionResult q;
  q.question.id = id;
  q.question.question = "Question " + id + "?";
  q.question.answers = {"Brannock"};
  q.answers.resize(2);
  q.answers[0].ran = q.answers[1].ran = true;
  q.answers[0].text = a;
  q.answers[1].text = b;
  q.answers[0].score = corpora::score_answer(a, q.question.answers);
  q.answers[1].score = corpora::score_answer(b, q.question.answers);
  return q;
}

TEST(EvaluationModel, ShowsOnlyDisagreementsUnlessAskedForAll) {
  EvaluationModel model;
  model.start({{Mode::Full, Policy::None}, {Mode::Block, Policy::Lazy}}, QStringLiteral("m"), 3);
  model.add(result("q1", "Brannock", "brannock."));  // the same after normalisation
  model.add(result("q2", "Brannock", "Port Quillan"));
  model.add(result("q3", "Osk", "Osk"));
  EXPECT_EQ(model.columnCount(), 5);
  EXPECT_EQ(model.headerData(3, Qt::Horizontal, Qt::DisplayRole).toString(), "full/none");
  ASSERT_EQ(model.rowCount(), 1);
  EXPECT_EQ(model.data(model.index(0, EvaluationModel::IdColumn), Qt::DisplayRole).toString(),
            "q2");
  EXPECT_EQ(model.data(model.index(0, 4), Qt::DisplayRole).toString(), "Port Quillan");
  EXPECT_EQ(model.disagreements(), 1);
  model.setDisagreementsOnly(false);
  EXPECT_EQ(model.rowCount(), 3);
  const auto summaries = model.report().summaries();
  ASSERT_EQ(summaries.size(), 2u);
  EXPECT_NEAR(summaries[0].exact_match, 2.0 / 3.0, 1e-12);  // q1, q2 exact; q3 wrong
  EXPECT_NEAR(summaries[1].exact_match, 1.0 / 3.0, 1e-12);
  // Full beats block by 33 points here: the panel's warning says so.
  EXPECT_NE(model.report().block_quality_note().find("loses 33.3 exact-match"), std::string::npos)
      << model.report().block_quality_note();
}

TEST(EvaluationPanel, RunsSampleQuestionsAndARowLoadsThePrompt) {
  WorkbenchOptions options;
  options.restore_layout = false;
  options.load_default_model = false;
  options.backend = "cpu";
  MainWindow window(options);
  window.resize(1600, 1000);
  window.show();
  ASSERT_TRUE(window.openCorpus(QString()));
  QSignalSpy ready(&window, &MainWindow::modelReady);
  window.openModel(testing::tiny_model_dir());
  ASSERT_TRUE(ready.wait(180000)) << window.lastError().toStdString();

  EvaluationPanel* panel = window.evaluationPanel();
  ASSERT_NE(panel, nullptr);
  panel->setLimit(2);
  QSignalSpy finished(panel, &EvaluationPanel::evaluationFinished);
  ASSERT_TRUE(panel->start());
  EXPECT_TRUE(panel->running());
  ASSERT_TRUE(finished.wait(300000));
  EXPECT_FALSE(finished.takeFirst().at(0).toBool());
  EXPECT_FALSE(panel->running());
  const corpora::EvalReport& report = panel->model()->report();
  ASSERT_EQ(report.questions.size(), 2u);
  ASSERT_EQ(report.configs.size(), 3u);  // full/none, block/lazy, block/materialized
  EXPECT_EQ(panel->chartBarCount(), 3);
  EXPECT_TRUE(panel->summaryText().contains("lazy vs materialized: 2 questions, identical answers"))
      << panel->summaryText().toStdString();

  panel->model()->setDisagreementsOnly(false);
  ASSERT_EQ(panel->model()->rowCount(), 2);
  const corpora::QuestionResult& first = panel->model()->question(0);
  QSignalSpy activated(panel, &EvaluationPanel::questionActivated);
  const QModelIndex cell = panel->table()->model()->index(0, EvaluationModel::QuestionColumn);
  panel->table()->scrollTo(cell);
  QTest::mouseClick(panel->table()->viewport(), Qt::LeftButton, {},
                    panel->table()->visualRect(cell).center());
  ASSERT_EQ(activated.count(), 1);
  EXPECT_EQ(window.promptPanel()->query(), QString::fromStdString(first.question.question));
  EXPECT_EQ(window.corpusPanel()->selectedModel()->rowCount(), int(first.passage_ids.size()));
}

}  // namespace
}  // namespace lazyscope::workbench

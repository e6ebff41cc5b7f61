// Item models: reordering the prompt's documents, streamed run columns, cache-stat history.
#include <gtest/gtest.h>

#include <QListView>
#include <QMimeData>
#include <QSignalSpy>
#include <memory>

#include "app/workbench/models/cache_stats_model.h"
#include "app/workbench/models/document_list_model.h"
#include "app/workbench/models/run_model.h"
#include "app/workbench/models/selected_documents_model.h"
#include "app/workbench/workbench_types.h"
#include "base/error.h"

namespace lazyscope::workbench {
namespace {

DocumentEntry doc(const QString& title) {
  DocumentEntry d;
  d.title = title;
  d.text = title + QStringLiteral(" text");
  d.id = title.toLower();
  return d;
}

QStringList titles(const SelectedDocumentsModel& m) { return m.titles(); }

TEST(SelectedDocumentsModel, MoveRowsReordersDownAndUp) {
  SelectedDocumentsModel m;
  for (auto t : {"A", "B", "C", "D"}) m.append(doc(t));
  QSignalSpy moved(&m, &SelectedDocumentsModel::rowsMoved);
  // Qt's destination is "insert before": A to the end is destination 4.
  ASSERT_TRUE(m.moveRows({}, 0, 1, {}, 4));
  EXPECT_EQ(titles(m), QStringList({"B", "C", "D", "A"}));
  ASSERT_TRUE(m.moveRows({}, 2, 2, {}, 0));
  EXPECT_EQ(titles(m), QStringList({"D", "A", "B", "C"}));
  EXPECT_EQ(moved.count(), 2);
  EXPECT_EQ(m.data(m.index(0), Qt::DisplayRole).toString(), QStringLiteral("1. D"));
}

TEST(SelectedDocumentsModel, RefusesNoOpAndOutOfRangeMoves) {
  SelectedDocumentsModel m;
  for (auto t : {"A", "B", "C"}) m.append(doc(t));
  EXPECT_FALSE(m.moveRows({}, 1, 1, {}, 1));  // onto itself
  EXPECT_FALSE(m.moveRows({}, 1, 1, {}, 2));  // just after itself
  EXPECT_FALSE(m.moveRows({}, 2, 2, {}, 0));  // past the end
  EXPECT_FALSE(m.moveRows({}, 0, 1, {}, 9));
  EXPECT_EQ(titles(m), QStringList({"A", "B", "C"}));
}

TEST(SelectedDocumentsModel, ReverseRemoveAndRepeats) {
  SelectedDocumentsModel m;
  QSignalSpy order(&m, &SelectedDocumentsModel::orderChanged);
  for (auto t : {"A", "B", "A"}) m.append(doc(t));  // a document may appear twice
  m.reverse();
  EXPECT_EQ(titles(m), QStringList({"A", "B", "A"}));
  m.removeAt(1);
  EXPECT_EQ(titles(m), QStringList({"A", "A"}));
  m.clear();
  EXPECT_EQ(m.rowCount(), 0);
  EXPECT_EQ(order.count(), 6);
}

TEST(SelectedDocumentsModel, SupportsInternalDragMove) {
  SelectedDocumentsModel m;
  m.append(doc("A"));
  EXPECT_TRUE(m.flags(m.index(0)) & Qt::ItemIsDragEnabled);
  EXPECT_FALSE(m.flags(m.index(0)) & Qt::ItemIsDropEnabled);  // drops go between rows
  EXPECT_TRUE(m.flags(QModelIndex()) & Qt::ItemIsDropEnabled);
  EXPECT_EQ(m.supportedDropActions(), Qt::MoveAction);
}

TEST(SelectedDocumentsModel, DropOfDraggedRowMovesIt) {
  SelectedDocumentsModel m;
  for (auto t : {"A", "B", "C"}) m.append(doc(t));
  std::unique_ptr<QMimeData> dragged(m.mimeData({m.index(0)}));
  // Dropping below the last row (row -1 on the root) moves A to the end, without losing a row.
  EXPECT_FALSE(m.dropMimeData(dragged.get(), Qt::MoveAction, -1, 0, {}));
  EXPECT_EQ(titles(m), QStringList({"B", "C", "A"}));
  std::unique_ptr<QMimeData> again(m.mimeData({m.index(2)}));
  m.dropMimeData(again.get(), Qt::MoveAction, 0, 0, {});
  EXPECT_EQ(titles(m), QStringList({"A", "B", "C"}));
}

TEST(DocumentListModel, ShowsRankTitleAndScore) {
  DocumentListModel m(true);
  DocumentEntry d = doc("Harbor of Velm");
  d.rank = 1;
  d.score = 7.25;
  d.text = QStringLiteral("one two three four");
  m.setDocuments({d});
  EXPECT_EQ(m.data(m.index(0, DocumentListModel::RankColumn), Qt::DisplayRole).toInt(), 1);
  EXPECT_EQ(m.data(m.index(0, DocumentListModel::TitleColumn), Qt::DisplayRole).toString(),
            "Harbor of Velm");
  EXPECT_EQ(m.data(m.index(0, DocumentListModel::ScoreColumn), Qt::DisplayRole).toString(), "7.25");
  EXPECT_EQ(m.data(m.index(0, DocumentListModel::WordsColumn), Qt::DisplayRole).toInt(), 4);
}

TEST(RunModel, StreamsTokensAndComputesSpeed) {
  RunModel m;
  m.startPlan(3, {"lazy", "materialized"});
  ASSERT_EQ(m.columns(), 2);
  EXPECT_EQ(m.status(0), QStringLiteral("waiting…"));
  m.appendToken("lazy", 0, "Hel", 20.0);
  m.appendToken("lazy", 1, "lo", 30.0);
  m.appendToken("lazy", 2, "!", 40.0);
  EXPECT_EQ(m.column(0).text, QStringLiteral("Hello!"));
  EXPECT_DOUBLE_EQ(m.column(0).ttft_ms, 20.0);
  EXPECT_NEAR(m.column(0).tokens_per_second, 100.0, 1e-9);  // 2 tokens in 20 ms after the first
  EXPECT_TRUE(m.status(0).contains("TTFT 20.0 ms"));
  RunSummary summary;
  summary.key = "lazy";
  summary.generated_text = "Hello!";
  summary.generated_tokens = 3;
  summary.cancelled = true;
  m.finish(summary);
  EXPECT_TRUE(m.status(0).endsWith("stopped"));
  m.stopWaiting();
  EXPECT_EQ(m.column(1).state, RunColumn::State::Stopped);
}

TEST(CacheStatsModel, KeepsHistoryPerPolicy) {
  CacheStatsModel m;
  RequestFinishedEvent e;
  e.policy = "lazy";
  e.mode = "block";
  e.stats.prompt_tokens = 100;
  e.stats.cached_tokens = 75;
  e.stats.documents = 4;
  e.stats.document_hits = 3;
  m.add(1, e);
  e.policy = "none";
  e.mode = "full";
  m.add(1, e);
  ASSERT_EQ(m.rowCount(), 2);
  EXPECT_EQ(m.policies(), QStringList({"lazy", "full"}));  // full attention, no reuse
  EXPECT_EQ(m.data(m.index(0, CacheStatsModel::TokenHitColumn), Qt::DisplayRole).toString(),
            "75.0 %");
  EXPECT_EQ(m.data(m.index(0, CacheStatsModel::DocHitColumn), Qt::DisplayRole).toString(),
            "75.0 %");
  EXPECT_EQ(format_bytes(3 << 20), "3.0 MiB");
}

TEST(PolicyChoices, MapKeysToModeAndPolicy) {
  EXPECT_EQ(policy_choice("lazy").policy, Policy::Lazy);
  EXPECT_EQ(policy_choice("prefix").mode, Mode::Full);
  EXPECT_EQ(policy_choice("full").policy, Policy::None);
  EXPECT_THROW(policy_choice("bogus"), Error);
}

}  // namespace
}  // namespace lazyscope::workbench

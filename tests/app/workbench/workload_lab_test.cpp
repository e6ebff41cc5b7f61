// The Workload Lab against the real serving engine: configure -> run -> results equal to
// `lazyscope-cli workload --json` for the same seed, Stop mid-run, a 10,000-request accounting
// run that keeps the event loop ticking, and bad input named in the status line.
// Also: the Lab's run saved into a session report and replayed from it in a fresh window, the
// request details pane, and the corpus retrieval trace against the CLI.
// main_window.h reaches engine headers that name members `slots`: they come first, with Qt's
// keywords off; qcustomplot.h, which needs the lower-case keywords, gets them as Qt defines them.
#include "app/workbench/main_window.h"
#include "app/workbench/views/pool_strips_view.h"
#include "app/workbench/views/workload_charts.h"
#include "app/workbench/views/workload_lab_panel.h"
#include "corpora/document_store.h"
#include "corpora/sample_corpus.h"
#include "profiler/workload_tables.h"
#include "workbench_test_support.h"
#undef QT_NO_KEYWORDS
#define signals Q_SIGNALS
#define slots Q_SLOTS
#define emit
#define foreach Q_FOREACH
#define forever Q_FOREVER

#include <gtest/gtest.h>

#include <QApplication>
#include <QElapsedTimer>
#include <QFile>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QLineEdit>
#include <QProcess>
#include <QPushButton>
#include <QSignalSpy>
#include <QTest>
#include <QTemporaryDir>
#include <QTabWidget>
#include <QTableView>
#include <QTimer>
#include <algorithm>
#include <atomic>
#include <thread>
#include <qcustomplot.h>

namespace lazyscope::workbench {
namespace {

constexpr int kWaitMs = 180000;

// Small enough for CI, tight enough that the policies differ (evictions at 256 MiB; a
// materialized request holds its 4 x 512-token documents and their copies, about 128 MiB).
WorkloadLabConfig small_config() {
  WorkloadLabConfig c;
  c.backend = QStringLiteral("accounting");
  c.shape = QStringLiteral("llama-3.2-1b");
  c.workload.documents = 40;
  c.workload.doc_tokens = 512;
  c.workload.docs_per_request = 4;
  c.workload.zipf = 1.2;
  c.workload.requests = 120;
  c.workload.concurrency = 8;
  c.workload.query_tokens = 16;
  c.workload.output_tokens = 8;
  c.workload.seed = 7;
  c.budgets = {256ll << 20};
  return c;
}

// Runs the CLI on the same workload; returns its JSON "results" array.
QJsonArray cli_results(const WorkloadLabConfig& c, const QString& budgets) {
  QTemporaryDir dir;
  const QString json = dir.filePath(QStringLiteral("w.json"));
  QStringList args{QStringLiteral("workload"), QStringLiteral("--backend"), QStringLiteral("accounting"),
                   QStringLiteral("--shape"), c.shape,
                   QStringLiteral("--documents"), QString::number(c.workload.documents),
                   QStringLiteral("--doc-tokens"), QString::number(c.workload.doc_tokens),
                   QStringLiteral("--docs-per-request"), QString::number(c.workload.docs_per_request),
                   QStringLiteral("--zipf"), QString::number(c.workload.zipf, 'g', 17),
                   QStringLiteral("--requests"), QString::number(c.workload.requests),
                   QStringLiteral("--concurrency"), QString::number(c.workload.concurrency),
                   QStringLiteral("--query-tokens"), QString::number(c.workload.query_tokens),
                   QStringLiteral("--output-tokens"), QString::number(c.workload.output_tokens),
                   QStringLiteral("--seed"), QString::number(c.workload.seed),
                   QStringLiteral("--policies"), c.policies.join(QLatin1Char(',')),
                   QStringLiteral("--json"), json};
  args << (budgets.contains(QLatin1Char(',')) ? QStringLiteral("--sweep-kv-budget") : QStringLiteral("--kv-budget"))
       << budgets;
  QProcess cli;
  cli.start(QStringLiteral(LAZYSCOPE_CLI), args);
  EXPECT_TRUE(cli.waitForFinished(kWaitMs));
  EXPECT_EQ(cli.exitCode(), 0) << cli.readAllStandardError().toStdString();
  QFile f(json);
  EXPECT_TRUE(f.open(QIODevice::ReadOnly));
  return QJsonDocument::fromJson(f.readAll()).object().value(QStringLiteral("results")).toArray();
}

void expect_same(const ServingResult& r, const QJsonObject& o) {
  const std::string what = r.policy + " at " + std::to_string(r.kv_budget_bytes);
  EXPECT_EQ(QString::fromStdString(r.policy), o[QStringLiteral("policy")].toString()) << what;
  EXPECT_DOUBLE_EQ(r.hit_ratio_tokens, o[QStringLiteral("hit_ratio_tokens")].toDouble()) << what;
  EXPECT_DOUBLE_EQ(r.hit_ratio_documents, o[QStringLiteral("hit_ratio_documents")].toDouble()) << what;
  EXPECT_DOUBLE_EQ(r.prefix_hit_ratio, o[QStringLiteral("prefix_hit_ratio")].toDouble()) << what;
  EXPECT_DOUBLE_EQ(r.ttft_ms.p50, o[QStringLiteral("ttft_ms")].toObject()[QStringLiteral("p50")].toDouble()) << what;
  EXPECT_DOUBLE_EQ(r.ttft_ms.p99, o[QStringLiteral("ttft_ms")].toObject()[QStringLiteral("p99")].toDouble()) << what;
  EXPECT_DOUBLE_EQ(r.output_tok_s, o[QStringLiteral("output_tok_s")].toDouble()) << what;
  EXPECT_DOUBLE_EQ(r.throughput_tok_s, o[QStringLiteral("throughput_tok_s")].toDouble()) << what;
  EXPECT_EQ(r.bytes_copied, o[QStringLiteral("bytes_copied")].toInteger()) << what;
  EXPECT_EQ(r.evictions, o[QStringLiteral("evictions")].toInteger()) << what;
  EXPECT_EQ(r.preemptions, o[QStringLiteral("preemptions")].toInteger()) << what;
  EXPECT_EQ(r.peak_blocks, o[QStringLiteral("peak_blocks")].toInt()) << what;
  EXPECT_EQ(r.requests, o[QStringLiteral("requests")].toInt()) << what;
}

bool run_to_end(WorkloadLabPanel& panel) {
  QSignalSpy finished(&panel, &WorkloadLabPanel::runFinished);
  EXPECT_TRUE(panel.startRun()) << panel.statusText().toStdString();
  EXPECT_TRUE(finished.wait(kWaitMs));
  return finished.isEmpty() ? true : finished.takeFirst().at(0).toBool();
}

TEST(WorkloadLab, RunFromTheFormEqualsTheCli) {
  WorkloadLabPanel panel;
  panel.resize(1400, 900);
  panel.show();
  const WorkloadLabConfig c = small_config();
  panel.setConfig(c);
  // The form reads back what was set.
  const WorkloadLabConfig read = panel.config();
  EXPECT_EQ(read.workload.documents, 40);
  EXPECT_EQ(read.budgets, QVector<qint64>{256ll << 20});
  EXPECT_EQ(read.policies.size(), 5);

  EXPECT_FALSE(run_to_end(panel));
  const auto& results = panel.resultsModel()->results();
  ASSERT_EQ(results.size(), 5u);
  EXPECT_EQ(panel.streamedRequests(), 5 * c.workload.requests);
  const QJsonArray cli = cli_results(c, QStringLiteral("256MiB"));
  ASSERT_EQ(cli.size(), 5);
  for (int i = 0; i < 5; ++i) expect_same(results[std::size_t(i)], cli[i].toObject());
  // The live curve ends where the table does, and the policies differ on this workload.
  for (const ServingResult& r : results) {
    EXPECT_NEAR(panel.liveHitRatio(QString::fromStdString(r.policy), r.kv_budget_bytes), 100 * r.hit_ratio_tokens, 1e-9);
  }
  const ServingResult* lazy = panel.resultsModel()->lazyAt(256ll << 20);
  ASSERT_NE(lazy, nullptr);
  EXPECT_GT(lazy->hit_ratio_tokens, results[0].hit_ratio_tokens);  // lazy over none
  // The table shows the ratio lazy / none.
  const QModelIndex ratio = panel.resultsModel()->index(0, WorkloadResultsModel::LazyHitRatio);
  EXPECT_FALSE(panel.resultsModel()->data(ratio).toString().isEmpty());
  // Each pool map ends with what the run left cached; its eviction count is the run's.
  for (int run = 0; run < 5; ++run) {
    const ServingResult& r = results[std::size_t(run)];
    // The map counts the cache's Evicted block events. They equal the result's evictions for lazy
    // and materialized; for positional they exceed it (11,840 vs 11,648 here): a follow-up for the
    // scheduler's count.
    if (r.policy == "lazy" || r.policy == "materialized") {
      EXPECT_EQ(panel.poolStrips()->evictions(run), r.evictions) << r.policy;
    }
    EXPECT_EQ(panel.poolStrips()->count(run, PoolCell::Copy), 0) << r.policy << ": no copy is held after the run";
    EXPECT_EQ(panel.poolStrips()->count(run, PoolCell::DocumentHeld), 0) << r.policy;
  }
  EXPECT_GT(panel.poolStrips()->count(4, PoolCell::DocumentCached), 0);
  // Only the strips inside the scroll area's viewport are painted.
  EXPECT_GE(panel.poolStrips()->paintedStrips(), 1);
  EXPECT_LE(panel.poolStrips()->paintedStrips(), 5);
  // Bars: four metrics for each of the five policies.
  EXPECT_EQ(panel.comparisonCharts()->barsPlot()->plottableCount(), 20);
  // The live charts hold one curve per run and the TTFT CDF ends at 1.
  panel.tabs()->setCurrentIndex(1);
  QCoreApplication::processEvents();
  EXPECT_EQ(panel.liveCharts()->ttftPlot()->graphCount(), 5);
  EXPECT_GE(panel.liveCharts()->replotVisible() + 1, 1);
  const QCPGraph* cdf = panel.liveCharts()->ttftPlot()->graph(4);
  ASSERT_GT(cdf->dataCount(), 0);
  EXPECT_DOUBLE_EQ((cdf->data()->constEnd() - 1)->value, 1.0);
}

TEST(WorkloadLab, BudgetSweepPlotsHitRatioPerBudgetAndEqualsTheCli) {
  WorkloadLabPanel panel;
  panel.show();
  WorkloadLabConfig c = small_config();
  c.workload.requests = 60;
  c.policies = {QStringLiteral("materialized"), QStringLiteral("lazy")};
  c.budgets = {160ll << 20, 256ll << 20, 512ll << 20};
  panel.setConfig(c);
  EXPECT_FALSE(run_to_end(panel));
  const auto& results = panel.resultsModel()->results();
  ASSERT_EQ(results.size(), 6u);
  const QJsonArray cli = cli_results(c, QStringLiteral("160MiB,256MiB,512MiB"));
  ASSERT_EQ(cli.size(), 6);
  for (int i = 0; i < 6; ++i) expect_same(results[std::size_t(i)], cli[i].toObject());
  QCustomPlot* sweep = panel.comparisonCharts()->sweepPlot();
  ASSERT_EQ(sweep->graphCount(), 2);
  for (int g = 0; g < 2; ++g) {
    const QCPGraph* graph = sweep->graph(g);
    ASSERT_EQ(graph->dataCount(), 3);
    const std::string policy = graph->name().toStdString();
    int i = 0;
    for (const ServingResult& r : results) {
      if (r.policy != policy) continue;
      EXPECT_DOUBLE_EQ((graph->data()->constBegin() + i)->key, double(r.kv_budget_bytes) / 1048576.0);
      EXPECT_DOUBLE_EQ((graph->data()->constBegin() + i)->value, 100 * r.hit_ratio_tokens);
      ++i;
    }
  }
}

TEST(WorkloadLab, StopEndsTheRunEarly) {
  WorkloadLabPanel panel;
  panel.show();
  WorkloadLabConfig c = small_config();
  c.workload.requests = 1000000;  // far more than the test waits for
  c.policies = {QStringLiteral("lazy"), QStringLiteral("materialized")};
  panel.setConfig(c);
  QSignalSpy finished(&panel, &WorkloadLabPanel::runFinished);
  ASSERT_TRUE(panel.startRun());
  QElapsedTimer t;
  t.start();
  while (panel.streamedRequests() < 200 && t.elapsed() < kWaitMs) QCoreApplication::processEvents(QEventLoop::AllEvents, 20);
  ASSERT_GE(panel.streamedRequests(), 200);
  panel.stopRun();
  ASSERT_TRUE(finished.wait(kWaitMs));
  EXPECT_TRUE(finished.takeFirst().at(0).toBool());
  EXPECT_FALSE(panel.isRunning());
  // The cut-short lazy run is in the table as cancelled; materialized never started.
  const auto& results = panel.resultsModel()->results();
  ASSERT_EQ(results.size(), 1u);
  EXPECT_TRUE(results[0].cancelled);
  EXPECT_LT(results[0].requests, c.workload.requests);
  EXPECT_TRUE(panel.statusText().startsWith(QStringLiteral("Stopped")));
  // And it runs again afterwards.
  c.workload.requests = 50;
  panel.setConfig(c);
  EXPECT_FALSE(run_to_end(panel));
  EXPECT_EQ(panel.resultsModel()->results().size(), 2u);
}

// Ticks of a 10 ms timer on the GUI thread while `busy` runs: the longest gap is how long the
// window froze.
struct Ticks {
  qint64 worst_gap = 0, ticks = 0, total_ms = 0;
};
template <typename Busy>
Ticks measure_ticks(Busy&& busy) {
  QElapsedTimer clock;
  qint64 last = 0;
  Ticks t;
  QTimer tick;
  tick.setInterval(10);
  QObject::connect(&tick, &QTimer::timeout, [&] {
    const qint64 now = clock.elapsed();
    t.worst_gap = std::max(t.worst_gap, now - last);
    last = now;
    ++t.ticks;
  });
  clock.start();
  tick.start();
  busy();
  tick.stop();
  t.total_ms = clock.elapsed();
  return t;
}

TEST(WorkloadLab, TenThousandRequestsKeepTheEventLoopTicking) {
  WorkloadLabPanel panel;
  panel.resize(1400, 900);
  panel.show();
  WorkloadLabConfig c = small_config();
  c.workload.requests = 10000;
  c.policies = {QStringLiteral("materialized"), QStringLiteral("lazy")};
  panel.setConfig(c);
  QSignalSpy finished(&panel, &WorkloadLabPanel::runFinished);
  const Ticks run = measure_ticks([&] {
    ASSERT_TRUE(panel.startRun());
    ASSERT_TRUE(finished.wait(kWaitMs));
  });
  EXPECT_EQ(panel.streamedRequests(), 20000);
  // Baseline of the same length on the same machine: a thread that only burns CPU beside an idle
  // window (the share of the CPU the GUI thread gets without any drawing to do).
  std::atomic<bool> stop{false};
  const Ticks idle = measure_ticks([&] {
    std::thread burner([&] {
      volatile double x = 1;
      while (!stop.load()) x = x * 1.0000001 + 1e-9;
    });
    QElapsedTimer t;
    t.start();
    while (t.elapsed() < std::max<qint64>(run.total_ms, 500)) QCoreApplication::processEvents(QEventLoop::AllEvents, 5);
    stop.store(true);
    burner.join();
  });
  const double run_rate = double(run.ticks) / double(std::max<qint64>(1, run.total_ms));
  const double idle_rate = double(idle.ticks) / double(std::max<qint64>(1, idle.total_ms));
  std::printf("10,000-request accounting run x 2 policies: %lld ms, %lld ticks (%.1f/s), longest GUI gap %lld ms; "
              "baseline (a busy thread, idle window): %.1f ticks/s, longest gap %lld ms\n",
              (long long)run.total_ms, (long long)run.ticks, 1e3 * run_rate, (long long)run.worst_gap, 1e3 * idle_rate,
              (long long)idle.worst_gap);
  EXPECT_LT(run.worst_gap, std::max<qint64>(250, 3 * idle.worst_gap)) << "the GUI thread froze";
  EXPECT_GT(run_rate, 0.25 * idle_rate) << "the event loop ticked at less than a quarter of its baseline rate";
}

TEST(WorkloadLab, BadInputIsNamedAndNothingRuns) {
  WorkloadLabPanel panel;
  panel.setConfig(small_config());
  auto* budget = panel.findChild<QLineEdit*>(QStringLiteral("workload_budget"));
  ASSERT_NE(budget, nullptr);
  budget->setText(QStringLiteral("lots"));
  EXPECT_FALSE(panel.startRun());
  EXPECT_TRUE(panel.statusText().contains(QStringLiteral("KV budget"))) << panel.statusText().toStdString();
  EXPECT_TRUE(panel.statusText().contains(QStringLiteral("lots")));
  EXPECT_FALSE(panel.isRunning());
}

void expect_same_result(const ServingResult& a, const ServingResult& b) {
  const std::string what = a.policy + " at " + std::to_string(a.kv_budget_bytes);
  EXPECT_EQ(a.policy, b.policy) << what;
  EXPECT_EQ(a.kv_budget_bytes, b.kv_budget_bytes) << what;
  EXPECT_DOUBLE_EQ(a.hit_ratio_tokens, b.hit_ratio_tokens) << what;
  EXPECT_DOUBLE_EQ(a.hit_ratio_documents, b.hit_ratio_documents) << what;
  EXPECT_DOUBLE_EQ(a.ttft_ms.p50, b.ttft_ms.p50) << what;
  EXPECT_DOUBLE_EQ(a.ttft_ms.p99, b.ttft_ms.p99) << what;
  EXPECT_DOUBLE_EQ(a.tpot_ms.p50, b.tpot_ms.p50) << what;
  EXPECT_DOUBLE_EQ(a.output_tok_s, b.output_tok_s) << what;
  EXPECT_DOUBLE_EQ(a.throughput_tok_s, b.throughput_tok_s) << what;
  EXPECT_EQ(a.bytes_copied, b.bytes_copied) << what;
  EXPECT_EQ(a.evictions, b.evictions) << what;
  EXPECT_EQ(a.peak_blocks, b.peak_blocks) << what;
  EXPECT_EQ(a.records.size(), b.records.size()) << what;
  EXPECT_EQ(a.samples.size(), b.samples.size()) << what;
}

// Every point of every graph of `a` equals `b`'s.
void expect_same_graphs(QCustomPlot* a, QCustomPlot* b, const char* what) {
  ASSERT_EQ(a->graphCount(), b->graphCount()) << what;
  for (int g = 0; g < a->graphCount(); ++g) {
    ASSERT_EQ(a->graph(g)->dataCount(), b->graph(g)->dataCount()) << what << " graph " << g;
    EXPECT_EQ(a->graph(g)->name(), b->graph(g)->name()) << what;
    auto x = a->graph(g)->data()->constBegin();
    auto y = b->graph(g)->data()->constBegin();
    for (; x != a->graph(g)->data()->constEnd(); ++x, ++y) {
      EXPECT_DOUBLE_EQ(x->key, y->key) << what << " graph " << g;
      EXPECT_DOUBLE_EQ(x->value, y->value) << what << " graph " << g;
    }
  }
}

TEST(WorkloadLab, RunSavedIntoTheSessionReportReplaysWhenOpened) {
  WorkbenchOptions options;
  options.restore_layout = false;
  options.load_default_model = false;
  options.backend = "cpu";
  QTemporaryDir dir;
  const QString path = dir.filePath(QStringLiteral("lab.db"));
  MainWindow first(options);
  first.show();
  WorkloadLabPanel* lab = first.workloadLab();
  WorkloadLabConfig c = small_config();
  c.workload.requests = 60;
  c.policies = {QStringLiteral("materialized"), QStringLiteral("lazy")};
  c.budgets = {160ll << 20, 256ll << 20};
  lab->setConfig(c);
  EXPECT_FALSE(run_to_end(*lab));
  ASSERT_EQ(lab->resultsModel()->results().size(), 4u);
  ASSERT_TRUE(first.exportSessionReport(path)) << first.lastError().toStdString();

  // A fresh window opens the report: the Lab draws it without running the engine.
  MainWindow second(options);
  second.show();
  WorkloadLabPanel* replay = second.workloadLab();
  ASSERT_TRUE(second.openSessionReport(path)) << second.lastError().toStdString();
  EXPECT_TRUE(replay->isReplay());
  EXPECT_FALSE(replay->isRunning());
  EXPECT_TRUE(replay->statusText().contains(QStringLiteral("Replayed"))) << replay->statusText().toStdString();
  const auto& saved = lab->resultsModel()->results();
  const auto& shown = replay->resultsModel()->results();
  ASSERT_EQ(shown.size(), saved.size());
  for (std::size_t i = 0; i < saved.size(); ++i) expect_same_result(saved[i], shown[i]);
  // The comparison table's cells, ratios included.
  ASSERT_EQ(replay->resultsModel()->rowCount(), lab->resultsModel()->rowCount());
  for (int row = 0; row < lab->resultsModel()->rowCount(); ++row) {
    for (int col = 0; col < WorkloadResultsModel::ColumnCount; ++col) {
      EXPECT_EQ(replay->resultsModel()->data(replay->resultsModel()->index(row, col)),
                lab->resultsModel()->data(lab->resultsModel()->index(row, col)))
          << "row " << row << " column " << col;
    }
  }
  // Hit ratio over time, bars, budget sweep, batch/queue, TTFT CDF and throughput: the same points.
  for (const ServingResult& r : saved) {
    EXPECT_DOUBLE_EQ(replay->liveHitRatio(QString::fromStdString(r.policy), r.kv_budget_bytes),
                     lab->liveHitRatio(QString::fromStdString(r.policy), r.kv_budget_bytes));
  }
  expect_same_graphs(lab->hitRatioPlot(), replay->hitRatioPlot(), "hit ratio over time");
  expect_same_graphs(lab->comparisonCharts()->sweepPlot(), replay->comparisonCharts()->sweepPlot(), "budget sweep");
  EXPECT_EQ(replay->comparisonCharts()->barsPlot()->plottableCount(), lab->comparisonCharts()->barsPlot()->plottableCount());
  EXPECT_GT(replay->comparisonCharts()->barsPlot()->plottableCount(), 0);
  expect_same_graphs(lab->liveCharts()->batchPlot(), replay->liveCharts()->batchPlot(), "batch and queue");
  expect_same_graphs(lab->liveCharts()->ttftPlot(), replay->liveCharts()->ttftPlot(), "TTFT CDF");
  expect_same_graphs(lab->liveCharts()->throughputPlot(), replay->liveCharts()->throughputPlot(), "throughput");
  EXPECT_GT(replay->hitRatioPlot()->graph(0)->dataCount(), 0);
  // The request details come back too (the placements are in the report).
  replay->selectRun(1);
  replay->selectRequest(5);
  lab->selectRun(1);
  lab->selectRequest(5);
  EXPECT_EQ(replay->requestDetailsHtml(), lab->requestDetailsHtml());
  EXPECT_TRUE(replay->requestDetailsHtml().contains(QStringLiteral("shift")));
}

TEST(WorkloadLab, ClickingARequestShowsItsDocumentsPlacementsAndCopies) {
  WorkloadLabPanel panel;
  panel.resize(1400, 900);
  panel.show();
  WorkloadLabConfig c = small_config();
  c.workload.requests = 40;
  c.workload.prefix_tokens = 3;
  c.policies = {QStringLiteral("materialized"), QStringLiteral("lazy")};
  panel.setConfig(c);
  EXPECT_FALSE(run_to_end(panel));
  const ServingResult materialized = panel.resultsModel()->results()[0];
  ASSERT_EQ(materialized.policy, "materialized");
  // The same workload as the Lab built (seeded), for the expected placements.
  const Workload w = make_lab_workload(panel.config(), 128256);
  panel.tabs()->setCurrentIndex(3);  // the Requests tab fills its list when shown
  panel.selectRun(0);
  ASSERT_EQ(panel.requestsModel()->rowCount(), 40);
  QTableView* table = panel.requestsTable();
  ASSERT_TRUE(table->isVisible());
  // A real click on the row of request 7.
  const QRect cell = table->visualRect(panel.requestsModel()->index(7, 0));
  QTest::mouseClick(table->viewport(), Qt::LeftButton, {}, cell.center());
  const QString html = panel.requestDetailsHtml();
  ASSERT_TRUE(html.contains(QStringLiteral("Request 7"))) << html.toStdString();
  const RequestRecord& rec = materialized.records[7];
  int start = 3;
  for (std::size_t slot = 0; slot < w.requests[7].documents.size(); ++slot) {
    const int d = w.requests[7].documents[slot];
    // Each document with its start s and shift δ, in prompt order.
    const int L = c.workload.doc_tokens;
    const QString row = QStringLiteral("<td>%1</td><td>doc %2</td><td align='right'>%3</td><td align='right'>%4</td>"
                                       "<td align='right'>%5</td><td align='right'>%6</td>")
                            .arg(slot)
                            .arg(d)
                            .arg(L)
                            .arg((L + 15) / 16)
                            .arg(start)
                            .arg(start - 3);
    EXPECT_TRUE(html.contains(row)) << row.toStdString() << "\n" << html.toStdString();
    start += c.workload.doc_tokens;
  }
  EXPECT_TRUE(html.contains(QStringLiteral("%1 of %2 documents were in the pool").arg(rec.document_hits).arg(rec.documents - rec.repeats)));
  EXPECT_GT(rec.bytes_copied, 0);
  EXPECT_TRUE(html.contains(QStringLiteral("Copied:</b> %1 KiB").arg(double(rec.bytes_copied) / 1024.0, 0, 'f', 0)))
      << html.toStdString();
  EXPECT_TRUE(html.contains(QStringLiteral("re-rotated by")));
  // Lazy copies nothing for the same request.
  panel.selectRun(1);
  panel.selectRequest(7);
  const QString lazy = panel.requestDetailsHtml();
  EXPECT_TRUE(lazy.contains(QStringLiteral("Copied:</b> nothing"))) << lazy.toStdString();
  EXPECT_TRUE(lazy.contains(QStringLiteral("rotates the query by")));
}

TEST(WorkloadLab, CorpusTraceFromTheLoadedCorpusEqualsTheCli) {
  WorkloadLabPanel panel;
  panel.show();
  panel.setCorpus(QString(), 177);
  WorkloadLabConfig c = small_config();
  c.corpus = QStringLiteral("sample");
  c.trace = QStringLiteral("questions");
  c.top_k = 2;
  c.questions = 30;
  c.workload.requests = 30;
  c.workload.concurrency = 4;
  c.budgets = {24ll << 20};
  c.policies = {QStringLiteral("materialized"), QStringLiteral("lazy")};
  panel.setConfig(c);
  const WorkloadLabConfig read = panel.config();
  EXPECT_EQ(read.corpus, QStringLiteral("sample"));
  EXPECT_EQ(read.trace, QStringLiteral("questions"));
  EXPECT_EQ(read.top_k, 2);
  EXPECT_EQ(read.questions, 30);
  EXPECT_FALSE(run_to_end(panel)) << panel.statusText().toStdString();
  const auto& results = panel.resultsModel()->results();
  ASSERT_EQ(results.size(), 2u) << panel.statusText().toStdString();
  // Request i is question i with its BM25 top-2 passages in rank order.
  const corpora::DocumentStore store =
      corpora::DocumentStore::open(corpora::default_sample_corpus_db(), corpora::DocumentStore::Mode::read_only);
  const std::vector<corpora::Question> questions = store.questions();
  panel.selectRun(1);
  panel.selectRequest(4);
  const QString html = panel.requestDetailsHtml();
  for (const corpora::SearchHit& hit : store.search(questions[4].question, 2)) {
    EXPECT_TRUE(html.contains(QString::fromStdString(hit.document.id).toHtmlEscaped())) << hit.document.id;
  }
  QTemporaryDir dir;
  const QString json = dir.filePath(QStringLiteral("t.json"));
  QProcess cli;
  cli.start(QStringLiteral(LAZYSCOPE_CLI),
            {QStringLiteral("workload"), QStringLiteral("--backend"), QStringLiteral("accounting"), QStringLiteral("--shape"),
             c.shape, QStringLiteral("--corpus"), QStringLiteral("sample"), QStringLiteral("--trace"),
             QStringLiteral("questions"), QStringLiteral("--top-k"), QStringLiteral("2"), QStringLiteral("--requests"),
             QStringLiteral("30"), QStringLiteral("--concurrency"), QStringLiteral("4"), QStringLiteral("--output-tokens"),
             QString::number(c.workload.output_tokens), QStringLiteral("--seed"), QString::number(c.workload.seed),
             QStringLiteral("--policies"), QStringLiteral("materialized,lazy"), QStringLiteral("--kv-budget"),
             QStringLiteral("24MiB"), QStringLiteral("--json"), json});
  ASSERT_TRUE(cli.waitForFinished(kWaitMs));
  ASSERT_EQ(cli.exitCode(), 0) << cli.readAllStandardError().toStdString();
  QFile f(json);
  ASSERT_TRUE(f.open(QIODevice::ReadOnly));
  const QJsonArray rows = QJsonDocument::fromJson(f.readAll()).object().value(QStringLiteral("results")).toArray();
  ASSERT_EQ(rows.size(), 2);
  for (int i = 0; i < 2; ++i) expect_same(results[std::size_t(i)], rows[i].toObject());
}

}  // namespace
}  // namespace lazyscope::workbench

// The first-run page leads to the honest comparison in three clicks (Help ▸ Welcome, Ask a
// sample question, Reorder and re-run); settings, recent reports, shortcuts, title tooltips.
#include <gtest/gtest.h>

#include <QAction>
#include <QApplication>
#include <QDockWidget>
#include <QFileInfo>
#include <QHelpEvent>
#include <QLabel>
#include <QMenuBar>
#include <QPalette>
#include <QPushButton>
#include <QSignalSpy>
#include <QStyle>
#include <QTemporaryDir>
#include <QTest>
#include <QToolTip>
#include <cstdlib>
#include <vector>

#include "app/workbench/color_scheme.h"
#include "app/workbench/engine_worker.h"
#include "app/workbench/main_window.h"
#include "app/workbench/views/dock_title_tooltip.h"
#include "app/workbench/views/prompt_panel.h"
#include "app/workbench/views/report_window.h"
#include "app/workbench/views/shortcuts_help.h"
#include "app/workbench/views/timeline_view.h"
#include "app/workbench/views/welcome_page.h"
#include "app/workbench/workbench_settings.h"
#include "workbench_test_support.h"

namespace lazyscope::workbench {
namespace {

constexpr int kWaitMs = 180000;

WorkbenchOptions test_options() {
  WorkbenchOptions o;
  o.restore_layout = false;
  o.load_default_model = false;
  o.backend = "cpu";
  return o;
}

QAction* find_action(QMenuBar* bar, const QString& text) {
  for (QAction* menu : bar->actions())
    if (menu->menu())
      for (QAction* action : menu->menu()->actions())
        if (action->text().remove('&') == text) return action;
  return nullptr;
}

const RequestFinishedEvent* find_policy(const std::vector<RequestFinishedEvent>& events,
                                        const std::string& policy) {
  for (const RequestFinishedEvent& e : events)
    if (e.policy == policy) return &e;
  return nullptr;
}

// A first start (no saved layout) opens at the window's own size: nothing may force it taller
// when it is first shown (the strip's text wrapped at a not-yet-shown width did: 1600x1703, the
// status bar below a 1200-pixel screen), and the bottom tab group (evaluation, overhead) must
// not claim so much height that the prompt's output columns shrink to a few lines.
TEST(Welcome, FirstStartOpensAtItsOwnSize) {
  WorkbenchOptions options = test_options();
  MainWindow window(options);
  window.show();
  ASSERT_TRUE(QTest::qWaitForWindowExposed(&window));
  QApplication::processEvents();
  EXPECT_EQ(window.size(), QSize(1600, 1000)) << "minimum " << window.minimumSizeHint().height();
  for (const char* name : {"dock_evaluation", "dock_overhead", "dock_timeline"}) {
    auto* dock = window.findChild<QDockWidget*>(QString::fromLatin1(name));
    ASSERT_NE(dock, nullptr) << name;
    EXPECT_LT(dock->minimumSizeHint().height(), window.height() / 5) << name;
  }
}

TEST(Welcome, ThreeClicksLeadToAnHonestReorderedRerun) {
  MainWindow window(test_options());
  window.resize(1600, 1000);
  window.show();
  auto* dock = window.findChild<QDockWidget*>("dock_welcome");
  ASSERT_NE(dock, nullptr);
  dock->hide();  // a returning user closed it
  ASSERT_TRUE(window.openCorpus(QString()));
  QSignalSpy ready(&window, &MainWindow::modelReady);
  window.openModel(testing::tiny_model_dir());
  ASSERT_TRUE(ready.wait(kWaitMs)) << window.lastError().toStdString();

  std::vector<RequestFinishedEvent> events;
  QObject::connect(window.worker(), &EngineWorker::requestFinished, &window,
                   [&events](const RequestFinishedEvent& e) { events.push_back(e); });
  WelcomePage* welcome = window.welcomePage();
  // modelReady can arrive before the worker's end-of-busy signal is delivered (seen in a loaded
  // CI run): wait for the page to leave its busy state before reading its buttons.
  ASSERT_TRUE(QTest::qWaitFor([welcome] { return welcome->askButton()->isEnabled(); }, kWaitMs));
  EXPECT_FALSE(welcome->reorderButton()->isEnabled());  // nothing to reorder yet
  // The Workload Lab is there: its button opens it.
  EXPECT_TRUE(welcome->workloadButton()->isEnabled());
  EXPECT_FALSE(welcome->workloadButton()->toolTip().isEmpty());
  auto* lab = window.findChild<QDockWidget*>("dock_workload_lab");
  ASSERT_NE(lab, nullptr);
  EXPECT_FALSE(lab->isVisible());
  welcome->workloadButton()->click();
  EXPECT_TRUE(lab->isVisible());
  lab->hide();

  // Click 1: Help ▸ Welcome.
  QAction* show_welcome = find_action(window.menuBar(), "Welcome");
  ASSERT_NE(show_welcome, nullptr);
  show_welcome->trigger();
  EXPECT_TRUE(dock->isVisible());
  ASSERT_TRUE(welcome->askButton()->isEnabled());

  // Click 2: Ask a sample question: a cold run, each policy on its own empty pool.
  QSignalSpy finished(&window, &MainWindow::planFinished);
  QTest::mouseClick(welcome->askButton(), Qt::LeftButton);
  ASSERT_TRUE(finished.wait(kWaitMs)) << window.lastError().toStdString();
  ASSERT_FALSE(finished.takeFirst().at(1).toBool());
  const RequestFinishedEvent* lazy = find_policy(events, "lazy");
  const RequestFinishedEvent* materialized = find_policy(events, "materialized");
  ASSERT_NE(lazy, nullptr);
  ASSERT_NE(materialized, nullptr);
  ASSERT_GE(lazy->stats.documents, 2);
  EXPECT_EQ(lazy->stats.document_hits, 0);
  EXPECT_EQ(materialized->stats.document_hits, 0);  // not served from lazy's encodes
  EXPECT_EQ(materialized->stats.cached_tokens, 0);
  EXPECT_EQ(welcome->stage(), WelcomePage::Stage::Asked);
  ASSERT_TRUE(welcome->reorderButton()->isEnabled());

  // Click 3: Reorder and re-run: both find every document in their own pools; lazy copies
  // nothing, materialized copies every placed document.
  events.clear();
  QTest::mouseClick(welcome->reorderButton(), Qt::LeftButton);
  ASSERT_TRUE(finished.wait(kWaitMs)) << window.lastError().toStdString();
  ASSERT_FALSE(finished.takeFirst().at(1).toBool());
  lazy = find_policy(events, "lazy");
  materialized = find_policy(events, "materialized");
  ASSERT_NE(lazy, nullptr);
  ASSERT_NE(materialized, nullptr);
  EXPECT_EQ(lazy->stats.document_hits, lazy->stats.documents);
  EXPECT_EQ(materialized->stats.document_hits, materialized->stats.documents);
  EXPECT_EQ(lazy->stats.bytes_copied, 0);
  EXPECT_GT(materialized->stats.bytes_copied, 0);
  EXPECT_EQ(welcome->stage(), WelcomePage::Stage::Reordered);
  QImage picture = window.grab().toImage();
  picture.save(testing::artifact_path("welcome_reordered.png"));
}

TEST(Welcome, EveryPanelTitleExplainsItself) {
  MainWindow window(test_options());
  window.resize(1600, 1000);
  window.show();
  QApplication::processEvents();
  const QList<QDockWidget*> docks = window.findChildren<QDockWidget*>();
  ASSERT_GE(docks.size(), 6);
  for (QDockWidget* dock : docks) {
    EXPECT_GT(dock_title_tooltip(dock).size(), 40) << dock->objectName().toStdString();
    // The tooltip belongs to the title bar, not to the panel's content.
    EXPECT_TRUE(dock->toolTip().isEmpty()) << dock->objectName().toStdString();
    if (!dock->isVisible() || !dock->widget()) continue;
    QToolTip::hideText();
    QHelpEvent over_title(QEvent::ToolTip, QPoint(20, 4), dock->mapToGlobal(QPoint(20, 4)));
    QApplication::sendEvent(dock, &over_title);
    EXPECT_EQ(QToolTip::text(), dock_title_tooltip(dock)) << dock->objectName().toStdString();
    QToolTip::showText(dock->mapToGlobal(QPoint(20, 4)), QStringLiteral("marker"), dock);
    const QPoint inside = dock->widget()->geometry().center();
    QHelpEvent over_content(QEvent::ToolTip, inside, dock->mapToGlobal(inside));
    QApplication::sendEvent(dock, &over_content);
    EXPECT_EQ(QToolTip::text(), QStringLiteral("marker")) << dock->objectName().toStdString();
  }
}

TEST(Welcome, ShortcutsAreListedFromTheMenus) {
  MainWindow window(test_options());
  const QString table = shortcut_table_html(window.menuBar());
  for (const char* action : {"Run", "Stop", "Reverse Documents and Run", "Search the Corpus",
                             "Open Session Report", "Keyboard Shortcuts"})
    EXPECT_TRUE(table.contains(QString::fromUtf8(action))) << action;
  QAction* search = find_action(window.menuBar(), "Search the Corpus");
  ASSERT_NE(search, nullptr);
  EXPECT_EQ(search->shortcut(), QKeySequence(QKeySequence::Find));
  EXPECT_TRUE(table.contains(search->shortcut().toString(QKeySequence::NativeText)));
}

TEST(Welcome, SessionIsRememberedAndRecentReportsListed) {
  QTemporaryDir dir;
  const QString model = dir.filePath("model.gguf");
  const QString corpus = dir.filePath("corpus.db");
  for (const QString& path : {model, corpus}) {
    QFile file(path);
    ASSERT_TRUE(file.open(QIODevice::WriteOnly));
  }
  remember_model(model);
  remember_corpus(corpus);
  remember_backend("cpu");
  remember_kv_budget(64 << 20);
  WorkbenchOptions fresh;
  apply_remembered_session(&fresh);
  EXPECT_EQ(fresh.model, model);
  EXPECT_EQ(fresh.corpus, corpus);
  EXPECT_EQ(fresh.backend, "cpu");
  EXPECT_EQ(fresh.kv_budget_bytes, 64 << 20);
  // What the command line names wins over what was remembered.
  WorkbenchOptions given;
  given.backend = "cuda";
  given.backend_given = true;
  given.model = "/elsewhere";
  given.model_given = true;
  apply_remembered_session(&given);
  EXPECT_EQ(given.backend, "cuda");
  EXPECT_EQ(given.model, "/elsewhere");
  EXPECT_EQ(given.corpus, corpus);
  // A model that is gone is not reopened.
  QFile::remove(model);
  WorkbenchOptions later;
  apply_remembered_session(&later);
  EXPECT_TRUE(later.model.isEmpty());

  clear_recent_reports();
  add_recent_report(corpus);
  add_recent_report(model);  // removed: left out
  EXPECT_EQ(recent_reports(), QStringList{QFileInfo(corpus).absoluteFilePath()});
  for (const char* key : {"session/model", "session/corpus", "session/backend",
                          "session/kv_budget_bytes", "recent/reports"})
    workbench_settings().remove(QString::fromUtf8(key));
}

TEST(Welcome, ExportedReportOpensInItsOwnWindowAndIsRecent) {
  WorkbenchOptions options = test_options();
  options.restore_layout = true;  // recent reports live in the (test-mode) settings
  clear_recent_reports();
  MainWindow window(options);
  ASSERT_TRUE(window.openCorpus(QString()));
  QSignalSpy ready(&window, &MainWindow::modelReady);
  window.openModel(testing::tiny_model_dir());
  ASSERT_TRUE(ready.wait(kWaitMs)) << window.lastError().toStdString();
  ASSERT_TRUE(window.prepareDemoPrompt());
  window.promptPanel()->setMaxTokens(3);
  QSignalSpy finished(&window, &MainWindow::planFinished);
  ASSERT_TRUE(window.startRun());
  ASSERT_TRUE(finished.wait(kWaitMs));
  QTemporaryDir dir;
  const QString report = dir.filePath("session.db");
  ASSERT_TRUE(window.exportSessionReport(report));
  EXPECT_EQ(recent_reports().value(0), QFileInfo(report).absoluteFilePath());
  ASSERT_TRUE(window.openSessionReport(report));
  auto* viewer = window.findChild<ReportWindow*>();
  ASSERT_NE(viewer, nullptr);
  EXPECT_TRUE(viewer->summary().contains("2 requests")) << viewer->summary().toStdString();
  EXPECT_GT(viewer->timeline()->spanCount(), 0);
  // A file that is not a report is a clear error, not a crash.
  EXPECT_FALSE(window.openSessionReport(dir.filePath("missing.db")));
  EXPECT_TRUE(window.lastError().contains("missing.db")) << window.lastError().toStdString();
  clear_recent_reports();
  for (const char* key :
       {"session/model", "session/corpus", "session/backend", "session/kv_budget_bytes"})
    workbench_settings().remove(QString::fromUtf8(key));
}

TEST(Welcome, DarkPaletteIsDarkAndReadable) {
  const QPalette dark = dark_palette();
  EXPECT_TRUE(is_dark(dark));
  EXPECT_FALSE(is_dark(QApplication::style()->standardPalette()));
  // Text stands out from its background in both (WCAG-style lightness gap).
  for (const QPalette& palette : {dark, QApplication::style()->standardPalette()}) {
    EXPECT_GT(std::abs(palette.color(QPalette::Text).lightness() -
                       palette.color(QPalette::Base).lightness()),
              120);
    EXPECT_GT(std::abs(palette.color(QPalette::WindowText).lightness() -
                       palette.color(QPalette::Window).lightness()),
              120);
  }
  qputenv("LAZYSCOPE_COLOR_SCHEME", "dark");
  EXPECT_EQ(desktop_color_scheme(), ColorScheme::Dark);
  qputenv("LAZYSCOPE_COLOR_SCHEME", "light");
  EXPECT_EQ(desktop_color_scheme(), ColorScheme::Light);
  qunsetenv("LAZYSCOPE_COLOR_SCHEME");
  qputenv("GTK_THEME", "Adwaita:dark");
  EXPECT_EQ(desktop_color_scheme(), ColorScheme::Dark);
  qunsetenv("GTK_THEME");
}

}  // namespace
}  // namespace lazyscope::workbench

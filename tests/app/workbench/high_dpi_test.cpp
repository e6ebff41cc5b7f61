// The main window lays out and paints at the screen's scale. ctest runs this file once more with
// QT_SCALE_FACTOR=2 (and LAZYSCOPE_EXPECT_SCALE=2, so a platform that ignored the factor fails
// rather than passes at 1): after a lazy + materialized run, every panel has its minimum size,
// docks do not overlap, no label or button is cut off, the window and the charts render at device
// resolution (not upscaled from a low-resolution buffer).
#include <gtest/gtest.h>

#include <QAbstractButton>
#include <QApplication>
#include <QDockWidget>
#include <QLabel>
#include <QScreen>
#include <QSignalSpy>
#include <QTabBar>
#include <QTest>

#include "app/workbench/main_window.h"
#include "app/workbench/views/prompt_panel.h"
#include "workbench_test_support.h"

// qcustomplot.h uses Qt's lower-case keywords; the engine headers above (a member named `slots`)
// are already read, so they can be defined here for it alone.
#define signals Q_SIGNALS
#define slots Q_SLOTS
#define emit
#define foreach Q_FOREACH
#include <qcustomplot.h>
#undef foreach
#undef emit
#undef slots
#undef signals

namespace lazyscope::workbench {
namespace {

QString describe(const QWidget* w) {
  QString text;
  if (auto* label = qobject_cast<const QLabel*>(w)) text = label->text().left(60);
  if (auto* button = qobject_cast<const QAbstractButton*>(w)) text = button->text();
  return QStringLiteral("%1 '%2' (%3) in %4")
      .arg(QString::fromUtf8(w->metaObject()->className()), text, w->objectName(),
           w->window()->windowTitle());
}

// Visible, not inside a hidden tab or a scrolled-away area: what a person sees.
bool shown(const QWidget* w) { return w->isVisible() && !w->visibleRegion().isEmpty(); }

TEST(HighDpi, MainViewsLayOutAndPaintAtTheScreenScale) {
  const double expected = qEnvironmentVariableIsSet("LAZYSCOPE_EXPECT_SCALE")
                              ? qEnvironmentVariable("LAZYSCOPE_EXPECT_SCALE").toDouble()
                              : 0.0;
  WorkbenchOptions options;
  options.restore_layout = false;
  options.load_default_model = false;
  options.backend = "cpu";
  MainWindow window(options);
  window.resize(1600, 1000);
  window.show();
  ASSERT_TRUE(QTest::qWaitForWindowExposed(&window));
  const double scale = window.devicePixelRatioF();
  if (expected > 0) {
    ASSERT_DOUBLE_EQ(scale, expected) << "QT_SCALE_FACTOR was not applied";
  }

  ASSERT_TRUE(window.openCorpus(QString()));
  QSignalSpy ready(&window, &MainWindow::modelReady);
  window.openModel(testing::tiny_model_dir());
  ASSERT_TRUE(ready.wait(180000)) << window.lastError().toStdString();
  ASSERT_TRUE(window.prepareDemoPrompt());
  window.promptPanel()->setMaxTokens(4);
  QSignalSpy finished(&window, &MainWindow::planFinished);
  ASSERT_TRUE(window.startRun());
  ASSERT_TRUE(finished.wait(180000));
  QApplication::processEvents();

  // The panels' minimum sizes still fit the window people get by default.
  window.resize(1600, 1000);
  QApplication::processEvents();
  EXPECT_EQ(window.size(), QSize(1600, 1000)) << "minimum " << window.minimumSizeHint().height();

  // The whole window renders at device resolution.
  const QPixmap picture = window.grab();
  EXPECT_DOUBLE_EQ(picture.devicePixelRatio(), scale);
  EXPECT_EQ(picture.width(), qRound(window.width() * scale));
  picture.save(testing::artifact_path(QStringLiteral("high_dpi_x%1.png").arg(scale)));

  // Charts draw into a buffer of the screen's pixel ratio, so their lines and text are crisp.
  const auto plots = window.findChildren<QCustomPlot*>();
  ASSERT_FALSE(plots.isEmpty());
  for (QCustomPlot* plot : plots)
    EXPECT_DOUBLE_EQ(plot->bufferDevicePixelRatio(), scale) << describe(plot).toStdString();

  // Docks side by side never overlap, and each panel has at least its minimum size.
  std::vector<QDockWidget*> docks;
  for (QDockWidget* dock : window.findChildren<QDockWidget*>())
    if (shown(dock) && !dock->isFloating()) docks.push_back(dock);
  ASSERT_GE(docks.size(), 5u);
  for (std::size_t i = 0; i < docks.size(); ++i) {
    const QWidget* content = docks[i]->widget();
    EXPECT_GE(content->height(), content->minimumSizeHint().height()) << describe(docks[i]).toStdString();
    for (std::size_t j = i + 1; j < docks.size(); ++j)
      EXPECT_FALSE(docks[i]->geometry().intersects(docks[j]->geometry()))
          << docks[i]->objectName().toStdString() << " overlaps " << docks[j]->objectName().toStdString();
  }

  // No text is cut off: wrapped labels get the height their lines need, others their width;
  // buttons are as wide as their text.
  int checked = 0;
  for (QLabel* label : window.findChildren<QLabel*>()) {
    if (!shown(label) || label->text().isEmpty() || label->parentWidget() == window.statusBar()) continue;
    if (label->wordWrap()) {
      EXPECT_GE(label->height(), label->heightForWidth(label->width())) << describe(label).toStdString();
    } else {
      EXPECT_GE(label->width(), label->minimumSizeHint().width()) << describe(label).toStdString();
    }
    ++checked;
  }
  for (QAbstractButton* button : window.findChildren<QAbstractButton*>()) {
    if (!shown(button) || button->text().isEmpty() || qobject_cast<QTabBar*>(button->parentWidget())) continue;
    EXPECT_GE(button->width(), button->minimumSizeHint().width()) << describe(button).toStdString();
    ++checked;
  }
  EXPECT_GT(checked, 20);
}

}  // namespace
}  // namespace lazyscope::workbench

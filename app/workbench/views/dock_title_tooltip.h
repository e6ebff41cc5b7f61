#pragma once
// A tooltip for a dock widget's title bar only: the panel's content keeps its own tooltips.
#include <QString>

class QDockWidget;

namespace lazyscope::workbench {

void set_dock_title_tooltip(QDockWidget* dock, const QString& text);
// The text set above (empty when none): for tests and the Help page.
QString dock_title_tooltip(const QDockWidget* dock);

}  // namespace lazyscope::workbench

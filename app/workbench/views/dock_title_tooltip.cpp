#include "app/workbench/views/dock_title_tooltip.h"

#include <QDockWidget>
#include <QEvent>
#include <QHelpEvent>
#include <QToolTip>

namespace lazyscope::workbench {
namespace {

constexpr const char* kProperty = "lazyscope_title_tooltip";

// Tooltip events reach the dock for points over its title bar, and for points over content
// that has no tooltip of its own (propagated up); only the first kind gets the title's text.
class TitleTooltipFilter : public QObject {
 public:
  using QObject::QObject;
  bool eventFilter(QObject* watched, QEvent* event) override {
    if (event->type() != QEvent::ToolTip) return false;
    auto* dock = static_cast<QDockWidget*>(watched);
    const auto* help = static_cast<QHelpEvent*>(event);
    const int content_top = dock->widget() ? dock->widget()->geometry().top() : dock->height();
    if (help->pos().y() >= content_top) return false;
    QToolTip::showText(help->globalPos(), dock_title_tooltip(dock), dock);
    return true;
  }
};

}  // namespace

void set_dock_title_tooltip(QDockWidget* dock, const QString& text) {
  if (!dock->property(kProperty).isValid()) dock->installEventFilter(new TitleTooltipFilter(dock));
  dock->setProperty(kProperty, text);
}

QString dock_title_tooltip(const QDockWidget* dock) { return dock->property(kProperty).toString(); }

}  // namespace lazyscope::workbench

#include "app/workbench/views/shortcuts_help.h"

#include <QAction>
#include <QMenu>
#include <QMenuBar>

namespace lazyscope::workbench {
namespace {

QString plain(QString text) { return text.remove(QLatin1Char('&')).remove(QStringLiteral("…")); }

void add_rows(const QMenu* menu, const QString& path, QString* rows) {
  for (QAction* action : menu->actions()) {
    if (action->menu()) {
      add_rows(action->menu(), path + QStringLiteral(" ▸ ") + plain(action->menu()->title()), rows);
      continue;
    }
    if (action->isSeparator() || action->shortcut().isEmpty()) continue;
    *rows += QStringLiteral("<tr><td>%1</td><td>%2</td><td><b>%3</b></td></tr>")
                 .arg(path.toHtmlEscaped(), plain(action->text()).toHtmlEscaped(),
                      action->shortcut().toString(QKeySequence::NativeText).toHtmlEscaped());
  }
}

}  // namespace

QString shortcut_table_html(const QMenuBar* menus) {
  QString rows;
  for (QAction* action : menus->actions())
    if (action->menu()) add_rows(action->menu(), plain(action->menu()->title()), &rows);
  return QStringLiteral(
             "<table cellspacing='6'><tr><th align='left'>%1</th><th align='left'>%2"
             "</th><th align='left'>%3</th></tr>%4</table>")
      .arg(QObject::tr("Menu"), QObject::tr("Action"), QObject::tr("Keys"), rows);
}

}  // namespace lazyscope::workbench

#pragma once
// Help ▸ Keyboard Shortcuts: every menu action that has a shortcut, read from the menus
// themselves so the list never drifts from what the keys do.
#include <QString>

class QMenuBar;

namespace lazyscope::workbench {

// An HTML table: menu, action, keys (in the platform's notation).
QString shortcut_table_html(const QMenuBar* menus);

}  // namespace lazyscope::workbench

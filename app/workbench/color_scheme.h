#pragma once
// Dark or light: the workbench follows the desktop. Qt 6.4's generic and GTK platform themes
// hand every application a light palette whatever the desktop prefers, so the preference is
// read here and a dark palette applied when the platform did not give one.
#include <QString>

class QPalette;

namespace lazyscope::workbench {

enum class ColorScheme { Light, Dark };

// The desktop's preference: $LAZYSCOPE_COLOR_SCHEME (light or dark) when set; else dark when
// $GTK_THEME names a ":dark" variant or GNOME's color-scheme setting is 'prefer-dark'.
ColorScheme desktop_color_scheme();
bool is_dark(const QPalette& palette);
// Applies the preference (call once the QApplication exists): with Dark and a light platform
// palette, the Fusion style and a dark palette; otherwise the platform's palette stays, except
// that LAZYSCOPE_COLOR_SCHEME=light turns a dark one light. Returns what is in effect.
ColorScheme follow_desktop_color_scheme();
QPalette dark_palette();

}  // namespace lazyscope::workbench

#include "app/workbench/color_scheme.h"

#include <QApplication>
#include <QPalette>
#include <QProcess>
#include <QStandardPaths>
#include <QStyle>
#include <QStyleFactory>

namespace lazyscope::workbench {
namespace {

bool gnome_prefers_dark() {
  const QString gsettings = QStandardPaths::findExecutable(QStringLiteral("gsettings"));
  if (gsettings.isEmpty()) return false;
  QProcess process;
  process.start(gsettings, {QStringLiteral("get"), QStringLiteral("org.gnome.desktop.interface"),
                            QStringLiteral("color-scheme")});
  if (!process.waitForFinished(1000)) {
    process.kill();
    process.waitForFinished(200);
    return false;
  }
  return process.exitCode() == 0 &&
         QString::fromUtf8(process.readAllStandardOutput()).contains(QStringLiteral("dark"));
}

}  // namespace

ColorScheme desktop_color_scheme() {
  const QString forced = qEnvironmentVariable("LAZYSCOPE_COLOR_SCHEME").trimmed().toLower();
  if (forced == QStringLiteral("dark")) return ColorScheme::Dark;
  if (forced == QStringLiteral("light")) return ColorScheme::Light;
  if (qEnvironmentVariable("GTK_THEME").toLower().endsWith(QStringLiteral(":dark")))
    return ColorScheme::Dark;
  return gnome_prefers_dark() ? ColorScheme::Dark : ColorScheme::Light;
}

bool is_dark(const QPalette& palette) {
  return palette.color(QPalette::Window).lightness() <
         palette.color(QPalette::WindowText).lightness();
}

QPalette dark_palette() {
  QPalette p;
  const QColor window(45, 47, 51), base(30, 31, 34), text(228, 230, 235), disabled(125, 128, 134);
  p.setColor(QPalette::Window, window);
  p.setColor(QPalette::WindowText, text);
  p.setColor(QPalette::Base, base);
  p.setColor(QPalette::AlternateBase, QColor(40, 42, 46));
  p.setColor(QPalette::ToolTipBase, QColor(58, 60, 65));
  p.setColor(QPalette::ToolTipText, text);
  p.setColor(QPalette::PlaceholderText, QColor(150, 153, 160));
  p.setColor(QPalette::Text, text);
  p.setColor(QPalette::Button, QColor(55, 58, 63));
  p.setColor(QPalette::ButtonText, text);
  p.setColor(QPalette::BrightText, QColor(255, 110, 110));
  p.setColor(QPalette::Light, QColor(75, 78, 84));
  p.setColor(QPalette::Midlight, QColor(62, 65, 70));
  p.setColor(QPalette::Mid, QColor(90, 94, 100));
  p.setColor(QPalette::Dark, QColor(25, 26, 28));
  p.setColor(QPalette::Shadow, QColor(10, 10, 12));
  p.setColor(QPalette::Highlight, QColor(61, 127, 196));
  p.setColor(QPalette::HighlightedText, Qt::white);
  p.setColor(QPalette::Link, QColor(110, 175, 255));
  p.setColor(QPalette::LinkVisited, QColor(175, 140, 255));
  for (QPalette::ColorRole role : {QPalette::WindowText, QPalette::Text, QPalette::ButtonText})
    p.setColor(QPalette::Disabled, role, disabled);
  p.setColor(QPalette::Disabled, QPalette::Highlight, QColor(80, 84, 90));
  return p;
}

ColorScheme follow_desktop_color_scheme() {
  const ColorScheme wanted = desktop_color_scheme();
  if (wanted == ColorScheme::Dark && !is_dark(QApplication::palette())) {
    QApplication::setStyle(QStyleFactory::create(QStringLiteral("Fusion")));
    QApplication::setPalette(dark_palette());
  } else if (wanted == ColorScheme::Light && is_dark(QApplication::palette()) &&
             !qEnvironmentVariable("LAZYSCOPE_COLOR_SCHEME").isEmpty()) {
    // Only an explicit request overrides a dark platform palette with Fusion's light one.
    QApplication::setStyle(QStyleFactory::create(QStringLiteral("Fusion")));
    QApplication::setPalette(QApplication::style()->standardPalette());
  }
  return is_dark(QApplication::palette()) ? ColorScheme::Dark : ColorScheme::Light;
}

}  // namespace lazyscope::workbench

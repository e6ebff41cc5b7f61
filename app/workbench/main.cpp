// The `lazyscope` workbench executable.
#include <QApplication>
#include <cstdio>

#include "app/workbench/color_scheme.h"
#include "app/workbench/command_line.h"
#include "app/workbench/main_window.h"

int main(int argc, char** argv) {
  QApplication app(argc, argv);
  QApplication::setApplicationName(QStringLiteral("lazyscope"));
  QApplication::setOrganizationName(QStringLiteral("LazyScope"));
  QApplication::setApplicationVersion(QString::fromLatin1(LAZYSCOPE_VERSION));
  // Lets the desktop match the window to its menu entry and icon (packaging/).
  QGuiApplication::setDesktopFileName(QStringLiteral("org.lazyscope.LazyScope"));
  lazyscope::workbench::WorkbenchOptions options;
  QString error;
  bool exit_now = false;
  if (!lazyscope::workbench::parse_command_line(QApplication::arguments(), &options, &error,
                                                &exit_now)) {
    std::fprintf(stderr, "lazyscope: %s\n", qPrintable(error));
    return 2;
  }
  if (exit_now) return 0;
  lazyscope::workbench::follow_desktop_color_scheme();
  lazyscope::workbench::MainWindow window(options);
  window.show();
  window.start();
  return QApplication::exec();
}

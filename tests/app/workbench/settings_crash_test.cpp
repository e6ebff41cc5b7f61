// The workbench's settings survive SIGKILL at any moment: a child workbench saves its settings
// again and again (as closing the window does) and is killed at random points; the settings file
// always reads back whole, as one of the versions written.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <QApplication>
#include <QSettings>
#include <chrono>
#include <filesystem>
#include <random>
#include <string>
#include <thread>

#include "app/workbench/main_window.h"
#include "app/workbench/views/prompt_panel.h"

extern char** environ;

namespace lazyscope::workbench {
namespace {

namespace fs = std::filesystem;

QString version_text(int k) {
  return QStringLiteral("v%1 ").arg(k) + QString(2000 + (k % 7) * 900, QChar('a' + k % 26));
}

bool is_whole_version(const QString& text) {
  bool ok = false;
  const int k = text.section(' ', 0, 0).mid(1).toInt(&ok);
  return ok && text == version_text(k);
}

// The child: a real main window whose close (and so its settings save) repeats until killed.
[[noreturn]] void write_settings_forever() {
  WorkbenchOptions options;
  options.restore_layout = true;
  options.load_default_model = false;
  options.backend = "cpu";
  MainWindow window(options);
  for (int k = 1;; ++k) {
    window.promptPanel()->setSystemText(version_text(k));
    window.resize(600 + k % 200, 500 + k % 100);
    window.close();  // saves the settings
    QApplication::processEvents();
  }
}

TEST(SettingsCrash, SurvivesSigkillOfTheWorkbenchAtRandomMoments) {
  if (qEnvironmentVariableIsSet("LAZYSCOPE_SETTINGS_WRITER")) write_settings_forever();
  // The child's settings live under its own HOME (test mode: $HOME/.qttest/config), so parallel
  // tests never share the file.
  const fs::path home =
      fs::temp_directory_path() / ("lazyscope-settings-kill-" + std::to_string(getpid()));
  fs::remove_all(home);
  fs::create_directories(home);
  const fs::path file = home / ".qttest" / "config" / "LazyScope" / "workbench.conf";
  std::vector<std::string> env_strings{"LAZYSCOPE_SETTINGS_WRITER=1", "HOME=" + home.string(),
                                       "QT_QPA_PLATFORM=offscreen"};
  for (char** e = environ; *e; ++e) {
    const std::string s(*e);
    if (s.rfind("HOME=", 0) != 0 && s.rfind("QT_QPA_PLATFORM=", 0) != 0) env_strings.push_back(s);
  }
  std::vector<char*> envp;
  for (std::string& s : env_strings) envp.push_back(s.data());
  envp.push_back(nullptr);
  std::string self = fs::read_symlink("/proc/self/exe").string();
  std::string filter = "--gtest_filter=SettingsCrash.SurvivesSigkillOfTheWorkbenchAtRandomMoments";
  char* argv[] = {self.data(), filter.data(), nullptr};

  std::mt19937 rng(9);
  int read_back = 0;
  for (int round = 0; round < 15; ++round) {
    pid_t pid = -1;
    posix_spawn_file_actions_t quiet;
    posix_spawn_file_actions_init(&quiet);
    posix_spawn_file_actions_addopen(&quiet, 1, "/dev/null", O_WRONLY, 0);
    posix_spawn_file_actions_addopen(&quiet, 2, "/dev/null", O_WRONLY, 0);
    ASSERT_EQ(posix_spawn(&pid, self.c_str(), &quiet, nullptr, argv, envp.data()), 0);
    posix_spawn_file_actions_destroy(&quiet);
    // Long enough for the window to come up and save a few times, then a random moment.
    std::this_thread::sleep_for(std::chrono::milliseconds(1500 + rng() % 1500));
    kill(pid, SIGKILL);
    int status = 0;
    waitpid(pid, &status, 0);
    ASSERT_TRUE(WIFSIGNALED(status)) << "the writer ended by itself (status " << status << ")";
    if (!fs::exists(file)) continue;  // killed before its first save
    QSettings settings(QString::fromStdString(file.string()), QSettings::IniFormat);
    ASSERT_EQ(settings.status(), QSettings::NoError) << "round " << round;
    ASSERT_TRUE(is_whole_version(settings.value(QStringLiteral("run/system")).toString()))
        << "round " << round;
    ASSERT_TRUE(settings.contains(QStringLiteral("window/state"))) << "round " << round;
    ++read_back;
  }
  EXPECT_GT(read_back, 0) << "the writer never saved; the test checked nothing";
  fs::remove_all(home);
}

}  // namespace
}  // namespace lazyscope::workbench

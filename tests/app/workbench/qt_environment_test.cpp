// One QApplication for the whole test binary, on the offscreen platform unless told otherwise.
#include <gtest/gtest.h>

#include <QApplication>
#include <QCoreApplication>
#include <QDir>
#include <QStandardPaths>
#include <QTemporaryDir>
#include <memory>

#include "engine/runtime/default_model.h"
#include "workbench_test_support.h"

namespace lazyscope::workbench::testing {
namespace {

class QtEnvironment : public ::testing::Environment {
 public:
  void SetUp() override {
    if (qEnvironmentVariableIsEmpty("QT_QPA_PLATFORM")) qputenv("QT_QPA_PLATFORM", "offscreen");
    QStandardPaths::setTestModeEnabled(true);  // never touch the user's real settings or cache
    static int argc = 1;
    static char name[] = "test_workbench";
    static char* argv[] = {name, nullptr};
    app_ = std::make_unique<QApplication>(argc, argv);
    QApplication::setApplicationName(QStringLiteral("lazyscope-tests"));
    QApplication::setOrganizationName(QStringLiteral("LazyScope"));
  }
  void TearDown() override { app_.reset(); }

 private:
  std::unique_ptr<QApplication> app_;
};

const auto* const kEnvironment = ::testing::AddGlobalTestEnvironment(new QtEnvironment);

}  // namespace

QString tiny_model_dir() {
  static std::unique_ptr<QTemporaryDir> dir;
  if (!dir) {
    dir = std::make_unique<QTemporaryDir>();
    const QString path = dir->path() + QStringLiteral("/tiny");
    write_generated_model("tiny", path.toStdString());
  }
  return dir->path() + QStringLiteral("/tiny");
}

QString artifact_path(const QString& file_name) {
  return QDir(QCoreApplication::applicationDirPath()).filePath(file_name);
}

TEST(QtEnvironment, OffscreenApplicationExists) {
  ASSERT_NE(QApplication::instance(), nullptr);
  EXPECT_FALSE(QApplication::platformName().isEmpty());
}

}  // namespace lazyscope::workbench::testing

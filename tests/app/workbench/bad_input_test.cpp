// The workbench under bad input: a broken model or corpus chosen while a good one is loaded shows
// an error dialog, and the workbench keeps running with what it had.
#include <gtest/gtest.h>

#include <QApplication>
#include <QDir>
#include <QFile>
#include <QMessageBox>
#include <QSignalSpy>
#include <QTemporaryDir>
#include <filesystem>

#include "app/workbench/main_window.h"
#include "app/workbench/models/document_list_model.h"
#include "app/workbench/views/corpus_panel.h"
#include "corpora/document_store.h"
#include "corpora/sample_corpus.h"
#include "workbench_test_support.h"

namespace lazyscope::workbench {
namespace {

namespace fs = std::filesystem;

constexpr int kWaitMs = 180000;  // generous: CI machines are slow, a hang still fails

WorkbenchOptions test_options() {
  WorkbenchOptions o;
  o.restore_layout = false;
  o.load_default_model = false;
  o.backend = "cpu";
  return o;
}

bool error_dialog_visible(const MainWindow& window) {
  for (const QMessageBox* box : window.findChildren<QMessageBox*>())
    if (box->isVisible() && box->icon() == QMessageBox::Warning) return true;
  return false;
}

void close_dialogs(MainWindow& window) {
  for (QMessageBox* box : window.findChildren<QMessageBox*>()) box->close();
  QApplication::processEvents();
}

class BadInput : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(dir_.isValid());
    window_ = std::make_unique<MainWindow>(test_options());
    window_->resize(1400, 900);
    window_->show();
    ASSERT_TRUE(window_->openCorpus(QString()));
    QSignalSpy ready(window_.get(), &MainWindow::modelReady);
    window_->openModel(testing::tiny_model_dir());
    ASSERT_TRUE(ready.wait(kWaitMs)) << window_->lastError().toStdString();
    ASSERT_TRUE(window_->prepareDemoPrompt());
  }
  void TearDown() override { window_.reset(); }

  // Runs the prompt to the end; true when it finished without being cancelled.
  bool runs() {
    QSignalSpy finished(window_.get(), &MainWindow::planFinished);
    if (!window_->startRun()) return false;
    if (!finished.wait(kWaitMs)) return false;
    return !finished.takeFirst().at(1).toBool();
  }

  // The tiny model with one of its files broken by `damage`.
  QString broken_model(const std::string& file, void (*damage)(const fs::path&)) {
    const fs::path copy =
        fs::path(dir_.path().toStdString()) / ("broken-" + std::to_string(++copies_));
    fs::copy(testing::tiny_model_dir().toStdString(), copy, fs::copy_options::recursive);
    damage(copy / file);
    return QString::fromStdString(copy.string());
  }

  QTemporaryDir dir_;
  int copies_ = 0;
  std::unique_ptr<MainWindow> window_;
};

void truncate_half(const fs::path& p) { fs::resize_file(p, fs::file_size(p) / 2); }
void overwrite_garbage(const fs::path& p) {
  QFile f(QString::fromStdString(p.string()));
  f.open(QIODevice::WriteOnly | QIODevice::Truncate);
  f.write("{ this is not json");
}

TEST_F(BadInput, BrokenModelShowsAnErrorAndTheLoadedModelKeepsWorking) {
  const QString loaded = window_->modelInfo().path;
  for (const auto& [file, damage] :
       {std::pair{std::string("model.safetensors"), &truncate_half},
        std::pair{std::string("config.json"), &overwrite_garbage},
        std::pair{std::string("tokenizer.json"), &overwrite_garbage}}) {
    SCOPED_TRACE(file);
    const QString broken = broken_model(file, damage);
    QSignalSpy errors(window_.get(), &MainWindow::errorShown);
    window_->openModel(broken);
    ASSERT_TRUE(errors.wait(kWaitMs));
    EXPECT_TRUE(window_->lastError().contains(QString::fromStdString(file)))
        << window_->lastError().toStdString();
    EXPECT_TRUE(error_dialog_visible(*window_));
    close_dialogs(*window_);
    EXPECT_TRUE(window_->modelLoaded());
    EXPECT_EQ(window_->modelInfo().path, loaded);
    EXPECT_TRUE(runs()) << window_->lastError().toStdString();
  }
}

TEST_F(BadInput, BrokenCorpusShowsAnErrorAndTheOpenCorpusStays) {
  const fs::path sample = corpora::default_sample_corpus_db();
  const fs::path truncated = fs::path(dir_.path().toStdString()) / "truncated.db";
  fs::copy_file(sample, truncated);
  truncate_half(truncated);
  const fs::path foreign = fs::path(dir_.path().toStdString()) / "foreign.db";
  overwrite_garbage(foreign);
  for (const fs::path& bad :
       {truncated, foreign, fs::path(dir_.path().toStdString()) / "missing.db"}) {
    SCOPED_TRACE(bad.string());
    EXPECT_FALSE(window_->openCorpus(QString::fromStdString(bad.string())));
    EXPECT_TRUE(window_->lastError().contains(QString::fromStdString(bad.filename().string())))
        << window_->lastError().toStdString();
    EXPECT_TRUE(error_dialog_visible(*window_));
    close_dialogs(*window_);
    ASSERT_TRUE(window_->corpusPanel()->hasCorpus());
    window_->corpusPanel()->search();
    EXPECT_GT(window_->corpusPanel()->resultsModel()->rowCount(), 0);
  }
  EXPECT_TRUE(runs()) << window_->lastError().toStdString();
}

TEST_F(BadInput, ExportNeverReplacesAnotherKindOfFile) {
  ASSERT_TRUE(runs()) << window_->lastError().toStdString();
  const fs::path dir(dir_.path().toStdString());
  const fs::path store = dir / "store.db";
  fs::copy_file(corpora::default_sample_corpus_db(), store);
  const auto store_size = fs::file_size(store);
  const QString store_path = QString::fromStdString(store.string());
  EXPECT_FALSE(window_->exportSessionReport(store_path));
  EXPECT_TRUE(window_->lastError().contains("not a session report"))
      << window_->lastError().toStdString();
  EXPECT_TRUE(error_dialog_visible(*window_));
  close_dialogs(*window_);
  EXPECT_FALSE(window_->exportTrace(store_path));
  EXPECT_TRUE(window_->lastError().contains("not a Chrome trace"))
      << window_->lastError().toStdString();
  close_dialogs(*window_);
  EXPECT_EQ(fs::file_size(store), store_size);
  EXPECT_NO_THROW(corpora::DocumentStore::open(store, corpora::DocumentStore::Mode::read_only));

  // Its own kinds are replaced.
  const QString report = QString::fromStdString((dir / "s.db").string());
  const QString trace = QString::fromStdString((dir / "t.json").string());
  for (int i = 0; i < 2; ++i) {
    EXPECT_TRUE(window_->exportSessionReport(report)) << window_->lastError().toStdString();
    EXPECT_TRUE(window_->exportTrace(trace)) << window_->lastError().toStdString();
  }
}

}  // namespace
}  // namespace lazyscope::workbench

#include "app/workbench/model_locator.h"

#include <QCoreApplication>
#include <QDir>
#include <QFile>
#include <QFileInfo>
#include <QStandardPaths>
#include <filesystem>

#include "engine/model/model_registry.h"
#include "engine/model/presets.h"
#include "base/error.h"

void lazyscope_init_workbench_resources() { Q_INIT_RESOURCE(workbench); }

namespace lazyscope::workbench {
namespace {

// The tokenizer's training text: $LAZYSCOPE_TEXT_DIR, else the copy compiled into the binary.
std::filesystem::path training_text_dir() {
  const QByteArray env = qgetenv("LAZYSCOPE_TEXT_DIR");
  if (!env.isEmpty()) return std::filesystem::path(env.toStdString());
  lazyscope_init_workbench_resources();
  const QString out = QStandardPaths::writableLocation(QStandardPaths::CacheLocation) +
                      QStringLiteral("/training-text");
  QDir().mkpath(out);
  const QDir bundled(QStringLiteral(":/lazyscope/text"));
  const QStringList files = bundled.entryList({QStringLiteral("*.txt")}, QDir::Files, QDir::Name);
  if (files.isEmpty())
    throw Error("the workbench was built without its bundled training text (resources/text)");
  for (const QString& name : files) {
    // Copy under a name of this process, then rename over the target: workbenches (and test
    // processes) starting at the same time never see or remove each other's half-written file.
    const QString target = out + '/' + name;
    const QString temp = target + QStringLiteral(".%1.tmp").arg(QCoreApplication::applicationPid());
    QFile::remove(temp);
    if (!QFile::copy(bundled.filePath(name), temp))
      throw Error("cannot write the tokenizer training text to " + temp.toStdString());
    std::error_code error;
    std::filesystem::rename(temp.toStdString(), target.toStdString(), error);
    if (error) {
      QFile::remove(temp);
      throw Error("cannot write the tokenizer training text to " + target.toStdString() + ": " +
                  error.message());
    }
  }
  return std::filesystem::path(out.toStdString());
}

}  // namespace

std::optional<QString> installed_default_model() {
  try {
    if (auto path = default_model_path()) return QString::fromStdString(path->string());
  } catch (const std::exception&) {
    // A broken cache is the same as none: fall back to the tiny model.
  }
  return std::nullopt;
}

QString tiny_model_dir() {
  return QStandardPaths::writableLocation(QStandardPaths::CacheLocation) +
         QStringLiteral("/models/tiny");
}

bool tiny_model_present(const QString& dir) {
  const QDir d(dir);
  return d.exists(QStringLiteral("config.json")) && d.exists(QStringLiteral("tokenizer.json")) &&
         (d.exists(QStringLiteral("model.safetensors")) ||
          d.exists(QStringLiteral("model.safetensors.index.json")));
}

void write_tiny_model(const QString& dir, const ProgressFn& progress) {
  CheckpointWriteOptions options;
  options.text_dir = training_text_dir();
  write_model_checkpoint(find_model_preset("tiny"), 1, std::filesystem::path(dir.toStdString()),
                         options, progress);
}

}  // namespace lazyscope::workbench

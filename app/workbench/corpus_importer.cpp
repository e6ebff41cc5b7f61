#include "app/workbench/corpus_importer.h"

#include <exception>
#include <filesystem>

#include "base/output_guard.h"
#include "base/progress.h"
#include "corpora/import.h"

namespace lazyscope::workbench {

CorpusImporter::CorpusImporter(QObject* parent) : QObject(parent) {}

CorpusImporter::~CorpusImporter() {
  cancel_.store(true);
  if (thread_) thread_->wait();
  delete thread_;
}

bool CorpusImporter::start(const CorpusImportRequest& request, QString* error) {
  if (running_.load()) {
    *error = tr("An import is already running.");
    return false;
  }
  corpora::CorpusFormat format;
  try {
    if (request.source.trimmed().isEmpty()) throw Error("the dataset: no file or folder given");
    if (request.db.trimmed().isEmpty()) throw Error("the corpus store: no file given");
    if (request.chunk_tokens < 0 || request.chunk_tokens > 100000)
      throw Error("chunk size: " + std::to_string(request.chunk_tokens) +
                  " is outside the valid range 0..100000 tokens");
    format = corpora::parse_corpus_format(request.format.toStdString());
    if (!std::filesystem::exists(request.source.toStdString()))
      throw Error(request.source.toStdString() + ": no such file or folder");
    OutputGuard guard;
    guard.input(request.source.toStdString(), "dataset");
    guard.output(request.db.toStdString(), "the corpus store", "corpus store", {});
    guard.check();
  } catch (const std::exception& e) {
    *error = QString::fromUtf8(e.what());
    return false;
  }
  if (thread_) {
    thread_->wait();  // the last import has sent its outcome: only the thread's end remains
    delete thread_;
    thread_ = nullptr;
  }
  cancel_.store(false);
  running_.store(true);
  const CorpusImportRequest r = request;
  thread_ = QThread::create([this, r, format] {
    corpora::ImportCorpusOptions options;
    options.chunk.max_tokens = r.chunk_tokens;
    options.progress = cancellable(
        [this](double f, std::string_view what) {
          Q_EMIT progress(f, QString::fromUtf8(what.data(), qsizetype(what.size())));
        },
        &cancel_);
    // running() turns false before the outcome is sent, so its receivers may start another.
    try {
      const corpora::CorpusStats stats = corpora::import_corpus(
          r.source.toStdString(), format, r.db.toStdString(), options);
      running_.store(false);
      Q_EMIT imported(r.db, stats.documents, stats.questions);
    } catch (const Cancelled&) {
      running_.store(false);
      Q_EMIT cancelled(r.db);
    } catch (const std::exception& e) {
      running_.store(false);
      Q_EMIT failed(r.db, QString::fromUtf8(e.what()));
    }
  });
  thread_->setObjectName(QStringLiteral("lazyscope-corpus-import"));
  thread_->start();
  return true;
}

}  // namespace lazyscope::workbench

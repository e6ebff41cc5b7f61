#pragma once
// File ▸ Import Corpus: a dataset file (JSONL, HotpotQA, 2Wiki, TriviaQA, NarrativeQA) into a
// corpus store on a thread of its own, with progress and Cancel. The import is all-or-nothing:
// a cancelled or failed import leaves the target file as it was.
#include <QObject>
#include <QString>
#include <QThread>
#include <atomic>

namespace lazyscope::workbench {

struct CorpusImportRequest {
  QString source;        // the dataset file or folder
  QString format;        // "jsonl", "hotpotqa", "2wiki", "triviaqa", "narrativeqa"
  QString db;            // the corpus store to write
  int chunk_tokens = 0;  // 0 keeps documents whole
};

class CorpusImporter : public QObject {
  Q_OBJECT
 public:
  explicit CorpusImporter(QObject* parent = nullptr);
  ~CorpusImporter() override;  // cancels a running import and waits for it

  // Checks the request (format, paths: the store may not be one of the inputs) and starts; false
  // with the reason in `error` when it cannot start or an import is already running.
  bool start(const CorpusImportRequest& request, QString* error);
  // Thread-safe: the import stops at its next progress report.
  void cancel() { cancel_.store(true); }
  bool running() const { return running_.load(); }

 Q_SIGNALS:
  void progress(double fraction, const QString& what);
  void imported(const QString& db, qint64 documents, qint64 questions);
  void cancelled(const QString& db);
  void failed(const QString& db, const QString& message);

 private:
  QThread* thread_ = nullptr;
  std::atomic<bool> cancel_{false};
  std::atomic<bool> running_{false};
};

}  // namespace lazyscope::workbench

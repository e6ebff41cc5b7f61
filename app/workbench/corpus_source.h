#pragma once
// The workbench's view of a corpus: a DocumentStore plus conversions to the GUI's value types.
#include <QString>
#include <QStringList>
#include <memory>
#include <vector>

#include "app/workbench/models/document_list_model.h"
#include "corpora/document_store.h"

namespace lazyscope::workbench {

struct SampleQuestion {
  QString text;
  QStringList answers;
};

class CorpusSource {
 public:
  // Throws lazyscope::Error naming the file when it is not a LazyScope corpus.
  static std::unique_ptr<CorpusSource> open(const QString& path);
  // The bundled sample corpus, built into the user cache directory on first use.
  static std::unique_ptr<CorpusSource> openSample();

  QString path() const;
  QString name() const;
  qint64 documentCount() const;
  std::vector<DocumentEntry> documents(int limit = 5000) const;
  std::vector<DocumentEntry> search(const QString& query, int k) const;
  std::vector<SampleQuestion> questions() const;

 private:
  explicit CorpusSource(corpora::DocumentStore store) : store_(std::move(store)) {}
  corpora::DocumentStore store_;
};

}  // namespace lazyscope::workbench

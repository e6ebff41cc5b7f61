#include "app/workbench/corpus_source.h"

#include <filesystem>

#include "corpora/sample_corpus.h"

namespace lazyscope::workbench {
namespace {

DocumentEntry to_entry(const corpora::Document& doc) {
  DocumentEntry entry;
  entry.rowid = doc.rowid;
  entry.id = QString::fromStdString(doc.id);
  entry.title = QString::fromStdString(doc.title);
  entry.text = QString::fromStdString(doc.text);
  return entry;
}

}  // namespace

std::unique_ptr<CorpusSource> CorpusSource::open(const QString& path) {
  auto store = corpora::DocumentStore::open(std::filesystem::path(path.toStdString()),
                                            corpora::DocumentStore::Mode::read_only);
  return std::unique_ptr<CorpusSource>(new CorpusSource(std::move(store)));
}

std::unique_ptr<CorpusSource> CorpusSource::openSample() {
  return open(QString::fromStdString(corpora::default_sample_corpus_db().string()));
}

QString CorpusSource::path() const { return QString::fromStdString(store_.path().string()); }

QString CorpusSource::name() const {
  const std::string name = store_.metadata("name");
  return name.empty() ? QString::fromStdString(store_.path().stem().string())
                      : QString::fromStdString(name);
}

qint64 CorpusSource::documentCount() const { return store_.count(); }

std::vector<DocumentEntry> CorpusSource::documents(int limit) const {
  std::vector<DocumentEntry> out;
  for (const auto& doc : store_.list(0, limit)) out.push_back(to_entry(doc));
  return out;
}

std::vector<DocumentEntry> CorpusSource::search(const QString& query, int k) const {
  std::vector<DocumentEntry> out;
  for (const auto& hit : store_.search(query.toStdString(), k)) {
    DocumentEntry entry = to_entry(hit.document);
    entry.score = hit.score;
    entry.rank = hit.rank;
    out.push_back(entry);
  }
  return out;
}

std::vector<SampleQuestion> CorpusSource::questions() const {
  std::vector<SampleQuestion> out;
  for (const auto& q : store_.questions()) {
    SampleQuestion sample;
    sample.text = QString::fromStdString(q.question);
    for (const auto& a : q.answers) sample.answers << QString::fromStdString(a);
    out.push_back(sample);
  }
  return out;
}

}  // namespace lazyscope::workbench

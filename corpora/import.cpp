#include "corpora/import.h"

namespace lazyscope::corpora {

CorpusStats import_corpus(const std::filesystem::path& source, CorpusFormat format,
                          const std::filesystem::path& db, const ImportCorpusOptions& options) {
  LoadOptions load = options.load;
  if (options.progress) {
    load.progress = [&](double f, std::string_view what) { options.progress(0.4 * f, what); };
  }
  CorpusData data = load_corpus(source, format, load);
  if (options.chunk.max_tokens > 0) {
    if (options.progress) options.progress(0.4, "chunking");
    chunk_corpus(data, options.chunk);
  }
  ImportOptions import_options;
  import_options.name = options.name;
  import_options.source_format = std::string(corpus_format_name(format));
  import_options.source_path = std::filesystem::absolute(source).string();
  if (options.progress) {
    import_options.progress = [&](double f, std::string_view what) {
      options.progress(0.4 + 0.6 * f, what);
    };
  }
  return DocumentStore::import(db, data, import_options).stats();
}

}  // namespace lazyscope::corpora

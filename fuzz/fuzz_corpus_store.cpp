// Fuzzes opening a corpus store (a SQLite file that may be foreign, truncated or hand-edited)
// and the queries the workbench runs on it: search with snippets, listing, stats, questions.
#include "base/error.h"
#include "corpora/document_store.h"
#include "fuzz/fuzz_input.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, std::size_t size) {
  using lazyscope::corpora::DocumentStore;
  const auto path = lazyscope::fuzz::write_scratch("corpus.db", data, size);
  try {
    const DocumentStore store = DocumentStore::open(path, DocumentStore::Mode::read_only);
    (void)store.search("river Carrow \"Lune\" OR NEAR(", 5);
    (void)store.list(0, 20);
    (void)store.stats();
    (void)store.questions();
    (void)store.most_popular(5);
  } catch (const lazyscope::Error&) {
  }
  return 0;
}

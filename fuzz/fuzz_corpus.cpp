// Fuzzes one corpus loader (LAZYSCOPE_FUZZ_FORMAT: hotpotqa, 2wiki, triviaqa, narrativeqa,
// jsonl), then chunks what loaded. The loaders' side files (TriviaQA evidence, NarrativeQA
// summaries) are real small files, so names that try to leave their folders are exercised.
#include "base/error.h"
#include "corpora/chunking.h"
#include "corpora/loaders.h"
#include "fuzz/fuzz_input.h"

namespace {

const lazyscope::corpora::CorpusFormat kFormat =
    lazyscope::corpora::parse_corpus_format(LAZYSCOPE_FUZZ_FORMAT);

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  using lazyscope::fuzz::write_scratch;
  write_scratch("corpus/evidence/wikipedia/Lune_River.txt", "The Lune is a river in Carrow.\n");
  write_scratch("corpus/evidence/web/7/7_1.txt", "A web page about Carrow and the Lune.");
  write_scratch("corpus/summaries.csv",
                "document_id,set,summary\nd1,train,A story about a river.\n");
  write_scratch("corpus/documents.csv", "document_id,wiki_title\nd1,River story\n");
  write_scratch("corpus/questions.jsonl",
                "{\"question\":\"Which river?\",\"answers\":[\"Lune\"],\"doc_ids\":[\"p1\"]}\n");
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, std::size_t size) {
  using namespace lazyscope::corpora;
  const char* name = kFormat == CorpusFormat::narrativeqa ? "corpus/qaps.csv"
                     : kFormat == CorpusFormat::jsonl     ? "corpus/passages.jsonl"
                                                          : "corpus/qa/input.json";
  const auto path = lazyscope::fuzz::write_scratch(name, data, size);
  LoadOptions options;
  options.evidence_dir = lazyscope::fuzz::scratch_dir() / "corpus/evidence";
  options.summaries_path = lazyscope::fuzz::scratch_dir() / "corpus/summaries.csv";
  try {
    CorpusData corpus = load_corpus(path, kFormat, options);
    ChunkOptions chunk;
    chunk.max_tokens = 16;
    chunk.overlap_tokens = 4;
    chunk_corpus(corpus, chunk);
  } catch (const lazyscope::Error&) {
  }
  return 0;
}

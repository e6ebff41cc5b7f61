#pragma once
// Loaders for the common RAG dataset layouts. Each returns documents + questions + answers;
// malformed input throws lazyscope::Error naming the file and the line or record.
#include <filesystem>
#include <string>
#include <string_view>

#include "corpora/corpus.h"
#include "base/progress.h"

namespace lazyscope::corpora {

enum class CorpusFormat { hotpotqa, two_wiki, triviaqa, narrativeqa, jsonl };

// "hotpotqa", "2wiki", "triviaqa", "narrativeqa", "jsonl"; throws listing the valid names.
CorpusFormat parse_corpus_format(std::string_view name);
std::string_view corpus_format_name(CorpusFormat format);

struct LoadOptions {
  // jsonl: a separate questions file. When empty and the input is a directory, its
  // questions.jsonl is used if present.
  std::filesystem::path questions_path;
  // triviaqa: root of the evidence tree (holding wikipedia/ and web/). Empty means
  // "<dir of the JSON>/../evidence", then "<dir of the JSON>/evidence".
  std::filesystem::path evidence_dir;
  // narrativeqa: summaries.csv. Empty means "<dir>/summaries.csv", then
  // "<dir>/third_party/wikipedia/summaries.csv". Not needed when the questions CSV has a
  // "summary" column.
  std::filesystem::path summaries_path;
  ProgressFn progress;  // fraction of the input read
};

// HotpotQA (distractor / fullwiki) JSON: a JSON array (or JSONL) of records
// {"_id","question","answer","type","supporting_facts":[[title,sent]],"context":[[title,[sentences]]]}.
// Paragraphs become documents with id = title (deduplicated across records; sentences joined by
// spaces); the supporting-fact titles become each question's gold doc_ids.
CorpusData load_hotpotqa(const std::filesystem::path& path, const LoadOptions& options = {});

// 2WikiMultihopQA: the same layout as HotpotQA ("context", "supporting_facts", "answer", "_id",
// "type"); extra fields ("evidences", "entity_ids") are ignored.
CorpusData load_2wiki(const std::filesystem::path& path, const LoadOptions& options = {});

// TriviaQA RC JSON: {"Data":[{"QuestionId","Question","Answer":{"Value","Aliases"},
// "EntityPages":[{"Title","Filename"}],"SearchResults":[{"Title","Filename"}]}]}.
// Evidence text is read from evidence_dir/wikipedia/<Filename> and evidence_dir/web/<Filename>
// (or taken inline from a "Content"/"wiki_context"/"search_context" field when present).
// Document id = "wikipedia/<Filename>" or "web/<Filename>" (the path under the evidence tree).
// Evidence articles are long: chunk them (ChunkOptions) before retrieval.
CorpusData load_triviaqa(const std::filesystem::path& path, const LoadOptions& options = {});

// NarrativeQA: qaps.csv (document_id,set,question,answer1,answer2,...) with the summaries in
// summaries.csv (document_id,set,summary,...); titles come from a documents.csv (wiki_title)
// beside it when present. One document per summary, id = document_id.
CorpusData load_narrativeqa(const std::filesystem::path& path, const LoadOptions& options = {});

// Generic JSONL. Each line is either a document {"id","title","text"} or a question
// {"question","answers":[...],"doc_ids":[...], "id"?, "kind"?}. `path` may be a file or a
// directory holding passages.jsonl (or documents.jsonl) and questions.jsonl.
CorpusData load_jsonl(const std::filesystem::path& path, const LoadOptions& options = {});

// Dispatches on `format`.
CorpusData load_corpus(const std::filesystem::path& path, CorpusFormat format,
                       const LoadOptions& options = {});

}  // namespace lazyscope::corpora

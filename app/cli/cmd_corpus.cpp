// lazyscope-cli corpus: import datasets into document stores, search them, show their stats.
#include <algorithm>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "app/cli/commands.h"
#include "app/cli/option_checks.h"
#include "app/cli/progress_bar.h"
#include "corpora/document_store.h"
#include "corpora/evaluation.h"
#include "corpora/import.h"
#include "corpora/sample_corpus.h"
#include "base/error.h"
#include "base/output_guard.h"

namespace lazyscope::cli {
namespace {

using corpora::DocumentStore;

struct ImportArgs {
  std::string file;
  std::string format = "jsonl";
  std::string out;
  std::size_t chunk_tokens = 0;
  std::size_t chunk_overlap = 0;
  std::string questions;
  std::string evidence_dir;
  std::string summaries;
  std::string name;
};

// search/stats/questions take an optional DB before their other positionals; without it the
// bundled sample's store is used.
struct StoreArgs {
  std::vector<std::string> positionals;
  std::string db;
  int k = 5;
  int limit = 0;
};

std::filesystem::path resolve_db(const std::string& explicit_db) {
  if (!explicit_db.empty()) return explicit_db;
  ProgressBar bar;
  return corpora::default_sample_corpus_db(bar.callback());
}

// Collapses whitespace and cuts to `width` bytes without splitting a UTF-8 sequence.
std::string one_line(std::string_view text, std::size_t width) {
  std::string out;
  bool space = false;
  for (char c : text) {
    if (c == '\n' || c == '\r' || c == '\t' || c == ' ') {
      space = !out.empty();
      continue;
    }
    if (space) out.push_back(' ');
    space = false;
    out.push_back(c);
  }
  if (out.size() <= width) return out;
  std::size_t cut = width > 3 ? width - 3 : width;
  while (cut > 0 && (static_cast<unsigned char>(out[cut]) & 0xC0) == 0x80) --cut;
  out.resize(cut);
  return out + "...";
}

std::string human_bytes(int64_t bytes) {
  const char* units[] = {"B", "KiB", "MiB", "GiB"};
  double value = double(bytes);
  int unit = 0;
  while (value >= 1024.0 && unit < 3) {
    value /= 1024.0;
    ++unit;
  }
  char buffer[32];
  std::snprintf(buffer, sizeof buffer, unit == 0 ? "%.0f %s" : "%.1f %s", value, units[unit]);
  return buffer;
}

void run_import(const ImportArgs& args) {
  if (args.chunk_tokens > 0 && args.chunk_overlap >= args.chunk_tokens)
    throw Error("--chunk-overlap " + std::to_string(args.chunk_overlap) + " must be less than --chunk-tokens " +
                std::to_string(args.chunk_tokens));
  OutputGuard guard;
  guard.input(args.file, "the dataset");
  guard.input(args.questions, "--questions");
  guard.input(args.evidence_dir, "--evidence-dir");
  guard.input(args.summaries, "--summaries");
  // The store's own check (an existing file must be a corpus) runs in import; here only inputs.
  guard.output(args.out, "--out", "corpus store", {});
  guard.check();
  corpora::ImportCorpusOptions options;
  corpora::CorpusFormat format = corpora::parse_corpus_format(args.format);
  options.load.questions_path = args.questions;
  options.load.evidence_dir = args.evidence_dir;
  options.load.summaries_path = args.summaries;
  options.chunk.max_tokens = args.chunk_tokens;
  options.chunk.overlap_tokens = args.chunk_overlap;
  options.name = args.name;
  corpora::CorpusStats stats;
  {
    ProgressBar bar;
    options.progress = bar.callback();
    stats = corpora::import_corpus(args.file, format, args.out, options);
  }
  std::printf("imported %lld documents and %lld questions (%lld multi-hop) into %s (%s)\n",
              (long long)stats.documents, (long long)stats.questions,
              (long long)stats.multi_hop_questions, args.out.c_str(),
              human_bytes(stats.file_bytes).c_str());
  if (stats.max_words > 1000 && args.chunk_tokens == 0)
    std::printf("note: the longest document has %lld words; consider --chunk-tokens 256\n",
                (long long)stats.max_words);
}

void run_search(const StoreArgs& args) {
  std::string db = args.db;
  std::string query;
  if (args.positionals.size() == 2) {
    if (!db.empty())
      throw Error(
          "corpus search: give the database either as --db or as the first argument, not both");
    db = args.positionals[0];
    query = args.positionals[1];
  } else if (args.positionals.size() == 1) {
    query = args.positionals[0];
  } else {
    throw Error("corpus search: expected [DB] \"query\"");
  }
  DocumentStore store = DocumentStore::open(resolve_db(db), DocumentStore::Mode::read_only);
  corpora::SearchOptions options;
  options.k = args.k;
  options.highlight_open = "*";
  options.highlight_close = "*";
  options.snippet_words = 14;
  auto hits = store.search(query, options);
  if (hits.empty()) {
    std::printf("no document matches \"%s\" in %s\n", query.c_str(), store.path().c_str());
    return;
  }
  std::printf("%-4s  %7s  %-12s  %-28s  %s\n", "rank", "score", "id", "title", "snippet");
  for (const auto& hit : hits) {
    std::printf("%-4d  %7.3f  %-12s  %-28s  %s\n", hit.rank, hit.score,
                one_line(hit.document.id, 12).c_str(), one_line(hit.document.title, 28).c_str(),
                one_line(hit.snippet, 110).c_str());
  }
}

void run_stats(const StoreArgs& args) {
  if (args.positionals.size() > 1) throw Error("corpus stats: expected at most one DB argument");
  std::string db = !args.positionals.empty() ? args.positionals[0] : args.db;
  DocumentStore store = DocumentStore::open(resolve_db(db), DocumentStore::Mode::read_only);
  corpora::CorpusStats s = store.stats();
  std::printf("corpus        %s\n", s.name.c_str());
  std::printf("file          %s (%s)\n", store.path().c_str(), human_bytes(s.file_bytes).c_str());
  std::printf("source        %s (%s)\n", s.source_path.c_str(), s.source_format.c_str());
  std::printf("imported      %s\n", s.created_at.c_str());
  std::printf("documents     %lld\n", (long long)s.documents);
  std::printf("words         %lld total, %lld min, %.1f mean, %lld max per document\n",
              (long long)s.total_words, (long long)s.min_words, s.mean_words,
              (long long)s.max_words);
  std::printf("questions     %lld (%lld with two or more gold documents)\n", (long long)s.questions,
              (long long)s.multi_hop_questions);
}

void run_questions(const StoreArgs& args) {
  if (args.positionals.size() > 1)
    throw Error("corpus questions: expected at most one DB argument");
  std::string db = !args.positionals.empty() ? args.positionals[0] : args.db;
  DocumentStore store = DocumentStore::open(resolve_db(db), DocumentStore::Mode::read_only);
  auto questions = store.questions();
  std::size_t shown = args.limit > 0
                          ? std::min<std::size_t>(std::size_t(args.limit), questions.size())
                          : questions.size();
  std::printf("%-10s  %-9s  %-60s  %-24s  %s\n", "id", "kind", "question", "answer",
              "gold documents");
  for (std::size_t i = 0; i < shown; ++i) {
    const auto& q = questions[i];
    std::string gold;
    for (const auto& id : q.doc_ids) gold += (gold.empty() ? "" : ",") + id;
    std::printf("%-10s  %-9s  %-60s  %-24s  %s\n", one_line(q.id, 10).c_str(),
                one_line(q.kind, 9).c_str(), one_line(q.question, 60).c_str(),
                one_line(q.answers.empty() ? "" : q.answers[0], 24).c_str(), gold.c_str());
  }
  if (shown < questions.size())
    std::printf("... %zu more (use --limit 0 for all)\n", questions.size() - shown);
}

void run_show(const StoreArgs& args) {
  std::string db = args.db;
  std::string id;
  if (args.positionals.size() == 2) {
    db = args.positionals[0];
    id = args.positionals[1];
  } else if (args.positionals.size() == 1) {
    id = args.positionals[0];
  } else {
    throw Error("corpus show: expected [DB] ID");
  }
  DocumentStore store = DocumentStore::open(resolve_db(db), DocumentStore::Mode::read_only);
  corpora::Document doc = store.get(id);
  std::printf("id          %s (rowid %lld)\n", doc.id.c_str(), (long long)doc.rowid);
  std::printf("title       %s\n", doc.title.c_str());
  if (!doc.parent_id.empty()) std::printf("chunk of    %s\n", doc.parent_id.c_str());
  std::printf("popularity  %lld\n\n%s\n", (long long)doc.popularity, doc.text.c_str());
}

// Retrieval quality of BM25 on the store's own questions: recall of gold documents in the top k.
void run_recall(const StoreArgs& args) {
  if (args.positionals.size() > 1) throw Error("corpus recall: expected at most one DB argument");
  std::string db = !args.positionals.empty() ? args.positionals[0] : args.db;
  DocumentStore store = DocumentStore::open(resolve_db(db), DocumentStore::Mode::read_only);
  auto questions = store.questions();
  if (questions.empty()) throw Error(store.path().string() + ": the corpus has no questions");
  double single = 0, multi = 0, answer_in_top = 0;
  int singles = 0, multis = 0;
  for (const auto& q : questions) {
    auto hits = store.search(q.question, args.k);
    std::vector<std::string> ids;
    bool answer_found = false;
    for (const auto& h : hits) {
      ids.push_back(h.document.id);
      for (const auto& a : q.answers)
        if (!a.empty() && h.document.text.find(a) != std::string::npos) answer_found = true;
    }
    double r = corpora::recall_at_k(ids, q.doc_ids, args.k);
    if (q.doc_ids.size() >= 2) {
      multi += r;
      ++multis;
    } else {
      single += r;
      ++singles;
    }
    answer_in_top += answer_found ? 1 : 0;
  }
  std::printf("BM25 recall@%d over %zu questions in %s\n", args.k, questions.size(),
              store.path().c_str());
  std::printf("%-34s  %9s  %8s\n", "questions", "count", "recall");
  if (singles) std::printf("%-34s  %9d  %8.3f\n", "one gold document", singles, single / singles);
  if (multis)
    std::printf("%-34s  %9d  %8.3f\n", "two or more gold documents", multis, multi / multis);
  std::printf("%-34s  %9zu  %8.3f\n", "an answer string in the top k", questions.size(),
              answer_in_top / double(questions.size()));
}

}  // namespace

void add_corpus_command(CLI::App& app) {
  CLI::App* corpus = app.add_subcommand(
      "corpus",
      "Import RAG datasets into SQLite document stores, search them (BM25), show their stats");
  corpus->require_subcommand(1);

  auto import_args = std::make_shared<ImportArgs>();
  CLI::App* import_command =
      corpus->add_subcommand("import",
                             "Import a dataset into a document store (one SQLite "
                             "file; replaced only if the import succeeds)");
  import_command
      ->add_option(
          "file", import_args->file,
          "Dataset file (or, for jsonl, a directory with passages.jsonl + questions.jsonl)")
      ->required();
  import_command
      ->add_option("--format,-f", import_args->format,
                   "hotpotqa, 2wiki, triviaqa, narrativeqa or jsonl")
      ->check(CLI::IsMember({"hotpotqa", "2wiki", "triviaqa", "narrativeqa", "jsonl"}))
      ->capture_default_str();
  import_command->add_option("--out,-o", import_args->out, "Output database file, e.g. corpus.db")
      ->required();
  import_command
      ->add_option("--chunk-tokens", import_args->chunk_tokens,
                   "Split documents longer than N words into passages of at most N (0: keep whole)")
      ->capture_default_str()
      ->check(in_range<std::size_t>(0, 1000000));
  import_command
      ->add_option("--chunk-overlap", import_args->chunk_overlap,
                   "Words repeated between consecutive chunks (less than --chunk-tokens)")
      ->capture_default_str()
      ->check(in_range<std::size_t>(0, 1000000));
  import_command->add_option("--questions", import_args->questions,
                             "jsonl: a separate questions file");
  import_command->add_option(
      "--evidence-dir", import_args->evidence_dir,
      "triviaqa: the evidence folder holding wikipedia/ and web/ (default: ../evidence)");
  import_command->add_option("--summaries", import_args->summaries,
                             "narrativeqa: summaries.csv (default: beside the questions CSV or in "
                             "third_party/wikipedia/)");
  import_command->add_option("--name", import_args->name,
                             "Corpus name shown in stats (default: the output file name)");
  import_command->callback([import_args] { run_import(*import_args); });

  auto search_args = std::make_shared<StoreArgs>();
  CLI::App* search = corpus->add_subcommand(
      "search",
      "BM25 top-k search: corpus search [DB] \"query\" (no DB: the bundled sample corpus)");
  search->add_option("db_and_query", search_args->positionals, "[DB] QUERY")
      ->required()
      ->expected(1, 2);
  search->add_option("-k", search_args->k, "Number of results")
      ->capture_default_str()
      ->check(in_range(1, 10000));
  search->add_option("--db", search_args->db, "Database file (alternative to the positional DB)");
  search->callback([search_args] { run_search(*search_args); });

  auto stats_args = std::make_shared<StoreArgs>();
  CLI::App* stats = corpus->add_subcommand(
      "stats", "Documents, words and questions of a store (no DB: the sample)");
  stats->add_option("db", stats_args->positionals, "Database file")->expected(0, 1);
  stats->callback([stats_args] { run_stats(*stats_args); });

  auto questions_args = std::make_shared<StoreArgs>();
  questions_args->limit = 20;
  CLI::App* questions = corpus->add_subcommand(
      "questions", "List a store's questions with answers and gold documents");
  questions->add_option("db", questions_args->positionals, "Database file (no DB: the sample)")
      ->expected(0, 1);
  questions->add_option("--limit", questions_args->limit, "Rows to show (0: all)")
      ->capture_default_str()
      ->check(in_range(0, 1000000000));
  questions->callback([questions_args] { run_questions(*questions_args); });

  auto show_args = std::make_shared<StoreArgs>();
  CLI::App* show = corpus->add_subcommand("show", "Print one document: corpus show [DB] ID");
  show->add_option("db_and_id", show_args->positionals, "[DB] ID")->required()->expected(1, 2);
  show->add_option("--db", show_args->db, "Database file (alternative to the positional DB)");
  show->callback([show_args] { run_show(*show_args); });

  auto recall_args = std::make_shared<StoreArgs>();
  CLI::App* recall = corpus->add_subcommand(
      "recall",
      "Retrieval quality: BM25 recall@k of the gold documents for the store's own questions");
  recall->add_option("db", recall_args->positionals, "Database file (no DB: the sample)")
      ->expected(0, 1);
  recall->add_option("-k", recall_args->k, "Documents retrieved per question")
      ->capture_default_str()
      ->check(in_range(1, 10000));
  recall->callback([recall_args] { run_recall(*recall_args); });
}  // namespace lazyscope::cli

}  // namespace lazyscope::cli

// Imports a generated 100,000-passage JSONL corpus into a document store and times it, then
// times BM25 searches on the result. Prints a table; never part of the test run.
//   bench_corpus_import [passages=100000] [words per passage: 80..200]
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "corpora/document_store.h"
#include "corpora/loaders.h"

namespace fs = std::filesystem;
using namespace lazyscope::corpora;

namespace {

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

// A deterministic vocabulary of pronounceable made-up words.
std::vector<std::string> make_vocabulary(std::size_t size, std::mt19937_64& rng) {
  const char* onsets[] = {"b", "br", "c", "d",  "dr", "f", "g",  "h", "k", "l",
                          "m", "n",  "p", "qu", "r",  "s", "st", "t", "v", "w"};
  const char* vowels[] = {"a", "e", "i", "o", "u", "ai", "ea", "ou"};
  const char* codas[] = {"", "n", "r", "s", "th", "ll", "ck", "m"};
  std::vector<std::string> words;
  words.reserve(size);
  for (std::size_t i = 0; i < size; ++i) {
    std::string w;
    int syllables = 1 + int(rng() % 3);
    for (int s = 0; s < syllables; ++s) {
      w += onsets[rng() % std::size(onsets)];
      w += vowels[rng() % std::size(vowels)];
      w += codas[rng() % std::size(codas)];
    }
    words.push_back(std::move(w));
  }
  return words;
}

void write_corpus(const fs::path& path, std::size_t passages) {
  std::mt19937_64 rng(20261130);
  std::vector<std::string> vocabulary = make_vocabulary(30000, rng);
  // Zipf-like word frequencies, as in natural text, so the index has realistic posting lists.
  std::vector<double> weights(vocabulary.size());
  for (std::size_t i = 0; i < weights.size(); ++i) weights[i] = 1.0 / double(i + 1);
  std::discrete_distribution<std::size_t> pick(weights.begin(), weights.end());
  std::uniform_int_distribution<int> length(80, 200);
  std::ofstream out(path);
  std::string line;
  for (std::size_t p = 0; p < passages; ++p) {
    line = "{\"id\":\"g" + std::to_string(p) + "\",\"title\":\"" +
           vocabulary[p % vocabulary.size()] + " " + std::to_string(p) + "\",\"text\":\"";
    int n = length(rng);
    for (int i = 0; i < n; ++i) {
      if (i) line += (i % 17 == 16) ? ". " : " ";
      line += vocabulary[pick(rng)];
    }
    line += ".\"}\n";
    out << line;
  }
}

}  // namespace

int main(int argc, char** argv) {
  std::size_t passages = argc > 1 ? std::size_t(std::atoll(argv[1])) : 100000;
  fs::path dir =
      fs::temp_directory_path() / ("lazyscope-bench-corpus-" + std::to_string(::getpid()));
  fs::create_directories(dir);
  fs::path jsonl = dir / "generated.jsonl";
  fs::path db = dir / "generated.db";
  try {
    auto t0 = std::chrono::steady_clock::now();
    write_corpus(jsonl, passages);
    double generate_s = seconds_since(t0);

    auto t1 = std::chrono::steady_clock::now();
    CorpusData data = load_jsonl(jsonl);
    double load_s = seconds_since(t1);

    std::clock_t cpu_start = std::clock();
    auto t2 = std::chrono::steady_clock::now();
    ImportOptions options;
    options.source_format = "jsonl";
    DocumentStore store = DocumentStore::import(db, data, options);
    double import_s = seconds_since(t2);
    double import_cpu_s = double(std::clock() - cpu_start) / CLOCKS_PER_SEC;
    double total_s = load_s + import_s;

    std::printf("corpus import benchmark (%s)\n\n", jsonl.c_str());
    std::printf("%-28s %14s\n", "measure", "value");
    std::printf("%-28s %14zu\n", "passages", data.documents.size());
    std::printf("%-28s %14.1f\n", "JSONL size (MiB)", double(fs::file_size(jsonl)) / (1 << 20));
    std::printf("%-28s %14.2f\n", "generate JSONL (s)", generate_s);
    std::printf("%-28s %14.2f\n", "parse JSONL (s)", load_s);
    std::printf("%-28s %14.2f\n", "write store + FTS5 (s)", import_s);
    std::printf("%-28s %14.2f\n", "  of which CPU time (s)", import_cpu_s);
    std::printf("%-28s %14.2f\n", "import total (s)", total_s);
    std::printf("%-28s %14.0f\n", "passages / s", double(data.documents.size()) / total_s);
    std::printf("%-28s %14.1f\n", "database size (MiB)", double(fs::file_size(db)) / (1 << 20));

    // Queries from common to rare words: posting-list length drives BM25 cost.
    std::mt19937_64 rng(20261130);
    std::vector<std::string> vocabulary = make_vocabulary(30000, rng);
    std::vector<std::string> queries = {
        vocabulary[0] + " " + vocabulary[1], vocabulary[10] + " " + vocabulary[200],
        vocabulary[500] + " " + vocabulary[2000] + " " + vocabulary[9000], vocabulary[25000],
        data.documents[777].title};
    std::printf("\n%-40s %8s %10s %12s\n", "query (k = 10)", "hits", "runs", "mean (ms)");
    for (const std::string& query : queries) {
      store.search(query, 10);  // warm the page cache
      int runs = 20;
      std::size_t hits = 0;
      auto t = std::chrono::steady_clock::now();
      for (int i = 0; i < runs; ++i) hits = store.search(query, 10).size();
      double ms = seconds_since(t) * 1000.0 / runs;
      std::printf("%-40s %8zu %10d %12.2f\n", query.c_str(), hits, runs, ms);
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    fs::remove_all(dir);
    return 1;
  }
  fs::remove_all(dir);
  return 0;
}

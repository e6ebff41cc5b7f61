// Work grows linearly with input size: one passage of 1, 2, 5 and 10 MB (sentences of made-up
// words, and the same size as one word without spaces) goes through chunking, import into a
// document store, BM25 search with a snippet, and the request parser. Prints seconds and seconds
// per MB for each size; linear work shows as a flat per-MB column (the 1 MB row is the baseline
// of the ratio column). Never part of the test run.
//   bench_input_scaling [largest MB = 10]
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "corpora/chunking.h"
#include "corpora/document_store.h"
#include "engine/runtime/request.h"

namespace fs = std::filesystem;
using namespace lazyscope;

namespace {

double seconds_of(const std::function<void()>& work) {
  const auto t0 = std::chrono::steady_clock::now();
  work();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

std::string sentences(std::size_t bytes, std::mt19937& rng) {
  static const char* words[] = {"lune", "carrow", "river", "weaver", "loom", "bell", "tower", "north",
                                "stone", "bridge", "market", "winter", "harbour", "lantern"};
  std::string text;
  text.reserve(bytes + 64);
  int in_sentence = 0;
  while (text.size() < bytes) {
    text += words[rng() % std::size(words)];
    if (++in_sentence == 12) {
      text += ". ";
      in_sentence = 0;
    } else {
      text += ' ';
    }
  }
  return text + "zyzzyva.";
}

struct Row {
  double chunk = 0, import = 0, search = 0, request = 0;
};

Row measure(const std::string& passage, const fs::path& dir) {
  Row row;
  corpora::ChunkOptions chunk;
  chunk.max_tokens = 256;
  chunk.overlap_tokens = 32;
  std::size_t chunks = 0;
  row.chunk = seconds_of([&] { chunks = corpora::chunk_text(passage, chunk).size(); });
  corpora::CorpusData data;
  data.documents.push_back({0, "big", "Big passage", passage, "", 0});
  data.documents.push_back({0, "small", "Small passage", "A small passage about the lune.", "", 0});
  const fs::path db = dir / "scaling.db";
  std::optional<corpora::DocumentStore> store;
  row.import = seconds_of([&] { store.emplace(corpora::DocumentStore::import(db, data)); });
  std::size_t hits = 0;
  row.search = seconds_of([&] { hits = store->search("zyzzyva lune", 5).size(); });
  std::string json = "{\"documents\":[\"";
  for (char c : passage) json += c == '"' ? ' ' : c;
  json += "\"],\"query\":\"q\"}";
  row.request = seconds_of([&] { (void)parse_request_json(json, "bench"); });
  if (chunks == 0 || hits == 0) std::fprintf(stderr, "unexpected: %zu chunks, %zu hits\n", chunks, hits);
  return row;
}

}  // namespace

int main(int argc, char** argv) {
  const int largest = argc > 1 ? std::atoi(argv[1]) : 10;
  const fs::path dir = fs::temp_directory_path() / ("lazyscope-scaling-" + std::to_string(::getpid()));
  fs::create_directories(dir);
  std::mt19937 rng(3);
  std::printf("| passage | MB | chunk s | import s | search+snippet s | request parse s | s/MB (all) | s/MB vs 1 MB |\n");
  std::printf("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n");
  for (const bool spaces : {true, false}) {
    double base = 0;
    for (const int mb : {1, 2, 5, 10}) {
      if (mb > largest) break;
      const std::size_t bytes = std::size_t(mb) << 20;
      const std::string passage = spaces ? sentences(bytes, rng) : std::string(bytes, 'x') + " zyzzyva";
      const Row r = measure(passage, dir);
      const double per_mb = (r.chunk + r.import + r.search + r.request) / mb;
      if (mb == 1) base = per_mb;
      std::printf("| %s | %d | %.3f | %.3f | %.3f | %.3f | %.3f | %.2f |\n", spaces ? "sentences" : "one word", mb,
                  r.chunk, r.import, r.search, r.request, per_mb, per_mb / base);
    }
  }
  fs::remove_all(dir);
  return 0;
}

// CPU prefill and decode speed on the default model (SmolLM2-135M-Instruct). Prints a table;
// never part of the test run. The "pp512" and "tg128" rows measure what llama.cpp's
// llama-bench -p 512 -n 128 measures (bench/llama_cpp_peer.sh builds it from source), so the
// two can run back to back on the same file with the same thread count.
//
//   bench_cpu_speed [MODEL] [--threads N] [--cpu-precision fast|exact] [--only pp512|tg128|rag]
#include <sys/resource.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "corpora/document_store.h"
#include "corpora/sample_corpus.h"
#include "engine/model/model_loader.h"
#include "engine/model/model_registry.h"
#include "engine/runtime/session.h"
#include "engine/tokenizer/chat_template.h"
#include "base/error.h"

namespace {

using namespace lazyscope;

double process_cpu_seconds() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return double(usage.ru_utime.tv_sec + usage.ru_stime.tv_sec) +
         1e-6 * double(usage.ru_utime.tv_usec + usage.ru_stime.tv_usec);
}

const char* kParagraph =
    "LazyAttention stores each retrieved document's keys and values once, rotated at the "
    "positions where the document was encoded, and applies the remaining rotation to the query "
    "inside the attention kernel. Because rotary position embeddings only depend on the offset "
    "between two positions, this is exactly equivalent to moving every cached key, without "
    "copying anything. The river Seine flows through Paris, the capital of France, which is "
    "known for its museums, its cafes and the tower built by Gustave Eiffel in 1889. ";

std::vector<int32_t> prompt_of(const Tokenizer& tokenizer, int length) {
  std::string text;
  std::vector<int32_t> ids;
  while (int(ids.size()) < length) {
    text += kParagraph;
    ids = tokenizer.encode(text);
  }
  ids.resize(std::size_t(length));
  return ids;
}

int run(int argc, char** argv) {
  std::filesystem::path model_path;
  int threads = 0;
  std::string precision = "fast", only;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--threads") == 0 && i + 1 < argc) {
      threads = std::atoi(argv[++i]);
    } else if (std::strcmp(argv[i], "--cpu-precision") == 0 && i + 1 < argc) {
      precision = argv[++i];
    } else if (std::strcmp(argv[i], "--only") == 0 && i + 1 < argc) {
      only = argv[++i];
      if (only != "pp512" && only != "tg128" && only != "rag") {
        std::fprintf(stderr, "bench_cpu_speed: --only takes pp512, tg128 or rag, not '%s'\n", only.c_str());
        return 2;
      }
    } else {
      model_path = argv[i];
    }
  }
  if (model_path.empty()) {
    const auto installed = default_model_path();
    if (!installed) {
      std::fprintf(stderr, "bench_cpu_speed: the default model is not installed "
                           "(run scripts/install_default_model.sh) and no model was given\n");
      return 2;
    }
    model_path = *installed;
  }

  SessionOptions options;
  options.model = model_path;
  options.backend = BackendKind::Cpu;
  options.kv_budget_bytes = 256ull << 20;
  options.policies = {Policy::None, Policy::Lazy};  // one pool each: the two this bench runs
  options.cpu_threads = threads;
  options.cpu_precision = parse_cpu_precision(precision);
  const auto load_start = std::chrono::steady_clock::now();
  Session session(options);
  const double load_s =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - load_start).count();
  const ModelShape& s = session.config().shape;
  std::printf("model     %s\n", model_path.string().c_str());
  std::printf("shape     %d layers, %d/%d heads, head dim %d, hidden %d, vocab %d\n", s.num_layers,
              s.num_heads, s.num_kv_heads, s.head_dim, s.hidden_size, s.vocab_size);
  std::printf("backend   %s (%s), threads %d of %u cores, load %.2f s\n\n",
              session.backend_name().c_str(), session.device().c_str(), threads,
              std::thread::hardware_concurrency(), load_s);

  // Full mode, no caching: TTFT is the whole prefill; decode runs greedy tokens after it.
  double last_cpu_ms = 0.0;  // process CPU time of the last run: what it cost when the machine is shared
  auto full_run = [&](int length, int new_tokens) {
    Request request;
    request.prefix_ids = std::vector<int32_t>{};
    request.query_ids = prompt_of(session.tokenizer(), length);
    RunOptions run;
    run.mode = Mode::Full;
    run.policy = Policy::None;
    run.max_new_tokens = new_tokens;
    run.keep_logits = false;
    const double cpu_before = process_cpu_seconds();
    RunResult result = session.submit(request, run);
    last_cpu_ms = 1000.0 * (process_cpu_seconds() - cpu_before);
    return result;
  };
  std::printf("%-8s %8s %8s %12s %14s %14s %14s %10s\n", "test", "prompt", "decoded", "ttft ms",
              "prefill tok/s", "decode ms/tok", "decode tok/s", "cpu ms");
  auto row = [&](const char* label, const RunResult& result) {
    const double decode_tps = result.decode_ms_per_token > 0 ? 1000.0 / result.decode_ms_per_token : 0.0;
    std::printf("%-8s %8d %8zu %12.1f %14.1f %14.2f %14.1f %10.0f\n", label, result.prompt_tokens,
                result.generated_ids.size(), result.ttft_ms, 1000.0 * result.prompt_tokens / result.ttft_ms,
                result.decode_ms_per_token, decode_tps, last_cpu_ms);
  };
  full_run(16, 4);  // warm-up: first-touch of the weights and buffers
  if (only.empty()) {
    for (int length : {32, 128}) row("full", full_run(length, 32));
  }
  if (only.empty() || only == "pp512") row("pp512", full_run(512, 1));
  if (only.empty() || only == "tg128") row("tg128", full_run(1, 128));
  if (only == "pp512" || only == "tg128") return 0;

  // The bundled demo: the sample corpus's first question with its BM25 top-4 passages, in the
  // model's chat format; cold (every passage encoded) vs warm (lazy reuse, order reversed).
  const corpora::DocumentStore store =
      corpora::DocumentStore::open(corpora::default_sample_corpus_db(), corpora::DocumentStore::Mode::read_only);
  const std::vector<corpora::Question> questions = store.questions();
  if (questions.empty()) throw Error("the sample corpus has no questions");
  std::vector<RagDocument> docs;
  for (const corpora::SearchHit& hit : store.search(questions[0].question, 4)) {
    docs.push_back({hit.document.title, hit.document.text});
  }
  // The engine's request preparation wraps it in the chat template (chat auto), as generate does.
  Request rag;
  for (const RagDocument& doc : docs) {
    rag.documents.push_back(doc.text);
    rag.document_labels.push_back(doc.title);
  }
  rag.query = questions[0].question;
  rag.max_new_tokens = 16;
  RunOptions run;
  run.mode = Mode::Block;
  run.policy = Policy::Lazy;
  run.keep_logits = false;
  std::printf("\ndemo question: %s (%zu passages)\n", questions[0].question.c_str(), docs.size());
  std::printf("%-14s %8s %12s %14s %10s %10s\n", "block/lazy", "prompt", "ttft ms", "decode ms/tok",
              "hit ratio", "cpu ms");
  for (const char* label : {"cold", "warm reorder"}) {
    const double cpu_before = process_cpu_seconds();
    const RunResult result = session.submit(rag, run);
    const double cpu_ms = 1000.0 * (process_cpu_seconds() - cpu_before);
    std::printf("%-14s %8d %12.1f %14.2f %10.3f %10.0f\n", label, result.prompt_tokens, result.ttft_ms,
                result.decode_ms_per_token, result.stats.token_hit_ratio(), cpu_ms);
    rag.order.clear();
    for (int i = int(docs.size()) - 1; i >= 0; --i) rag.order.push_back(i);
  }
  // On a shared machine the figures above scale with the CPU this process actually got.
  const double wall_s =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - load_start).count();
  std::printf("\nprocess CPU time %.1f s over %.1f s wall: %.2f cores busy on average\n",
              process_cpu_seconds(), wall_s, process_cpu_seconds() / wall_s);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  std::setvbuf(stdout, nullptr, _IOLBF, 0);  // rows appear as they are measured, also in a file
  try {
    return run(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_cpu_speed: %s\n", e.what());
    return 1;
  }
}

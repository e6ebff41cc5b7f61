// The fast CPU mode's numerics against the exact fp32 reference on the default model: for each
// sample question (BM25 top-4 passages, the model's chat format, block mode, lazy policy) both
// modes generate greedily; the table gives max |Δlogit| after the prompt, the largest over the
// steps where both still saw the same tokens, and where (if anywhere) the greedy tokens part,
// with the exact run's top-2 margin there (a near-tie when it is within the logit difference).
//
//   bench_cpu_numerics [MODEL] [--questions N] [--new-tokens N] [--threads N]
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "base/error.h"
#include "corpora/document_store.h"
#include "corpora/sample_corpus.h"
#include "engine/model/model_loader.h"
#include "engine/model/model_registry.h"
#include "engine/runtime/session.h"
#include "engine/tokenizer/chat_template.h"

namespace {

using namespace lazyscope;

double max_abs_diff(const std::vector<float>& a, const std::vector<float>& b) {
  double m = 0.0;
  for (std::size_t i = 0; i < std::min(a.size(), b.size()); ++i) m = std::max(m, double(std::fabs(a[i] - b[i])));
  return m;
}

double top2_margin(const std::vector<float>& logits) {
  float first = -INFINITY, second = -INFINITY;
  for (float v : logits) {
    if (v > first) {
      second = first;
      first = v;
    } else if (v > second) {
      second = v;
    }
  }
  return double(first) - double(second);
}

int run(int argc, char** argv) {
  std::filesystem::path model_path;
  int question_count = 20, new_tokens = 24, threads = 0;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--questions") == 0 && i + 1 < argc) {
      question_count = std::atoi(argv[++i]);
    } else if (std::strcmp(argv[i], "--new-tokens") == 0 && i + 1 < argc) {
      new_tokens = std::atoi(argv[++i]);
    } else if (std::strcmp(argv[i], "--threads") == 0 && i + 1 < argc) {
      threads = std::atoi(argv[++i]);
    } else {
      model_path = argv[i];
    }
  }
  if (question_count < 1 || new_tokens < 1) throw Error("--questions and --new-tokens must be at least 1");
  if (model_path.empty()) {
    const auto installed = default_model_path();
    if (!installed) throw Error("the default model is not installed (run scripts/install_default_model.sh)");
    model_path = *installed;
  }
  SessionOptions options;
  options.model = model_path;
  options.backend = BackendKind::Cpu;
  options.kv_budget_bytes = 256ull << 20;
  options.policies = {Policy::Lazy};
  options.cpu_threads = threads;
  options.cpu_precision = CpuPrecision::Exact;
  Session exact(options);
  options.cpu_precision = CpuPrecision::Fast;
  Session fast(options);
  std::printf("model     %s\nexact     %s\nfast      %s\n\n", model_path.string().c_str(), exact.device().c_str(),
              fast.device().c_str());

  const corpora::DocumentStore store =
      corpora::DocumentStore::open(corpora::default_sample_corpus_db(), corpora::DocumentStore::Mode::read_only);
  std::vector<corpora::Question> questions = store.questions();
  if (int(questions.size()) > question_count) questions.resize(std::size_t(question_count));

  std::printf("%-6s %7s %14s %14s %10s %12s %s\n", "id", "prompt", "prompt |dlog|", "agreed |dlog|", "agree",
              "part margin", "verdict");
  int identical = 0, near_ties = 0, real = 0, agreed_steps = 0, total_steps = 0;
  double worst_prompt = 0.0, worst_agreed = 0.0, prompt_logit_range = 0.0;
  for (const corpora::Question& q : questions) {
    std::vector<RagDocument> docs;
    for (const corpora::SearchHit& hit : store.search(q.question, 4)) docs.push_back({hit.document.title, hit.document.text});
    Request request;  // the engine's request preparation applies the chat template
    for (const RagDocument& doc : docs) {
      request.documents.push_back(doc.text);
      request.document_labels.push_back(doc.title);
    }
    request.query = q.question;
    request.max_new_tokens = new_tokens;
    RunOptions run;
    run.mode = Mode::Block;
    run.policy = Policy::Lazy;
    const RunResult a = exact.submit(request, run);
    const RunResult b = fast.submit(request, run);
    const double prompt_diff = max_abs_diff(a.prompt_last_logits, b.prompt_last_logits);
    for (float v : a.prompt_last_logits) prompt_logit_range = std::max(prompt_logit_range, double(std::fabs(v)));
    worst_prompt = std::max(worst_prompt, prompt_diff);
    // step_logits[i] is the distribution token i was picked from; both saw the same context
    // up to and including the first step whose tokens differ.
    std::size_t agree = 0;
    double agreed_diff = 0.0, margin = 0.0;
    const std::size_t steps = std::min(a.generated_ids.size(), b.generated_ids.size());
    bool parted = false;
    for (std::size_t i = 0; i < steps && i < a.step_logits.size() && i < b.step_logits.size(); ++i) {
      const double diff = max_abs_diff(a.step_logits[i], b.step_logits[i]);
      agreed_diff = std::max(agreed_diff, diff);
      if (a.generated_ids[i] != b.generated_ids[i]) {
        parted = true;
        margin = top2_margin(a.step_logits[i]);
        break;
      }
      ++agree;
    }
    worst_agreed = std::max(worst_agreed, agreed_diff);
    agreed_steps += int(agree);
    total_steps += int(steps);
    std::string verdict = "identical";
    if (!parted && a.generated_ids.size() != b.generated_ids.size()) verdict = "lengths differ";
    if (parted) {
      const bool tie = margin <= 2.0 * agreed_diff;
      verdict = tie ? "near-tie flip" : "DIFFERS";
      (tie ? near_ties : real) += 1;
    } else {
      ++identical;
    }
    char part[32] = "-";
    if (parted) std::snprintf(part, sizeof(part), "%.4f", margin);
    std::printf("%-6s %7d %14.4f %14.4f %5zu/%-4zu %12s %s\n", q.id.c_str(), a.prompt_tokens, prompt_diff, agreed_diff,
                agree, steps, part, verdict.c_str());
  }
  std::printf("\n%zu questions, %d new tokens each: %d identical greedy sequences, %d parted at a near-tie "
              "(top-2 margin within 2x the step's max |dlogit|), %d parted otherwise\n",
              questions.size(), new_tokens, identical, near_ties, real);
  std::printf("greedy agreement before the first parting: %d of %d steps (%.1f %%)\n", agreed_steps, total_steps,
              total_steps ? 100.0 * agreed_steps / total_steps : 0.0);
  std::printf("max |dlogit| after the prompt %.4f (largest |logit| %.2f), over agreed steps %.4f\n", worst_prompt,
              prompt_logit_range, worst_agreed);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  std::setvbuf(stdout, nullptr, _IOLBF, 0);  // rows appear as they are measured, also in a file
  try {
    return run(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_cpu_numerics: %s\n", e.what());
    return 1;
  }
}

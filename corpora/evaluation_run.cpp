#include "corpora/evaluation_run.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>

#include "base/error.h"
#include "corpora/document_store.h"
#include "engine/model/model_loader.h"
#include "engine/runtime/equivalence.h"
#include "engine/runtime/session.h"
#include "engine/serving/scheduler.h"
#include "engine/tokenizer/chat_template.h"
#include "engine/tokenizer/tokenizer.h"
#include "engine/workload/workload.h"

namespace lazyscope::corpora {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

double median(std::vector<double> values) {
  if (values.empty()) return 0.0;
  std::sort(values.begin(), values.end());
  const std::size_t n = values.size();
  return n % 2 ? values[n / 2] : 0.5 * (values[n / 2 - 1] + values[n / 2]);
}

bool valid_pair(Mode mode, Policy policy) {
  try {
    check_mode_policy(mode, policy);
    return true;
  } catch (const Error&) {
    return false;
  }
}

std::string dump_text(const nlohmann::json& j) {
  return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

}  // namespace

Retrieval parse_retrieval(std::string_view text) {
  if (text == "bm25") return Retrieval::bm25;
  if (text == "gold") return Retrieval::gold;
  throw Error("--retrieval must be bm25 or gold (got \"" + std::string(text) + "\")");
}

const char* to_string(Retrieval retrieval) {
  return retrieval == Retrieval::gold ? "gold" : "bm25";
}

std::string EvalConfig::key() const {
  return std::string(to_string(mode)) + "/" + to_string(policy);
}

std::vector<EvalConfig> eval_configs(const std::vector<Mode>& modes,
                                     const std::vector<Policy>& policies) {
  if (modes.empty()) throw Error("--modes: name at least one mode (full, block)");
  if (policies.empty())
    throw Error(
        "--policies: name at least one policy (none, prefix, positional, materialized, lazy)");
  std::vector<EvalConfig> out;
  for (Mode m : modes) {
    for (Policy p : policies) {
      if (!valid_pair(m, p)) continue;
      const bool seen = std::any_of(out.begin(), out.end(), [&](const EvalConfig& c) {
        return c.mode == m && c.policy == p;
      });
      if (!seen) out.push_back({m, p});
    }
  }
  if (out.empty()) {
    throw Error(
        "no valid mode/policy pair: full runs with none or prefix, block with none, positional, "
        "materialized or lazy");
  }
  return out;
}

std::string TokenAgreement::describe() const {
  if (!explanation.empty()) return explanation;
  char text[200];
  if (identical) {
    std::snprintf(text, sizeof text, "identical tokens, max |dlogit| %.3g", max_abs_diff);
  } else {
    std::snprintf(text, sizeof text,
                  "tokens differ at step %d (margins %.3g / %.3g, |dlogit| %.3g)%s", step, margin_a,
                  margin_b, max_abs_diff,
                  near_tie ? ": a near-tie, within rounding" : ": beyond rounding");
  }
  return text;
}

TokenAgreement agreement_of(const RunResult& a, const RunResult& b, const std::string& backend) {
  const EquivalenceResult r = compare_greedy_runs(a.step_logits, a.generated_ids, b.step_logits,
                                                  b.generated_ids, logit_tolerance_for(backend, a.cpu_precision));
  TokenAgreement out;
  out.identical = r.verdict == EquivalenceVerdict::Identical && a.generated_ids == b.generated_ids;
  out.near_tie = r.verdict == EquivalenceVerdict::NearTie;
  out.step = r.first_divergent_step;
  out.max_abs_diff = r.max_abs_diff;
  out.explanation = r.explanation;
  if (!r.steps.empty() && r.steps.back().tokens_differ()) {
    out.margin_a = r.steps.back().margin_a;
    out.margin_b = r.steps.back().margin_b;
  }
  if (!out.identical && !out.near_tie && out.step < 0) {
    // Same logits over the compared steps, but one run generated more tokens (an EOS flip
    // beyond the compared range): different answers.
    out.step = int(std::min(a.generated_ids.size(), b.generated_ids.size()));
  }
  return out;
}

bool QuestionResult::configurations_disagree() const {
  std::set<std::string> seen;
  for (const ConfigAnswer& a : answers) {
    if (a.ran) seen.insert(normalize_answer(a.text));
  }
  return seen.size() > 1;
}

std::string IdentityVerdict::describe() const {
  if (!checked)
    return "lazy vs materialized: not checked (run both block/lazy and block/materialized)";
  std::string text = "lazy vs materialized: " + std::to_string(compared) + " questions, ";
  char diff[64];
  std::snprintf(diff, sizeof diff, " (max |dlogit| %.3g)", max_abs_diff);
  if (differing.empty()) {
    text += std::string("identical answers") + diff;
  } else {
    text += std::to_string(differing.size()) + " differ beyond a near-tie:";
    for (const std::string& id : differing) text += " " + id;
  }
  if (!near_ties.empty()) {
    text += "; " + std::to_string(near_ties.size()) + " near-tie flip(s):";
    for (const std::string& id : near_ties) text += " " + id;
  }
  return text;
}

IdentityVerdict check_identical_answers(const std::vector<QuestionResult>& questions,
                                        std::size_t config_a, std::size_t config_b) {
  IdentityVerdict verdict;
  verdict.checked = true;
  for (const QuestionResult& q : questions) {
    if (config_a >= q.answers.size() || config_b >= q.answers.size()) continue;
    const ConfigAnswer& a = q.answers[config_a];
    const ConfigAnswer& b = q.answers[config_b];
    if (!a.ran || !b.ran) continue;
    ++verdict.compared;
    if (q.identity) verdict.max_abs_diff = std::max(verdict.max_abs_diff, q.identity->max_abs_diff);
    if (a.ids == b.ids) continue;
    if (q.identity && !q.identity->identical && q.identity->near_tie) {
      verdict.near_ties.push_back(q.question.id);
    } else {
      verdict.differing.push_back(q.question.id);
    }
  }
  return verdict;
}

int EvalReport::config_index(Mode mode, Policy policy) const {
  for (std::size_t i = 0; i < configs.size(); ++i) {
    if (configs[i].mode == mode && configs[i].policy == policy) return int(i);
  }
  return -1;
}

bool EvalReport::exact_cpu() const { return backend == "cpu" && device.rfind("CPU fast", 0) != 0; }

std::string EvalReport::identity_failure() const {
  const IdentityVerdict verdict = identity();
  if (!verdict.checked || verdict.ok() || !exact_cpu()) return "";
  std::string text =
      "lazy and materialized answers differ beyond a near-tie on the CPU (exact fp32) for "
      "question(s):";
  for (const std::string& id : verdict.differing) text += " " + id;
  return text;
}

IdentityVerdict EvalReport::identity() const {
  const int lazy = config_index(Mode::Block, Policy::Lazy);
  const int materialized = config_index(Mode::Block, Policy::Materialized);
  if (lazy < 0 || materialized < 0) return {};
  return check_identical_answers(questions, std::size_t(lazy), std::size_t(materialized));
}

std::optional<std::pair<int, int>> EvalReport::full_and_block() const {
  int full = config_index(Mode::Full, Policy::None);
  if (full < 0) full = config_index(Mode::Full, Policy::Prefix);
  int block = config_index(Mode::Block, Policy::Lazy);
  for (std::size_t i = 0; block < 0 && i < configs.size(); ++i) {
    if (configs[i].mode == Mode::Block) block = int(i);
  }
  if (full < 0 || block < 0 || questions.empty()) return std::nullopt;
  return std::make_pair(full, block);
}

std::optional<double> EvalReport::block_em_loss_points() const {
  const auto pair = full_and_block();
  if (!pair) return std::nullopt;
  const std::vector<ConfigSummary> s = summaries();
  return 100.0 *
         (s[std::size_t(pair->first)].exact_match - s[std::size_t(pair->second)].exact_match);
}

std::optional<double> EvalReport::block_contains_loss_points() const {
  const auto pair = full_and_block();
  if (!pair) return std::nullopt;
  const std::vector<ConfigSummary> s = summaries();
  return 100.0 * (s[std::size_t(pair->first)].contains - s[std::size_t(pair->second)].contains);
}

std::string EvalReport::block_quality_note() const {
  const std::optional<double> em = block_em_loss_points();
  const std::optional<double> contains = block_contains_loss_points();
  if (!em || (*em <= 3.0 && *contains <= 3.0)) return "";
  char text[500];
  std::snprintf(text, sizeof text,
                "Block attention loses %.1f exact-match and %.1f containment points against full "
                "attention here. The LazyAttention paper's models were fine-tuned for block "
                "attention; %s is not, so its documents never saw each other.",
                *em, *contains, model.c_str());
  return text;
}

std::vector<ConfigSummary> EvalReport::summaries() const {
  std::vector<ConfigSummary> out;
  for (std::size_t c = 0; c < configs.size(); ++c) {
    ConfigSummary s;
    s.key = configs[c].key();
    CacheStats stats;
    std::vector<double> ttft;
    double request_s = 0.0;
    double generated = 0.0, prompt = 0.0;
    int with_gold = 0;
    for (const QuestionResult& q : questions) {
      if (c >= q.answers.size() || !q.answers[c].ran) continue;
      const ConfigAnswer& a = q.answers[c];
      ++s.questions;
      s.exact_match += a.score.exact_match;
      s.contains += a.score.contains;
      s.f1 += a.score.f1;
      if (!q.question.doc_ids.empty()) {
        s.recall += q.recall;
        ++with_gold;
      }
      stats += a.stats;
      ttft.push_back(a.ttft_ms);
      request_s += a.request_ms / 1000.0;
      generated += a.generated_tokens;
      prompt += a.prompt_tokens;
    }
    if (s.questions > 0) {
      s.exact_match /= s.questions;
      s.contains /= s.questions;
      s.f1 /= s.questions;
    }
    s.recall = with_gold ? s.recall / with_gold : 0.0;
    s.token_hit_ratio = stats.token_hit_ratio();
    s.document_hit_ratio = stats.document_hit_ratio();
    s.ttft_p50_ms = median(ttft);
    if (c < config_seconds.size() && config_seconds[c] > 0) {
      s.seconds = config_seconds[c];
      request_s = s.seconds;
    }
    if (request_s > 0) {
      s.output_tokens_per_s = generated / request_s;
      s.all_tokens_per_s = (generated + prompt) / request_s;
    }
    out.push_back(s);
  }
  return out;
}

nlohmann::json report_json(const EvalReport& report) {
  using nlohmann::json;
  json j;
  j["question_source"] = report.question_source;
  j["corpus"] = report.corpus;
  j["model"] = report.model;
  j["backend"] = report.backend;
  j["device"] = report.device;
  j["chat_template"] = report.chat_template;
  j["retrieval"] = to_string(report.options.retrieval);
  j["k"] = report.options.k;
  j["max_new_tokens"] = report.options.max_new_tokens;
  j["system"] = report.options.system;
  j["chat"] = to_string(report.options.chat);
  j["concurrency"] = report.options.concurrency;
  j["scheduler"] = report.options.concurrency > 1
                       ? "serving scheduler: continuous batching, batched decode"
                       : "one request at a time";
  j["planned_questions"] = report.planned_questions;
  j["finished_questions"] = report.questions.size();
  j["cancelled"] = report.cancelled;
  j["wall_seconds"] = report.wall_seconds;
  j["metrics"] = {
      {"exact_match",
       "normalised answer equals a normalised gold answer (SQuAD normalisation), mean 0..1"},
      {"contains",
       "a normalised gold answer occurs as whole words inside the normalised answer, mean 0..1"},
      {"f1", "token F1 against the best gold answer, mean 0..1"},
      {"recall_at_k",
       "gold passages among the k passages in the prompt, mean over questions with gold passages"},
      {"token_hit_ratio",
       "prompt tokens served from the KV cache / prompt tokens; batched, as the serving engine "
       "counts it: cached document tokens / document + query tokens (the shared prefix left out)"},
      {"ttft_p50_ms", "median time from a request's arrival (its submission) to its first token"},
      {"output_tokens_per_s",
       "generated tokens / seconds: the sum of request times one at a time, the serving runs' "
       "wall time batched"},
      {"all_tokens_per_s", "prompt + generated tokens / the same seconds"}};
  json configs = json::array();
  for (const ConfigSummary& s : report.summaries()) {
    configs.push_back({{"key", s.key},
                       {"questions", s.questions},
                       {"exact_match", s.exact_match},
                       {"contains", s.contains},
                       {"f1", s.f1},
                       {"recall_at_k", s.recall},
                       {"token_hit_ratio", s.token_hit_ratio},
                       {"document_hit_ratio", s.document_hit_ratio},
                       {"ttft_p50_ms", s.ttft_p50_ms},
                       {"output_tokens_per_s", s.output_tokens_per_s},
                       {"all_tokens_per_s", s.all_tokens_per_s},
                       {"seconds", s.seconds}});
  }
  j["configurations"] = configs;
  if (const auto loss = report.block_em_loss_points()) j["block_em_loss_points"] = *loss;
  if (const auto loss = report.block_contains_loss_points())
    j["block_contains_loss_points"] = *loss;
  j["block_quality_note"] = report.block_quality_note();
  const IdentityVerdict identity = report.identity();
  const LogitTolerance tolerance =
      logit_tolerance_for(report.backend, report.exact_cpu() ? CpuPrecision::Exact : CpuPrecision::Fast);
  j["lazy_vs_materialized"] = {
      {"checked", identity.checked},
      {"compared", identity.compared},
      {"identical", identity.checked && identity.ok()},
      {"max_abs_logit_diff", identity.max_abs_diff},
      {"logit_tolerance", tolerance.absolute},
      {"logit_tolerance_relative", tolerance.relative},
      {"logit_tolerance_rule", tolerance.rule},
      {"differing", identity.differing},
      {"near_ties", identity.near_ties}};
  json questions = json::array();
  for (const QuestionResult& q : report.questions) {
    json item = {{"id", q.question.id},
                 {"question", q.question.question},
                 {"gold_answers", q.question.answers},
                 {"gold_passages", q.question.doc_ids},
                 {"passages", q.passage_ids},
                 {"recall_at_k", q.recall},
                 {"disagree", q.configurations_disagree()}};
    json answers = json::object();
    for (std::size_t c = 0; c < report.configs.size() && c < q.answers.size(); ++c) {
      const ConfigAnswer& a = q.answers[c];
      if (!a.ran) continue;
      answers[report.configs[c].key()] = {{"answer", a.text},
                                          {"ids", a.ids},
                                          {"exact_match", a.score.exact_match},
                                          {"contains", a.score.contains},
                                          {"f1", a.score.f1},
                                          {"prompt_tokens", a.prompt_tokens},
                                          {"generated_tokens", a.generated_tokens},
                                          {"ttft_ms", a.ttft_ms},
                                          {"request_ms", a.request_ms},
                                          {"cached_tokens", a.stats.cached_tokens},
                                          {"cache_prompt_tokens", a.stats.prompt_tokens},
                                          {"documents", a.stats.documents},
                                          {"document_hits", a.stats.document_hits},
                                          {"document_repeats", a.stats.document_repeats}};
    }
    item["answers"] = answers;
    if (q.identity) {
      item["lazy_vs_materialized"] = {{"identical", q.identity->identical},
                                      {"near_tie", q.identity->near_tie},
                                      {"step", q.identity->step},
                                      {"max_abs_logit_diff", q.identity->max_abs_diff},
                                      {"margins", {q.identity->margin_a, q.identity->margin_b}},
                                      {"verdict", q.identity->describe()}};
    }
    questions.push_back(item);
  }
  j["questions"] = questions;
  // Round-trip through text so invalid UTF-8 in answers becomes U+FFFD instead of throwing later.
  return json::parse(dump_text(j));
}

EvalReport report_from_json(const nlohmann::json& j, const std::string& source) {
  try {
    EvalReport r;
    r.question_source = j.value("question_source", "");
    r.corpus = j.value("corpus", "");
    r.model = j.value("model", "");
    r.backend = j.value("backend", "");
    r.device = j.value("device", "");
    r.chat_template = j.value("chat_template", "");
    r.options.retrieval = parse_retrieval(j.value("retrieval", "bm25"));
    r.options.k = j.value("k", 4);
    r.options.max_new_tokens = j.value("max_new_tokens", 24);
    r.options.system = j.value("system", "");
    r.options.chat = parse_chat_mode(j.value("chat", "auto"));
    r.options.concurrency = j.value("concurrency", 1);
    r.planned_questions = j.at("planned_questions").get<int>();
    r.cancelled = j.value("cancelled", false);
    r.wall_seconds = j.value("wall_seconds", 0.0);
    for (const auto& c : j.at("configurations")) {
      const std::string key = c.at("key").get<std::string>();
      const auto slash = key.find('/');
      if (slash == std::string::npos)
        throw Error("configuration \"" + key + "\" is not MODE/POLICY");
      r.configs.push_back({parse_mode(key.substr(0, slash)), parse_policy(key.substr(slash + 1))});
      r.config_seconds.push_back(c.value("seconds", 0.0));
    }
    for (const auto& item : j.at("questions")) {
      QuestionResult q;
      q.question.id = item.at("id").get<std::string>();
      q.question.question = item.at("question").get<std::string>();
      q.question.answers = item.at("gold_answers").get<std::vector<std::string>>();
      q.question.doc_ids = item.value("gold_passages", std::vector<std::string>{});
      q.passage_ids = item.value("passages", std::vector<std::string>{});
      q.recall = item.value("recall_at_k", 0.0);
      q.answers.resize(r.configs.size());
      const auto& answers = item.at("answers");
      for (std::size_t c = 0; c < r.configs.size(); ++c) {
        auto it = answers.find(r.configs[c].key());
        if (it == answers.end()) continue;
        ConfigAnswer& a = q.answers[c];
        a.ran = true;
        a.text = it->at("answer").get<std::string>();
        a.ids = it->value("ids", std::vector<int32_t>{});
        a.score = {it->value("exact_match", 0.0), it->value("contains", 0.0), it->value("f1", 0.0)};
        a.prompt_tokens = it->value("prompt_tokens", 0);
        a.generated_tokens = it->value("generated_tokens", 0);
        a.ttft_ms = it->value("ttft_ms", 0.0);
        a.request_ms = it->value("request_ms", 0.0);
        a.stats.prompt_tokens = it->value("cache_prompt_tokens", int64_t(a.prompt_tokens));
        a.stats.documents = it->value("documents", int64_t(0));
        a.stats.document_hits = it->value("document_hits", int64_t(0));
        a.stats.document_repeats = it->value("document_repeats", int64_t(0));
        a.stats.cached_tokens = it->value("cached_tokens", int64_t(0));
      }
      if (auto v = item.find("lazy_vs_materialized"); v != item.end() && v->is_object()) {
        TokenAgreement t;
        t.identical = v->at("identical").get<bool>();
        t.near_tie = v->value("near_tie", false);
        t.step = v->value("step", -1);
        t.max_abs_diff = v->value("max_abs_logit_diff", 0.0);
        q.identity = t;
      }
      r.questions.push_back(std::move(q));
    }
    return r;
  } catch (const nlohmann::json::exception& e) {
    throw Error(source + ": not an evaluation JSON written by lazyscope-cli eval (" + e.what() +
                ")");
  } catch (const Error& e) {
    throw Error(source + ": " + e.what());
  }
}

EvalReport load_report_json(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error(path.string() + ": cannot open the evaluation JSON");
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(in);
  } catch (const nlohmann::json::parse_error& e) {
    throw Error(path.string() + ": invalid JSON (" + e.what() + ")");
  }
  return report_from_json(j, path.string());
}

Request eval_request(const Question& question, const std::vector<Document>& passages,
                     const EvalOptions& options) {
  Request request;
  if (!options.system.empty()) request.prefix = options.system;
  for (const Document& d : passages) {
    request.documents.push_back(d.text);
    request.document_labels.push_back(d.title);
  }
  request.query = question.question;
  request.max_new_tokens = options.max_new_tokens;
  return request;
}

EvaluationRunner::EvaluationRunner(const DocumentStore& store, QuestionSet questions,
                                   std::vector<EvalConfig> configs, EvalOptions options)
    : store_(store),
      questions_(std::move(questions)),
      configs_(std::move(configs)),
      options_(std::move(options)) {
  if (options_.k < 1 || options_.k > 64)
    throw Error("-k must be between 1 and 64 (got " + std::to_string(options_.k) + ")");
  if (options_.max_new_tokens < 1 || options_.max_new_tokens > 4096) {
    throw Error("--max-new-tokens must be between 1 and 4096 (got " +
                std::to_string(options_.max_new_tokens) + ")");
  }
  if (options_.concurrency < 1 || options_.concurrency > kMaxEvalConcurrency) {
    throw Error("--concurrency must be between 1 and " + std::to_string(kMaxEvalConcurrency) +
                " (got " + std::to_string(options_.concurrency) + ")");
  }
  if (configs_.empty()) throw Error("evaluation: no configuration to run");
  if (questions_.questions.empty()) throw Error(questions_.source + ": no question to evaluate");
  check_gold_documents(questions_, store_);
  if (options_.retrieval == Retrieval::gold) {
    for (std::size_t i = 0; i < questions_.questions.size(); ++i) {
      if (questions_.questions[i].doc_ids.empty()) {
        throw Error(questions_.source + ": question \"" + questions_.questions[i].id +
                    "\" names no gold passage (doc_ids), so --retrieval gold cannot run it; use "
                    "--retrieval bm25");
      }
    }
  }
}

std::vector<Document> EvaluationRunner::retrieve(const Question& question) const {
  std::vector<Document> out;
  if (options_.retrieval == Retrieval::gold) {
    for (const std::string& id : question.doc_ids) out.push_back(store_.get(id));
    return out;
  }
  for (SearchHit& hit : store_.search(question.question, options_.k))
    out.push_back(std::move(hit.document));
  return out;
}

std::vector<Policy> EvaluationRunner::policies() const {
  std::vector<Policy> out;
  for (const EvalConfig& c : configs_) {
    if (std::find(out.begin(), out.end(), c.policy) == out.end()) out.push_back(c.policy);
  }
  return out;
}

QuestionResult EvaluationRunner::start_question(const Question& question) const {
  QuestionResult result;
  result.question = question;
  for (const Document& d : retrieve(question)) {
    result.passage_ids.push_back(d.id);
    result.passage_titles.push_back(d.title);
    result.passage_texts.push_back(d.text);
  }
  result.recall = options_.retrieval == Retrieval::gold
                      ? 1.0
                      : recall_at_k(result.passage_ids, question.doc_ids);
  result.answers.resize(configs_.size());
  return result;
}

namespace {

std::vector<Document> passages_of(const QuestionResult& q) {
  std::vector<Document> out;
  for (std::size_t i = 0; i < q.passage_ids.size(); ++i) {
    Document d;
    d.id = q.passage_ids[i];
    d.title = q.passage_titles[i];
    d.text = q.passage_texts[i];
    out.push_back(std::move(d));
  }
  return out;
}

// One configuration's answer to one question, scored against the question's gold answers: the
// bookkeeping both scheduling paths share.
ConfigAnswer scored_answer(const Question& question, std::string text, std::vector<int32_t> ids,
                           int prompt_tokens, double ttft_ms, double request_ms,
                           const CacheStats& stats) {
  ConfigAnswer a;
  a.ran = true;
  a.score = score_answer(text, question.answers);
  a.text = std::move(text);
  a.generated_tokens = int(ids.size());
  a.ids = std::move(ids);
  a.prompt_tokens = prompt_tokens;
  a.ttft_ms = ttft_ms;
  a.request_ms = request_ms;
  a.stats = stats;
  return a;
}

void report_progress(const EvalProgressFn& progress, const EvalReport& report,
                     Clock::time_point t0) {
  if (!progress) return;
  EvalProgress p;
  p.done = int(report.questions.size());
  p.total = report.planned_questions;
  p.elapsed_s = seconds_since(t0);
  p.remaining_s = p.elapsed_s / p.done * (p.total - p.done);
  p.last = &report.questions.back();
  progress(p);
}

}  // namespace

EvalReport EvaluationRunner::run(Session& session, const EvalProgressFn& progress,
                                 const std::atomic<bool>* cancel) {
  for (const EvalConfig& c : configs_) {
    const auto& served = session.policies();
    if (std::find(served.begin(), served.end(), c.policy) == served.end()) {
      throw Error("evaluation: the session has no KV pool for policy " +
                  std::string(to_string(c.policy)) + " (needed by " + c.key() + ")");
    }
  }
  const Clock::time_point t0 = Clock::now();
  EvalReport report;
  report.question_source = questions_.source;
  report.corpus = store_.path().string();
  report.model = session.config().name;
  report.backend = session.backend_name();
  report.device = session.device();
  report.options = options_;
  report.configs = configs_;
  report.config_seconds.assign(configs_.size(), 0.0);
  report.planned_questions = int(questions_.questions.size());
  report.chat_template = "off";
  if (options_.concurrency > 1) {
    run_batched(session, report, progress, cancel);
  } else {
    run_sequential(session, report, progress, cancel);
  }
  report.cancelled = report.questions.size() < questions_.questions.size();
  report.wall_seconds = seconds_since(t0);
  return report;
}

void EvaluationRunner::run_sequential(Session& session, EvalReport& report,
                                      const EvalProgressFn& progress,
                                      const std::atomic<bool>* cancel) {
  const Clock::time_point t0 = Clock::now();
  PreparationOptions preparation;
  preparation.chat = options_.chat;
  const int lazy = report.config_index(Mode::Block, Policy::Lazy);
  const int materialized = report.config_index(Mode::Block, Policy::Materialized);
  auto cancelled = [&] { return cancel && cancel->load(); };

  for (const Question& question : questions_.questions) {
    if (cancelled()) break;
    QuestionResult result = start_question(question);
    const std::vector<Document> passages = passages_of(result);
    std::vector<RunResult> kept(configs_.size());
    std::vector<double> seconds(configs_.size(), 0.0);
    bool complete = true;
    for (std::size_t c = 0; c < configs_.size(); ++c) {
      const PreparedRequest prepared =
          session.prepare(eval_request(question, passages, options_), preparation);
      if (prepared.chat_template_applied) report.chat_template = to_string(prepared.template_kind);
      RunOptions run;
      run.mode = configs_[c].mode;
      run.policy = configs_[c].policy;
      run.max_new_tokens = options_.max_new_tokens;
      run.keep_logits = int(c) == lazy || int(c) == materialized;
      run.cancel = cancel;
      const Clock::time_point start = Clock::now();
      RunResult r = session.submit(prepared, run);
      const double request_ms = 1000.0 * seconds_since(start);
      if (r.cancelled) {
        complete = false;
        break;
      }
      result.answers[c] = scored_answer(question, r.generated_text, r.generated_ids,
                                        r.prompt_tokens, r.ttft_ms, request_ms, r.stats);
      seconds[c] = request_ms / 1000.0;
      if (run.keep_logits) kept[c] = std::move(r);
    }
    if (!complete) break;  // a half-answered question is not kept: every configuration or none
    for (std::size_t c = 0; c < configs_.size(); ++c) report.config_seconds[c] += seconds[c];
    if (lazy >= 0 && materialized >= 0) {
      result.identity =
          agreement_of(kept[std::size_t(lazy)], kept[std::size_t(materialized)], report.backend);
    }
    report.questions.push_back(std::move(result));
    report_progress(progress, report, t0);
  }
}

void EvaluationRunner::run_batched(Session& session, EvalReport& report,
                                   const EvalProgressFn& progress,
                                   const std::atomic<bool>* cancel) {
  const Clock::time_point t0 = Clock::now();
  PreparationOptions preparation;
  preparation.chat = options_.chat;
  const int lazy = report.config_index(Mode::Block, Policy::Lazy);
  const int materialized = report.config_index(Mode::Block, Policy::Materialized);
  auto cancelled = [&] { return cancel && cancel->load(); };
  const int64_t context = session.config().max_position_embeddings;
  const std::vector<int32_t> eos = session.tokenizer().eos_ids();
  const std::size_t round_size = std::size_t(4 * options_.concurrency);
  const std::vector<Question>& all = questions_.questions;

  for (std::size_t first = 0; first < all.size() && !cancelled(); first += round_size) {
    const std::size_t count = std::min(round_size, all.size() - first);
    // The round's prompts, prepared exactly as the sequential path prepares them, as one
    // workload: the shared prefix, every distinct document once, one request per question.
    std::vector<QuestionResult> results;
    Workload workload;
    workload.options.requests = int(count);
    workload.options.concurrency = options_.concurrency;
    workload.options.vocab_size = session.config().shape.vocab_size;
    std::map<std::vector<int32_t>, int> document_index;
    for (std::size_t i = 0; i < count; ++i) {
      const Question& question = all[first + i];
      results.push_back(start_question(question));
      const PreparedRequest prepared = session.prepare(
          eval_request(question, passages_of(results.back()), options_), preparation);
      if (prepared.chat_template_applied) report.chat_template = to_string(prepared.template_kind);
      const PromptLayout& layout = prepared.layout;
      if (layout.total_tokens() > context) {
        throw Error("question \"" + question.id + "\": the prompt is " +
                    std::to_string(layout.total_tokens()) +
                    " tokens; the model's context (max_position_embeddings) holds " +
                    std::to_string(context));
      }
      if (i == 0) {
        workload.prefix = layout.prefix;
      } else if (layout.prefix != workload.prefix) {
        throw Error("evaluation: question \"" + question.id +
                    "\" has another prompt prefix than the round's first question (the system "
                    "text and chat template are the same for every question)");
      }
      WorkloadRequest request;
      request.index = int(i);
      for (const std::vector<int32_t>& doc : layout.documents) {
        auto [it, added] = document_index.emplace(doc, int(workload.documents.size()));
        if (added) workload.documents.push_back(doc);
        request.documents.push_back(it->second);
      }
      request.query = layout.query;
      request.output_tokens =
          int(std::min<int64_t>(options_.max_new_tokens, context - layout.total_tokens()));
      workload.requests.push_back(std::move(request));
    }
    workload.options.documents = int(workload.documents.size());

    bool complete = true;
    for (std::size_t c = 0; c < configs_.size() && complete; ++c) {
      SchedulerOptions options;
      options.mode = configs_[c].mode;
      options.policy = configs_[c].policy;
      options.max_running = options_.concurrency;
      options.keep_samples = false;
      options.keep_tokens = true;
      options.stop_tokens = eos;
      const Clock::time_point start = Clock::now();
      const ServingResult served = session.serve(workload, options, nullptr, cancel);
      if (served.cancelled) {
        complete = false;
        break;
      }
      report.config_seconds[c] += seconds_since(start);
      for (std::size_t i = 0; i < count; ++i) {
        const RequestRecord& rec = served.records[i];
        std::vector<int32_t> visible = rec.tokens;
        if (!visible.empty() && std::find(eos.begin(), eos.end(), visible.back()) != eos.end())
          visible.pop_back();
        // As the serving engine counts them: cached document tokens over the document and
        // query tokens (the shared prefix left out), documents placed once per request.
        CacheStats stats;
        stats.prompt_tokens = rec.prompt_tokens - rec.prefix_tokens;
        stats.cached_tokens = rec.cached_document_tokens;
        stats.documents = rec.documents;
        stats.document_repeats = rec.repeats;
        stats.document_hits = rec.document_hits;
        stats.bytes_copied = rec.bytes_copied;
        results[i].answers[c] =
            scored_answer(results[i].question, session.tokenizer().decode(visible), rec.tokens,
                          rec.prompt_tokens, rec.ttft_ms(), rec.e2e_ms(), stats);
      }
    }
    if (!complete) break;  // the round's questions are dropped: every configuration or none

    for (QuestionResult& result : results) {
      if (lazy >= 0 && materialized >= 0) {
        const ConfigAnswer& l = result.answers[std::size_t(lazy)];
        const ConfigAnswer& m = result.answers[std::size_t(materialized)];
        TokenAgreement agreement;  // identical tokens (batched decode keeps no logits)
        if (l.ids != m.ids) {
          // The engine's near-tie rule needs logits: run both again one at a time, keeping them.
          const PreparedRequest prepared = session.prepare(
              eval_request(result.question, passages_of(result), options_), preparation);
          RunOptions run;
          run.max_new_tokens = options_.max_new_tokens;
          run.mode = Mode::Block;
          run.policy = Policy::Lazy;
          const RunResult a = session.submit(prepared, run);
          run.policy = Policy::Materialized;
          const RunResult b = session.submit(prepared, run);
          agreement = agreement_of(a, b, report.backend);
          if (a.generated_ids != l.ids || b.generated_ids != m.ids) {
            agreement.near_tie = false;
            agreement.explanation =
                "batched lazy and materialized tokens differ; run again one at a time they give "
                "other tokens (" +
                agreement.describe() + ")";
          }
        }
        result.identity = agreement;
      }
      report.questions.push_back(std::move(result));
      report_progress(progress, report, t0);
    }
  }
}

}  // namespace lazyscope::corpora

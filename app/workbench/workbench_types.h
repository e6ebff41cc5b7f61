#pragma once
// Plain values that cross from the engine worker thread to the GUI thread as queued signals.
#include <QMetaType>
#include <QString>
#include <QStringList>
#include <vector>

#include "engine/events/events.h"
#include "engine/runtime/equivalence.h"
#include "engine/runtime/request.h"
#include "engine/runtime/request_preparation.h"
#include "engine/runtime/session.h"

namespace lazyscope::workbench {

// One output column of a run: a named (mode, policy) pair.
struct PolicyChoice {
  QString key;  // "lazy", "materialized", "full", "none", "prefix", "positional"
  Mode mode = Mode::Block;
  Policy policy = Policy::Lazy;
};

// Every choice the prompt panel offers, in display order.
const std::vector<PolicyChoice>& policy_choices();
PolicyChoice policy_choice(const QString& key);  // throws Error for unknown keys

struct RunPlan {
  int run_index = 0;  // 1-based, grows with every press of Run
  Request request;    // what the user chose; the engine prepares the prompt (as the CLI does)
  PreparationOptions preparation;
  std::vector<PolicyChoice> policies;
};

// What the GUI keeps of a RunResult (the logits stay on the worker).
struct RunSummary {
  int run_index = 0;
  QString key;
  int prompt_tokens = 0;
  std::vector<int32_t> prompt_ids;  // prefix, documents in order, query: what ran
  bool chat_template_applied = false;
  int generated_tokens = 0;
  QString generated_text;
  double ttft_ms = 0.0;
  double decode_ms_per_token = 0.0;
  CacheStats stats;
  bool cancelled = false;
};

struct ModelInfo {
  QString name;
  QString path;
  QString backend;
  QString device;
  int block_size = 0;
  int pool_blocks = 0;             // per policy: every policy has its own pool
  int policy_pools = 0;            // how many policies have one
  qint64 bytes_per_block = 0;
  qint64 kv_budget_bytes = 0;      // per policy
  QString trace_note;  // --trace-gpu asked for, but no GPU trace: why (empty otherwise)
  int num_heads = 0, num_kv_heads = 0, head_dim = 0;  // attention shape (Run ▸ Measure Lazy Overhead)
};

// Top candidates of one step's logits, for tooltips.
struct TokenCandidate {
  QString text;
  int id = 0;
  float logit = 0.0f;
};

struct EquivalenceStep {
  int step = 0;
  float max_abs_diff = 0.0f;
  float tolerance = 1e-4f;  // the rule's rounding bound at this step
  int argmax_a = -1;
  int argmax_b = -1;
  std::vector<TokenCandidate> top_a, top_b;
  bool mismatch() const { return argmax_a != argmax_b; }
};

// The engine's equivalence rule (engine/runtime/equivalence.h) with what the strip shows.
struct EquivalenceReport {
  QString key_a, key_b;  // "lazy", "materialized"
  std::vector<EquivalenceStep> steps;  // compared steps: up to and including the first flip
  int uncompared_steps = 0;            // after a flip the runs continue from different tokens
  int tokens_a = 0, tokens_b = 0;      // generated tokens of each run
  bool same_tokens = true;             // generated ids identical over the shorter run
  EquivalenceVerdict verdict = EquivalenceVerdict::Identical;
  QString explanation;                 // the rule's sentence: where and why
  QString rule;                        // the bound that applied, e.g. "exact CPU (fp32): 1e-4"
  bool bound_scales = false;           // the bound grows with the logits (fast CPU, GPU)
  bool fast_cpu = false;               // the fast CPU's bound: exact precision checks the strict 1e-4
  float max_abs_diff() const;
  int mismatches() const;
  int first_mismatch() const;  // -1 when none
  QString summary() const;
};

}  // namespace lazyscope::workbench

Q_DECLARE_METATYPE(lazyscope::SegmentEvent)
Q_DECLARE_METATYPE(lazyscope::BlockEvent)
Q_DECLARE_METATYPE(lazyscope::TokenEvent)
Q_DECLARE_METATYPE(lazyscope::RequestFinishedEvent)
Q_DECLARE_METATYPE(lazyscope::PoolEvent)
Q_DECLARE_METATYPE(lazyscope::PoolSnapshot)
Q_DECLARE_METATYPE(lazyscope::workbench::RunPlan)
Q_DECLARE_METATYPE(lazyscope::workbench::RunSummary)
Q_DECLARE_METATYPE(lazyscope::workbench::ModelInfo)
Q_DECLARE_METATYPE(lazyscope::workbench::EquivalenceReport)

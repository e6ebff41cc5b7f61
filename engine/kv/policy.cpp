#include "engine/kv/policy.h"

#include "base/error.h"

namespace lazyscope {

Mode parse_mode(const std::string& text) {
  if (text == "full") return Mode::Full;
  if (text == "block") return Mode::Block;
  throw Error("unknown mode '" + text + "' (expected full or block)");
}

Policy parse_policy(const std::string& text) {
  if (text == "none") return Policy::None;
  if (text == "prefix") return Policy::Prefix;
  if (text == "positional") return Policy::Positional;
  if (text == "materialized") return Policy::Materialized;
  if (text == "lazy") return Policy::Lazy;
  throw Error("unknown policy '" + text + "' (expected none, prefix, positional, materialized or lazy)");
}

const char* to_string(Mode mode) { return mode == Mode::Full ? "full" : "block"; }

const char* to_string(Policy policy) {
  switch (policy) {
    case Policy::None: return "none";
    case Policy::Prefix: return "prefix";
    case Policy::Positional: return "positional";
    case Policy::Materialized: return "materialized";
    case Policy::Lazy: return "lazy";
  }
  return "?";
}

void check_mode_policy(Mode mode, Policy policy) {
  if (mode == Mode::Block && policy == Policy::Prefix) {
    throw Error("policy 'prefix' caches full-attention prefixes: use it with --mode full");
  }
  if (mode == Mode::Full && (policy == Policy::Positional || policy == Policy::Materialized ||
                             policy == Policy::Lazy)) {
    throw Error(std::string("policy '") + to_string(policy) +
                "' serves block attention: use it with --mode block");
  }
}

const std::vector<Policy>& all_policies() {
  static const std::vector<Policy> all = {Policy::None, Policy::Prefix, Policy::Positional, Policy::Materialized,
                                          Policy::Lazy};
  return all;
}

}  // namespace lazyscope

#pragma once
// Attention semantics (mode) and cache policy (docs/design.md).
#include <string>
#include <vector>

namespace lazyscope {

enum class Mode { Full, Block };
enum class Policy { None, Prefix, Positional, Materialized, Lazy };

Mode parse_mode(const std::string& text);
Policy parse_policy(const std::string& text);
const char* to_string(Mode mode);
const char* to_string(Policy policy);
// The five policies in table order: none, prefix, positional, materialized, lazy.
const std::vector<Policy>& all_policies();
// Throws Error when the policy cannot serve the mode (prefix is full-attention only,
// positional/materialized/lazy serve block attention only).
void check_mode_policy(Mode mode, Policy policy);

}  // namespace lazyscope

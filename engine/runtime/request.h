#pragma once
// A RAG request (the request file of docs/formats.md) and its parsing.
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

namespace lazyscope {

struct Request {
  std::optional<std::string> prefix;                 // system/prefix text
  std::optional<std::vector<int32_t>> prefix_ids;    // BOS included
  std::vector<std::string> documents;
  std::vector<std::vector<int32_t>> document_ids;
  std::vector<std::string> document_labels;          // titles for display; optional
  std::vector<int> order;                            // indexes documents; empty = as given
  std::string query;
  std::optional<std::vector<int32_t>> query_ids;
  int max_new_tokens = 32;

  bool uses_ids() const { return prefix_ids.has_value() || query_ids.has_value() || !document_ids.empty(); }
  int document_count() const { return int(uses_ids() ? document_ids.size() : documents.size()); }
  std::vector<int> effective_order() const;
};

// Throws Error naming `source_name` and the problem.
Request parse_request_json(const std::string& json_text, const std::string& source_name);
Request load_request_file(const std::filesystem::path& path);

}  // namespace lazyscope

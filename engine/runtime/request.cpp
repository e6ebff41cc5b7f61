#include "engine/runtime/request.h"

#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "base/error.h"
#include "base/limits.h"

namespace lazyscope {
namespace {

using nlohmann::json;

[[noreturn]] void fail(const std::string& source, const std::string& what) {
  throw Error(source + ": " + what);
}

std::vector<int32_t> int_array(const json& j, const std::string& source, const std::string& field) {
  if (!j.is_array()) fail(source, "\"" + field + "\" must be an array of token ids");
  std::vector<int32_t> out;
  for (std::size_t i = 0; i < j.size(); ++i) {
    if (!j[i].is_number_integer() || j[i].get<int64_t>() < 0 || j[i].get<int64_t>() > INT32_MAX) {
      fail(source, "\"" + field + "\"[" + std::to_string(i) + "] is not a non-negative integer token id");
    }
    out.push_back(j[i].get<int32_t>());
  }
  return out;
}

std::string string_field(const json& j, const std::string& source, const std::string& field) {
  if (!j.is_string()) fail(source, "\"" + field + "\" must be a string");
  return j.get<std::string>();
}

}  // namespace

std::vector<int> Request::effective_order() const {
  if (!order.empty()) return order;
  std::vector<int> o(document_count());
  for (int i = 0; i < int(o.size()); ++i) o[i] = i;
  return o;
}

Request parse_request_json(const std::string& json_text, const std::string& source) {
  json j;
  try {
    j = json::parse(json_text);
  } catch (const json::exception& e) {
    fail(source, std::string("not valid JSON: ") + e.what());
  }
  if (!j.is_object()) fail(source, "the request must be a JSON object");
  static const char* known[] = {"prefix", "documents", "order", "query", "max_new_tokens", "prefix_ids",
                                "document_ids", "query_ids", "titles"};
  for (const auto& [key, value] : j.items()) {
    bool ok = false;
    for (const char* k : known) ok = ok || key == k;
    if (!ok) fail(source, "unknown field \"" + key + "\"");
  }
  Request r;
  if (j.contains("prefix") && !j["prefix"].is_null()) r.prefix = string_field(j["prefix"], source, "prefix");
  if (j.contains("prefix_ids")) r.prefix_ids = int_array(j["prefix_ids"], source, "prefix_ids");
  if (j.contains("documents")) {
    if (!j["documents"].is_array()) fail(source, "\"documents\" must be an array of strings");
    for (std::size_t i = 0; i < j["documents"].size(); ++i) {
      r.documents.push_back(string_field(j["documents"][i], source, "documents[" + std::to_string(i) + "]"));
    }
  }
  if (j.contains("document_ids")) {
    if (!j["document_ids"].is_array()) fail(source, "\"document_ids\" must be an array of arrays of ids");
    for (std::size_t i = 0; i < j["document_ids"].size(); ++i) {
      r.document_ids.push_back(int_array(j["document_ids"][i], source, "document_ids[" + std::to_string(i) + "]"));
    }
  }
  if (j.contains("titles")) {
    if (!j["titles"].is_array()) fail(source, "\"titles\" must be an array of strings");
    for (std::size_t i = 0; i < j["titles"].size(); ++i) {
      r.document_labels.push_back(string_field(j["titles"][i], source, "titles[" + std::to_string(i) + "]"));
    }
  }
  if (j.contains("query")) r.query = string_field(j["query"], source, "query");
  if (j.contains("query_ids")) r.query_ids = int_array(j["query_ids"], source, "query_ids");
  if (!j.contains("query") && !j.contains("query_ids")) fail(source, "missing \"query\" (or \"query_ids\")");
  if (j.contains("max_new_tokens")) {
    if (!j["max_new_tokens"].is_number_integer() || j["max_new_tokens"].get<int64_t>() < 0 ||
        j["max_new_tokens"].get<int64_t>() > limits::kMaxNewTokens) {
      fail(source, "\"max_new_tokens\" must be an integer in 0.." + std::to_string(limits::kMaxNewTokens));
    }
    r.max_new_tokens = j["max_new_tokens"].get<int>();
  }
  const bool text = j.contains("documents") || j.contains("query") || j.contains("prefix");
  const bool ids = j.contains("document_ids") || j.contains("query_ids") || j.contains("prefix_ids");
  if (text && ids) fail(source, "mixes text fields (prefix/documents/query) with id fields (*_ids); use one form");
  if (j.contains("order")) {
    if (!j["order"].is_array()) fail(source, "\"order\" must be an array of document indexes");
    if (j["order"].size() > std::size_t(limits::kMaxPlacedDocuments)) {
      fail(source, "\"order\" places " + std::to_string(j["order"].size()) + " documents; at most " +
                       std::to_string(limits::kMaxPlacedDocuments) + " fit in one request");
    }
    for (std::size_t i = 0; i < j["order"].size(); ++i) {
      const json& v = j["order"][i];
      if (!v.is_number_integer() || v.get<int64_t>() < 0 || v.get<int64_t>() >= r.document_count()) {
        fail(source, "\"order\"[" + std::to_string(i) + "] is not an index into the " +
                         std::to_string(r.document_count()) + " documents");
      }
      r.order.push_back(v.get<int>());
    }
  }
  return r;
}

Request load_request_file(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error(path.string() + ": cannot open the request file");
  std::stringstream ss;
  ss << in.rdbuf();
  return parse_request_json(ss.str(), path.string());
}

}  // namespace lazyscope

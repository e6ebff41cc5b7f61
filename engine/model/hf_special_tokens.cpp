#include "engine/model/hf_special_tokens.h"

#include <algorithm>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "base/error.h"

namespace lazyscope {
namespace {

using nlohmann::json;

// Parsed JSON of an optional file; null when the file is absent.
json read_optional_json(const std::filesystem::path& path) {
  if (!std::filesystem::exists(path)) return nullptr;
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error(path.string() + ": cannot open");
  std::ostringstream text;
  text << in.rdbuf();
  json j;
  try {
    j = json::parse(text.str());
  } catch (const json::exception& e) {
    throw Error(path.string() + ": not valid JSON: " + e.what());
  }
  if (!j.is_object()) throw Error(path.string() + ": top level must be a JSON object");
  return j;
}

std::vector<int32_t> ids_field(const json& j, const char* key, const std::filesystem::path& file) {
  std::vector<int32_t> ids;
  if (!j.is_object()) return ids;
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return ids;
  auto one = [&](const json& v) {
    if (!v.is_number_integer() || v.get<int64_t>() < 0) {
      throw Error(file.string() + ": field '" + key + "' must hold token ids, found " + v.dump());
    }
    ids.push_back(int32_t(v.get<int64_t>()));
  };
  if (it->is_array()) {
    for (const json& v : *it) one(v);
  } else {
    one(*it);
  }
  return ids;
}

// tokenizer_config.json writes a token as "text" or {"content": "text", ...}.
std::optional<std::string> token_text(const json& j, const char* key) {
  if (!j.is_object()) return std::nullopt;
  auto it = j.find(key);
  if (it == j.end()) return std::nullopt;
  if (it->is_string()) return it->get<std::string>();
  if (it->is_object() && it->contains("content") && (*it)["content"].is_string()) {
    return (*it)["content"].get<std::string>();
  }
  return std::nullopt;
}

// Ids of the special token the TemplateProcessing "single" template starts with, if any.
std::vector<int32_t> leading_template_ids(const json& processor) {
  if (!processor.is_object()) return {};
  const std::string type = processor.value("type", "");
  if (type == "Sequence") {
    auto list = processor.find("processors");
    if (list == processor.end() || !list->is_array()) return {};
    for (const json& p : *list) {
      std::vector<int32_t> ids = leading_template_ids(p);
      if (!ids.empty()) return ids;
    }
    return {};
  }
  if (type != "TemplateProcessing") return {};
  auto single = processor.find("single");
  if (single == processor.end() || !single->is_array() || single->empty()) return {};
  const json& first = (*single)[0];
  if (!first.is_object() || !first.contains("SpecialToken")) return {};
  const json& special = first["SpecialToken"];
  if (!special.is_object() || !special.contains("id") || !special["id"].is_string()) return {};
  const std::string name = special["id"].get<std::string>();
  auto tokens = processor.find("special_tokens");
  if (tokens == processor.end() || !tokens->is_object() || !tokens->contains(name)) return {};
  const json& entry = (*tokens)[name];
  std::vector<int32_t> ids;
  if (entry.is_object() && entry.contains("ids") && entry["ids"].is_array()) {
    for (const json& v : entry["ids"]) {
      if (v.is_number_integer()) ids.push_back(int32_t(v.get<int64_t>()));
    }
  }
  return ids;
}

}  // namespace

HfSpecialTokens read_hf_special_tokens(const std::filesystem::path& dir, const ModelConfig& config,
                                       const std::string& tokenizer_json_text,
                                       const TokenLookup& lookup) {
  const std::filesystem::path gen_path = dir / "generation_config.json";
  const std::filesystem::path tok_cfg_path = dir / "tokenizer_config.json";
  const json gen = read_optional_json(gen_path);
  const json tok_cfg = read_optional_json(tok_cfg_path);

  HfSpecialTokens out;
  out.bos_id = config.bos_token_id;
  if (out.bos_id < 0) {
    std::vector<int32_t> ids = ids_field(gen, "bos_token_id", gen_path);
    if (!ids.empty()) out.bos_id = ids[0];
  }
  if (out.bos_id < 0 && lookup) {
    if (auto text = token_text(tok_cfg, "bos_token")) out.bos_id = lookup(*text).value_or(-1);
  }

  auto add_eos = [&](const std::vector<int32_t>& ids) {
    for (int32_t id : ids) {
      if (std::find(out.eos_ids.begin(), out.eos_ids.end(), id) == out.eos_ids.end()) {
        out.eos_ids.push_back(id);
      }
    }
  };
  add_eos(config.eos_token_ids);
  add_eos(ids_field(gen, "eos_token_id", gen_path));
  if (out.eos_ids.empty() && lookup) {
    if (auto text = token_text(tok_cfg, "eos_token")) {
      if (auto id = lookup(*text)) add_eos({*id});
    }
  }

  bool add_bos_known = false;
  if (tok_cfg.is_object() && tok_cfg.contains("add_bos_token") &&
      !tok_cfg["add_bos_token"].is_null()) {
    if (!tok_cfg["add_bos_token"].is_boolean()) {
      throw Error(tok_cfg_path.string() + ": field 'add_bos_token' must be true or false");
    }
    out.add_bos = tok_cfg["add_bos_token"].get<bool>();
    add_bos_known = true;
  }
  if (!tokenizer_json_text.empty() && (!add_bos_known || out.bos_id < 0)) {
    // Llama 3 states "prepend BOS" only in tokenizer.json's post-processor.
    json tok = json::parse(tokenizer_json_text, nullptr, /*allow_exceptions=*/false);
    if (tok.is_object() && tok.contains("post_processor")) {
      std::vector<int32_t> ids = leading_template_ids(tok["post_processor"]);
      if (!ids.empty()) {
        if (out.bos_id < 0) out.bos_id = ids[0];
        if (!add_bos_known) out.add_bos = (ids[0] == out.bos_id);
      }
    }
  }
  if (out.bos_id < 0) out.add_bos = false;

  if (tok_cfg.is_object() && tok_cfg.contains("chat_template")) {
    const json& t = tok_cfg["chat_template"];
    if (t.is_string()) {
      out.chat_template = t.get<std::string>();
    } else if (t.is_array()) {
      // Several named templates: the "default" one, else the first.
      for (const json& named : t) {
        if (named.is_object() && named.value("name", "") == "default" &&
            named.contains("template") && named["template"].is_string()) {
          out.chat_template = named["template"].get<std::string>();
        }
      }
      if (out.chat_template.empty() && !t.empty() && t[0].is_object() &&
          t[0].contains("template") && t[0]["template"].is_string()) {
        out.chat_template = t[0]["template"].get<std::string>();
      }
    }
  }
  if (out.chat_template.empty()) {
    // Newer transformers save the template beside the config instead.
    const std::filesystem::path jinja = dir / "chat_template.jinja";
    if (std::filesystem::exists(jinja)) {
      std::ifstream in(jinja, std::ios::binary);
      std::ostringstream text;
      text << in.rdbuf();
      out.chat_template = text.str();
    }
  }
  return out;
}

}  // namespace lazyscope

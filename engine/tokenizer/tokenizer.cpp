// HF tokenizer.json (byte-level BPE) loading, encoding and decoding.
#include "engine/tokenizer/tokenizer.h"

#include <algorithm>
#include <deque>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <unordered_map>

#include "engine/tokenizer/added_tokens.h"
#include "engine/tokenizer/bpe_model.h"
#include "engine/tokenizer/byte_level.h"
#include "engine/tokenizer/regex_splitter.h"
#include "base/error.h"

namespace lazyscope {

using nlohmann::json;

namespace {

// One pre-tokenizer stage: optional space prefix on each piece, then an optional regex split.
struct PreTokenizerStage {
  bool add_prefix_space = false;
  std::optional<RegexSplitter> splitter;
  SplitBehavior behavior = SplitBehavior::kIsolated;
  bool invert = false;
};

std::string read_text_file(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error(path.string() + ": cannot open file");
  std::ostringstream buffer;
  buffer << in.rdbuf();
  if (in.bad()) throw Error(path.string() + ": read error");
  return buffer.str();
}

std::string describe_type(const json& node) {
  if (node.is_object() && node.contains("type") && node["type"].is_string())
    return node["type"].get<std::string>();
  return node.dump().substr(0, 80);
}

bool bool_field(const json& node, const char* key, bool fallback) {
  if (!node.contains(key) || node[key].is_null()) return fallback;
  return node[key].get<bool>();
}

}  // namespace

struct Tokenizer::Impl {
  std::string source;
  std::unordered_map<std::string, int32_t> vocab;  // byte-level token string -> id
  std::vector<std::string> id_to_token;            // byte-level form, or raw content when added
  std::vector<uint8_t> id_is_added;
  std::vector<std::string> id_to_text;  // decoded bytes of each token, filled by finish()
  std::unordered_map<std::string, int32_t> added_by_content;
  AddedTokenMatcher raw_added;         // matched first, in the raw text (normalized: false)
  AddedTokenMatcher normalized_added;  // matched next, in what is left (normalized: true)
  std::vector<PreTokenizerStage> stages;
  BpeModel model;
  int32_t bos = -1;
  std::vector<int32_t> eos;
  bool add_bos = false;

  void set_token(int32_t id, const std::string& text, bool added) {
    if (id < 0) throw Error(source + ": negative token id " + std::to_string(id));
    if (static_cast<size_t>(id) >= id_to_token.size()) {
      id_to_token.resize(static_cast<size_t>(id) + 1);
      id_is_added.resize(static_cast<size_t>(id) + 1, 0);
    }
    id_to_token[static_cast<size_t>(id)] = text;
    id_is_added[static_cast<size_t>(id)] = added ? 1 : 0;
  }

  void add_added_token(const AddedTokenRule& rule, bool normalized) {
    set_token(rule.id, rule.content, true);
    added_by_content.try_emplace(rule.content, rule.id);
    (normalized ? normalized_added : raw_added).add(rule);
  }

  void pre_tokenize(std::string_view text, std::vector<int32_t>& out) const;

  // Decodes every token once so that decode() is a concatenation.
  void finish() {
    id_to_text.resize(id_to_token.size());
    for (size_t id = 0; id < id_to_token.size(); ++id) {
      const std::string& token = id_to_token[id];
      if (id_is_added[id]) {
        id_to_text[id] = token;
      } else if (auto bytes = byte_level::decode(token)) {
        id_to_text[id] = std::move(*bytes);
      } else {
        id_to_text[id] = token;  // like HF's ByteLevel decoder: outside the alphabet, as is
      }
    }
  }
};

void Tokenizer::Impl::pre_tokenize(std::string_view text, std::vector<int32_t>& out) const {
  std::vector<std::string_view> pieces{text};
  std::deque<std::string> prefixed;  // storage for pieces that gained a leading space
  for (const auto& stage : stages) {
    if (stage.add_prefix_space) {
      for (auto& piece : pieces) {
        if (!piece.empty() && piece.front() != ' ') {
          std::string with_space(1, ' ');
          with_space.append(piece);
          prefixed.push_back(std::move(with_space));
          piece = prefixed.back();
        }
      }
    }
    if (stage.splitter) {
      std::vector<std::string_view> next;
      next.reserve(pieces.size());
      for (auto piece : pieces)
        for (auto part : stage.splitter->split(piece, stage.behavior, stage.invert))
          next.push_back(part);
      pieces = std::move(next);
    }
  }
  for (auto piece : pieces) model.encode_piece(piece, out);
}

Tokenizer::Tokenizer() : impl_(std::make_unique<Impl>()) {}
Tokenizer::~Tokenizer() = default;
Tokenizer::Tokenizer(Tokenizer&&) noexcept = default;
Tokenizer& Tokenizer::operator=(Tokenizer&&) noexcept = default;

Tokenizer Tokenizer::from_json_file(const std::filesystem::path& tokenizer_json) {
  return from_json(read_text_file(tokenizer_json), tokenizer_json.string());
}

namespace {

void parse_pre_tokenizer(const json& node, const std::string& where,
                         std::vector<PreTokenizerStage>& stages, bool& saw_byte_level) {
  const std::string type = describe_type(node);
  if (type == "Sequence") {
    for (const auto& child : node.at("pretokenizers"))
      parse_pre_tokenizer(child, where, stages, saw_byte_level);
  } else if (type == "Split") {
    const json& pattern = node.at("pattern");
    std::string regex;
    if (pattern.contains("Regex")) {
      regex = pattern["Regex"].get<std::string>();
    } else if (pattern.contains("String")) {
      regex = "\\Q" + pattern["String"].get<std::string>() + "\\E";
    } else {
      throw Error(where + ": Split pattern must be {\"Regex\": ...} or {\"String\": ...}");
    }
    const std::string behavior_name = node.value("behavior", std::string("Isolated"));
    SplitBehavior behavior;
    if (behavior_name == "Isolated") {
      behavior = SplitBehavior::kIsolated;
    } else if (behavior_name == "Removed") {
      behavior = SplitBehavior::kRemoved;
    } else if (behavior_name == "MergedWithPrevious") {
      behavior = SplitBehavior::kMergedWithPrevious;
    } else if (behavior_name == "MergedWithNext") {
      behavior = SplitBehavior::kMergedWithNext;
    } else if (behavior_name == "Contiguous") {
      behavior = SplitBehavior::kContiguous;
    } else {
      throw Error(where + ": Split behavior \"" + behavior_name + "\" is not supported");
    }
    stages.push_back(PreTokenizerStage{false, RegexSplitter(regex, where + " Split"), behavior,
                                       bool_field(node, "invert", false)});
  } else if (type == "Digits") {
    // Digits are \p{N} in HF (Rust's char::is_numeric); each alone, or runs kept together.
    const char* pattern = bool_field(node, "individual_digits", false) ? R"(\p{N})" : R"(\p{N}+)";
    stages.push_back(PreTokenizerStage{false, RegexSplitter(pattern, where + " Digits")});
  } else if (type == "ByteLevel") {
    PreTokenizerStage stage;
    stage.add_prefix_space = bool_field(node, "add_prefix_space", true);
    if (bool_field(node, "use_regex", true))
      stage.splitter.emplace(kGpt2SplitPattern, where + " ByteLevel");
    stages.push_back(std::move(stage));
    saw_byte_level = true;
  } else {
    throw Error(where + ": pre-tokenizer \"" + type + "\" is not supported");
  }
}

void check_decoder(const json& node, const std::string& where) {
  const std::string type = describe_type(node);
  if (type == "Sequence") {
    for (const auto& child : node.at("decoders")) check_decoder(child, where);
  } else if (type != "ByteLevel") {
    throw Error(where + ": decoder \"" + type + "\" is not supported (only ByteLevel)");
  }
}

// Returns the BOS token content when the single-sequence template starts with a special token.
std::optional<std::string> parse_post_processor(const json& node, const std::string& where) {
  const std::string type = describe_type(node);
  if (type == "Sequence") {
    std::optional<std::string> bos;
    for (const auto& child : node.at("processors"))
      if (auto found = parse_post_processor(child, where)) bos = found;
    return bos;
  }
  if (type == "ByteLevel") return std::nullopt;
  if (type != "TemplateProcessing")
    throw Error(where + ": post-processor \"" + type + "\" is not supported");
  const json& single = node.at("single");
  for (const auto& piece : single) {
    if (piece.contains("Sequence")) return std::nullopt;  // text comes first: no BOS
    if (piece.contains("SpecialToken")) {
      const std::string name = piece["SpecialToken"].at("id").get<std::string>();
      const json& specials = node.value("special_tokens", json::object());
      if (specials.contains(name) && specials[name].contains("tokens") &&
          !specials[name]["tokens"].empty())
        return specials[name]["tokens"][0].get<std::string>();
      return name;
    }
  }
  return std::nullopt;
}

// Bounds the id table a file can ask for.
constexpr int64_t kMaxTokenId = (int64_t(1) << 24) - 1;

// A token id read from the file: an integer in 0..kMaxTokenId, or an error naming `what`.
int32_t checked_token_id(const json& id, const std::string& source_name, const std::string& what) {
  if (!id.is_number_integer() || id.get<int64_t>() < 0 || id.get<int64_t>() > kMaxTokenId)
    throw Error(source_name + ": " + what + " must be an integer in 0.." +
                std::to_string(kMaxTokenId));
  return id.get<int32_t>();
}

}  // namespace

Tokenizer Tokenizer::from_json(std::string_view json_text, const std::string& source_name) {
  json root;
  try {
    root = json::parse(json_text);
  } catch (const json::exception& e) {
    throw Error(source_name + ": invalid JSON: " + e.what());
  }
  if (!root.is_object()) throw Error(source_name + ": top level is not a JSON object");

  Tokenizer tokenizer;
  Impl& impl = *tokenizer.impl_;
  impl.source = source_name;
  std::string component = "model";
  try {
    if (root.contains("normalizer") && !root["normalizer"].is_null()) {
      component = "normalizer";
      const json& normalizer = root["normalizer"];
      const bool empty_sequence = describe_type(normalizer) == "Sequence" &&
                                  normalizer.value("normalizers", json::array()).empty();
      if (!empty_sequence)
        throw Error(source_name + ": normalizer \"" + describe_type(normalizer) +
                    "\" is not supported (byte-level BPE tokenizers have none)");
    }

    component = "model";
    if (!root.contains("model") || !root["model"].is_object())
      throw Error(source_name + ": missing \"model\" object");
    const json& model = root["model"];
    const std::string model_type = model.value("type", std::string("BPE"));
    if (model_type != "BPE")
      throw Error(source_name + ": model type \"" + model_type + "\" is not supported (only BPE)");
    if (model.contains("dropout") && !model["dropout"].is_null() &&
        model["dropout"].get<double>() != 0.0)
      throw Error(source_name + ": BPE dropout is not supported");
    for (const char* key : {"continuing_subword_prefix", "end_of_word_suffix"})
      if (model.contains(key) && !model[key].is_null() && !model[key].get<std::string>().empty())
        throw Error(source_name + ": BPE " + key + " is not supported");
    if (bool_field(model, "byte_fallback", false))
      throw Error(source_name + ": BPE byte_fallback is not supported (byte-level BPE only)");
    if (!model.contains("vocab") || !model["vocab"].is_object())
      throw Error(source_name + ": model.vocab must be an object of token -> id");
    for (const auto& [token, id] : model["vocab"].items()) {
      const int32_t value =
          checked_token_id(id, source_name, "model.vocab id of token \"" + token + "\"");
      impl.vocab[token] = value;
      impl.set_token(value, token, false);
    }
    std::vector<std::pair<std::string, std::string>> merges;
    if (!model.contains("merges") || !model["merges"].is_array())
      throw Error(source_name + ": model.merges must be an array");
    merges.reserve(model["merges"].size());
    for (const auto& merge : model["merges"]) {
      if (merge.is_string()) {
        const auto text = merge.get<std::string>();
        const auto space = text.find(' ');
        if (space == std::string::npos || text.find(' ', space + 1) != std::string::npos)
          throw Error(source_name + ": merge \"" + text +
                      "\" is not two tokens separated by a space");
        merges.emplace_back(text.substr(0, space), text.substr(space + 1));
      } else if (merge.is_array() && merge.size() == 2) {
        merges.emplace_back(merge[0].get<std::string>(), merge[1].get<std::string>());
      } else {
        throw Error(source_name + ": merge " + merge.dump() + " is neither \"a b\" nor [a, b]");
      }
    }
    BpeModelOptions options;
    options.ignore_merges = bool_field(model, "ignore_merges", false);
    options.fuse_unk = bool_field(model, "fuse_unk", false);
    if (model.contains("unk_token") && !model["unk_token"].is_null()) {
      const auto unk = model["unk_token"].get<std::string>();
      const auto it = impl.vocab.find(unk);
      if (it == impl.vocab.end())
        throw Error(source_name + ": unk_token \"" + unk + "\" is not in the vocabulary");
      options.unk_id = it->second;
    }
    impl.model = BpeModel(impl.vocab, merges, options, source_name);

    component = "added_tokens";
    for (const auto& token : root.value("added_tokens", json::array())) {
      const auto content = token.at("content").get<std::string>();
      if (bool_field(token, "single_word", false))
        throw Error(source_name + ": added token \"" + content +
                    "\" uses single_word, which is not supported");
      const int32_t id =
          checked_token_id(token.at("id"), source_name, "added_tokens id of token \"" + content + "\"");
      AddedTokenRule rule{id, content, bool_field(token, "lstrip", false),
                          bool_field(token, "rstrip", false)};
      const bool special = bool_field(token, "special", false);
      impl.add_added_token(rule, bool_field(token, "normalized", !special));
    }

    component = "pre_tokenizer";
    bool saw_byte_level = false;
    if (root.contains("pre_tokenizer") && !root["pre_tokenizer"].is_null())
      parse_pre_tokenizer(root["pre_tokenizer"], source_name, impl.stages, saw_byte_level);
    if (!saw_byte_level)
      throw Error(source_name +
                  ": pre_tokenizer has no ByteLevel step (only byte-level BPE is supported)");

    component = "decoder";
    if (root.contains("decoder") && !root["decoder"].is_null())
      check_decoder(root["decoder"], source_name);

    component = "post_processor";
    if (root.contains("post_processor") && !root["post_processor"].is_null()) {
      if (auto bos = parse_post_processor(root["post_processor"], source_name)) {
        const auto id = tokenizer.token_id(*bos);
        if (!id)
          throw Error(source_name + ": post-processor BOS \"" + *bos + "\" is not a known token");
        impl.bos = *id;
        impl.add_bos = true;
      }
    }
  } catch (const json::exception& e) {
    throw Error(source_name + ": malformed " + component + ": " + e.what());
  }
  if (impl.vocab.empty()) throw Error(source_name + ": model.vocab is empty");
  impl.finish();
  return tokenizer;
}

Tokenizer Tokenizer::from_spec(TokenizerSpec spec, const std::string& source_name) {
  Tokenizer tokenizer;
  Impl& impl = *tokenizer.impl_;
  impl.source = source_name;
  if (spec.vocab.empty()) throw Error(source_name + ": tokenizer vocabulary is empty");
  std::vector<uint8_t> is_added(spec.vocab.size(), 0);
  for (const auto& added : spec.added_tokens)
    if (added.id >= 0 && static_cast<size_t>(added.id) < is_added.size()) is_added[added.id] = 1;
  for (size_t id = 0; id < spec.vocab.size(); ++id) {
    // Added tokens live outside the BPE vocabulary so merges can never produce them.
    if (is_added[id]) continue;
    impl.vocab.try_emplace(spec.vocab[id], static_cast<int32_t>(id));
    impl.set_token(static_cast<int32_t>(id), spec.vocab[id], false);
  }
  BpeModelOptions options;
  options.ignore_merges = spec.ignore_merges;
  impl.model = BpeModel(impl.vocab, spec.merges, options, source_name);
  for (const auto& added : spec.added_tokens)
    impl.add_added_token(AddedTokenRule{added.id, added.content, false, false}, !added.special);
  const std::string pattern = spec.split_regex.empty() ? kGpt2SplitPattern : spec.split_regex;
  impl.stages.push_back(
      PreTokenizerStage{false, RegexSplitter(pattern, source_name + " pre-tokenizer")});
  tokenizer.set_special_tokens(spec.bos_id, std::move(spec.eos_ids), spec.add_bos);
  impl.finish();
  return tokenizer;
}

std::vector<int32_t> Tokenizer::encode(std::string_view text) const {
  std::vector<int32_t> ids;
  ids.reserve(text.size() / 3 + 1);
  std::vector<TextSegment> raw_segments;
  impl_->raw_added.split(text, raw_segments);
  std::vector<TextSegment> segments;
  for (const auto& raw : raw_segments) {
    if (raw.token_id >= 0) {
      ids.push_back(raw.token_id);
      continue;
    }
    segments.clear();
    impl_->normalized_added.split(raw.text, segments);
    for (const auto& segment : segments) {
      if (segment.token_id >= 0)
        ids.push_back(segment.token_id);
      else
        impl_->pre_tokenize(segment.text, ids);
    }
  }
  return ids;
}

std::string Tokenizer::decode(std::span<const int32_t> ids) const {
  std::string text;
  for (int32_t id : ids) {
    if (id < 0 || static_cast<size_t>(id) >= impl_->id_to_text.size()) token_text(id);  // throws
    text += impl_->id_to_text[static_cast<size_t>(id)];
  }
  return text;
}

std::string Tokenizer::token_text(int32_t id) const {
  if (id < 0 || static_cast<size_t>(id) >= impl_->id_to_text.size())
    throw Error(impl_->source + ": token id " + std::to_string(id) +
                " is out of range (vocabulary " + std::to_string(vocab_size()) + ")");
  return impl_->id_to_text[static_cast<size_t>(id)];
}

std::optional<int32_t> Tokenizer::token_id(std::string_view token) const {
  const std::string key(token);
  if (const auto it = impl_->added_by_content.find(key); it != impl_->added_by_content.end())
    return it->second;
  if (const auto it = impl_->vocab.find(key); it != impl_->vocab.end()) return it->second;
  return std::nullopt;
}

std::string Tokenizer::token_string(int32_t id) const {
  if (id < 0 || static_cast<size_t>(id) >= impl_->id_to_token.size())
    throw Error(impl_->source + ": token id " + std::to_string(id) + " is out of range");
  return impl_->id_to_token[static_cast<size_t>(id)];
}

int32_t Tokenizer::vocab_size() const { return static_cast<int32_t>(impl_->id_to_token.size()); }
int32_t Tokenizer::bos_id() const { return impl_->bos; }
const std::vector<int32_t>& Tokenizer::eos_ids() const { return impl_->eos; }
bool Tokenizer::add_bos() const { return impl_->add_bos; }

void Tokenizer::set_special_tokens(int32_t bos_id, std::vector<int32_t> eos_ids, bool add_bos) {
  impl_->bos = bos_id;
  impl_->eos = std::move(eos_ids);
  impl_->add_bos = add_bos && bos_id >= 0;
}

}  // namespace lazyscope

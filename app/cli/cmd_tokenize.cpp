// `lazyscope-cli tokenize` and `detokenize`: only the tokenizer of a model is loaded, never
// weights.
#include <cctype>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "app/cli/commands.h"
#include "engine/model/tokenizer_loader.h"
#include "engine/model/model_registry.h"
#include "engine/tokenizer/tokenizer.h"
#include "base/error.h"

namespace lazyscope::cli {
namespace {

namespace fs = std::filesystem;

std::string read_whole_file(const fs::path& path, const char* what) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error(path.string() + ": cannot open " + what);
  std::ostringstream buffer;
  buffer << in.rdbuf();
  return buffer.str();
}

// A path as given, else the name of a model in the model cache.
fs::path resolve_model(const std::string& model) {
  if (fs::exists(model)) return model;
  for (const InstalledModel& installed : installed_models())
    if (installed.name == model) return installed.path;
  throw Error(model + ": no such model directory, .gguf file, or installed model name");
}

Tokenizer load_tokenizer_of(const std::string& model) { return load_tokenizer_only(resolve_model(model)); }

// Ids given as one JSON array, or as integers separated by spaces or commas.
std::vector<int32_t> parse_ids(const std::vector<std::string>& arguments) {
  std::string joined;
  for (const auto& argument : arguments) joined += argument + " ";
  const size_t first = joined.find_first_not_of(" \t\r\n");
  std::vector<int32_t> ids;
  if (first != std::string::npos && joined[first] == '[') {
    try {
      const auto value = nlohmann::json::parse(joined);
      for (const auto& id : value) {
        if (!id.is_number_integer()) throw Error("detokenize: " + id.dump() + " is not a token id");
        ids.push_back(id.get<int32_t>());
      }
    } catch (const nlohmann::json::exception& e) {
      throw Error(std::string("detokenize: the ids are not a JSON array of integers: ") + e.what());
    }
    return ids;
  }
  std::string current;
  const auto flush = [&] {
    if (current.empty()) return;
    size_t used = 0;
    long long value = 0;
    try {
      value = std::stoll(current, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (used != current.size() || value < 0 || value > INT32_MAX)
      throw Error("detokenize: '" + current + "' is not a token id");
    ids.push_back(static_cast<int32_t>(value));
    current.clear();
  };
  for (char c : joined) {
    if (std::isspace(static_cast<unsigned char>(c)) || c == ',')
      flush();
    else
      current += c;
  }
  flush();
  return ids;
}

struct TokenizeOptions {
  std::string model;
  std::string text;
  std::string file;
  bool bos = false;
  bool pieces = false;
};

void run_tokenize(const TokenizeOptions& options) {
  if (!options.text.empty() && !options.file.empty())
    throw Error("tokenize: give TEXT or --file, not both");
  const std::string text =
      options.file.empty() ? options.text : read_whole_file(options.file, "text file");
  const Tokenizer tokenizer = load_tokenizer_of(options.model);
  std::vector<int32_t> ids;
  if (options.bos && tokenizer.add_bos()) ids.push_back(tokenizer.bos_id());
  const auto encoded = tokenizer.encode(text);
  ids.insert(ids.end(), encoded.begin(), encoded.end());
  if (!options.pieces) {
    std::printf("%s\n", nlohmann::json(ids).dump().c_str());
    return;
  }
  nlohmann::json rows = nlohmann::json::array();
  for (int32_t id : ids) {
    // Invalid UTF-8 (a token holding part of a character) is shown with replacement characters.
    rows.push_back({{"id", id}, {"text", tokenizer.token_text(id)}});
  }
  std::printf("%s\n", rows.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace).c_str());
}

void run_detokenize(const std::string& model, const std::vector<std::string>& id_arguments) {
  const auto ids = parse_ids(id_arguments);
  const Tokenizer tokenizer = load_tokenizer_of(model);
  const std::string text = tokenizer.decode(ids);
  std::fwrite(text.data(), 1, text.size(), stdout);
  std::fputc('\n', stdout);
}

}  // namespace

void add_tokenize_commands(CLI::App& app) {
  auto tokenize_options = std::make_shared<TokenizeOptions>();
  CLI::App* tokenize = app.add_subcommand(
      "tokenize", "Print the token ids of TEXT as a JSON array (loads only the model's tokenizer)");
  tokenize
      ->add_option("--model", tokenize_options->model,
                   "HF checkpoint directory (tokenizer.json), .gguf file, or installed model name")
      ->required();
  tokenize->add_option("text", tokenize_options->text, "Text to tokenize");
  tokenize->add_option("--file", tokenize_options->file, "Read the text from this file instead");
  tokenize->add_flag("--bos", tokenize_options->bos,
                     "Prepend the BOS token when the tokenizer adds one to prompts");
  tokenize->add_flag("--pieces", tokenize_options->pieces,
                     "Print [{\"id\", \"text\"}] with each token's decoded text");
  // An empty or absent TEXT is legitimate: it tokenizes to [] (or [BOS]).
  tokenize->callback([tokenize_options] { run_tokenize(*tokenize_options); });

  auto model = std::make_shared<std::string>();
  auto ids = std::make_shared<std::vector<std::string>>();
  CLI::App* detokenize = app.add_subcommand(
      "detokenize", "Print the text of token ids given as a JSON array or as separate integers");
  detokenize
      ->add_option("--model", *model,
                   "HF checkpoint directory (tokenizer.json), .gguf file, or installed model name")
      ->required();
  detokenize->add_option("ids", *ids, "Token ids: [1, 2, 3] or 1 2 3")->required();
  detokenize->callback([model, ids] { run_detokenize(*model, *ids); });
}

}  // namespace lazyscope::cli

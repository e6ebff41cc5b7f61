#include "engine/model/tokenizer_loader.h"

#include <fstream>
#include <sstream>
#include <string>

#include "base/error.h"
#include "engine/model/config.h"
#include "engine/model/gguf_file.h"
#include "engine/model/gguf_tokenizer.h"
#include "engine/model/hf_special_tokens.h"

namespace lazyscope {
namespace {

namespace fs = std::filesystem;

std::string read_whole_file(const fs::path& path, const char* what) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error(path.string() + ": cannot open " + what);
  std::ostringstream buffer;
  buffer << in.rdbuf();
  return buffer.str();
}

}  // namespace

Tokenizer load_tokenizer_only(const fs::path& path) {
  if (!fs::exists(path)) throw Error(path.string() + ": no such model directory or .gguf file");
  if (fs::is_regular_file(path)) return load_gguf_tokenizer(GgufFile::open(path));
  const fs::path tokenizer_path = path / "tokenizer.json";
  const std::string tokenizer_text = read_whole_file(tokenizer_path, "tokenizer");
  Tokenizer tokenizer = Tokenizer::from_json(tokenizer_text, tokenizer_path.string());
  if (!fs::exists(path / "config.json")) return tokenizer;
  const ModelConfig config = load_model_config(path / "config.json");
  HfSpecialTokens special = read_hf_special_tokens(
      path, config, tokenizer_text, [&tokenizer](std::string_view text) { return tokenizer.token_id(text); });
  if (special.bos_id < 0) special.bos_id = tokenizer.bos_id();
  if (special.eos_ids.empty()) special.eos_ids = tokenizer.eos_ids();
  tokenizer.set_special_tokens(special.bos_id, special.eos_ids, special.add_bos);
  return tokenizer;
}

}  // namespace lazyscope

#include "engine/model/presets.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <thread>

#include "engine/model/hf_checkpoint.h"
#include "engine/model/safetensors_writer.h"
#include "engine/tokenizer/bpe_trainer.h"
#include "base/error.h"
#include "kernels/synthetic_shapes.h"

namespace lazyscope {
namespace {

using ordered_json = nlohmann::ordered_json;

// The shortest decimal that reads back as `f`, so config.json says 1e-05 and not 9.99999974e-06.
double shortest_decimal(float f) {
  char buf[32];
  auto result = std::to_chars(buf, buf + sizeof buf, f);
  return std::strtod(std::string(buf, result.ptr).c_str(), nullptr);
}

uint64_t splitmix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

void write_text(const std::filesystem::path& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << text;
  out.flush();
  if (!out) throw Error(path.string() + ": write failed");
}

// Token id of an added token in a tokenizer.json, by its text.
int32_t added_token_id(const ordered_json& tokenizer, const std::string& content) {
  for (const auto& t : tokenizer.at("added_tokens")) {
    if (t.at("content").get<std::string>() == content) return t.at("id").get<int32_t>();
  }
  throw Error("trained tokenizer has no token " + content);
}

ordered_json config_json(const ModelPreset& p, int32_t bos, int32_t eos, TensorDtype dtype) {
  const ModelShape& s = p.shape;
  ordered_json rope = {{"factor", shortest_decimal(s.rope.factor)},
                       {"high_freq_factor", shortest_decimal(s.rope.high_freq_factor)},
                       {"low_freq_factor", shortest_decimal(s.rope.low_freq_factor)},
                       {"original_max_position_embeddings", s.rope.original_max_position},
                       {"rope_type", "llama3"}};
  return ordered_json{{"architectures", {"LlamaForCausalLM"}},
                      {"attention_bias", false},
                      {"attention_dropout", 0.0},
                      {"bos_token_id", bos},
                      {"eos_token_id", eos},
                      {"head_dim", s.head_dim},
                      {"hidden_act", "silu"},
                      {"hidden_size", s.hidden_size},
                      {"initializer_range", 0.02},
                      {"intermediate_size", s.intermediate_size},
                      {"max_position_embeddings", p.max_position_embeddings},
                      {"mlp_bias", false},
                      {"model_type", "llama"},
                      {"num_attention_heads", s.num_heads},
                      {"num_hidden_layers", s.num_layers},
                      {"num_key_value_heads", s.num_kv_heads},
                      {"pretraining_tp", 1},
                      {"rms_norm_eps", shortest_decimal(s.rms_norm_eps)},
                      {"rope_scaling", rope},
                      {"rope_theta", shortest_decimal(s.rope.theta)},
                      {"tie_word_embeddings", s.tie_word_embeddings},
                      {"torch_dtype", dtype == TensorDtype::BF16 ? "bfloat16" : "float32"},
                      {"use_cache", true},
                      {"vocab_size", s.vocab_size}};
}

}  // namespace

const std::vector<ModelPreset>& model_presets() {
  static const std::vector<ModelPreset> presets = [] {
    std::vector<ModelPreset> v;
    // Shapes from the one catalogue (kernels/synthetic_shapes.h).
    v.push_back({"tiny", synthetic_shape("tiny"), 131072, 512, 0});
    v.push_back({"small", synthetic_shape("small"), 131072, 2048, 0});
    // Real Llama-3.1-8B shapes; the tokenizer is the small trained one (see ModelPreset).
    v.push_back({"llama-3.1-8b", synthetic_shape("llama-3.1-8b"), 131072, 2048, 2000ull * 1000 * 1000});
    return v;
  }();
  return presets;
}

const ModelPreset& find_model_preset(std::string_view name) {
  std::string known;
  for (const ModelPreset& p : model_presets()) {
    if (p.name == name) return p;
    known += (known.empty() ? "" : ", ") + p.name;
  }
  throw Error("unknown model preset '" + std::string(name) + "' (known: " + known + ")");
}

std::vector<std::string> read_training_texts(const std::filesystem::path& dir) {
  std::error_code ec;
  if (!std::filesystem::is_directory(dir, ec)) {
    throw Error(dir.string() + ": tokenizer training text directory does not exist");
  }
  std::vector<std::filesystem::path> files;
  for (const auto& e : std::filesystem::directory_iterator(dir)) {
    if (e.is_regular_file() && e.path().extension() == ".txt") files.push_back(e.path());
  }
  std::sort(files.begin(), files.end());
  if (files.empty()) throw Error(dir.string() + ": no *.txt files to train the tokenizer on");
  std::vector<std::string> texts;
  for (const auto& f : files) {
    std::ifstream in(f, std::ios::binary);
    if (!in) throw Error(f.string() + ": cannot read");
    std::ostringstream text;
    text << in.rdbuf();
    texts.push_back(text.str());
  }
  return texts;
}

uint64_t preset_tensor_key(uint64_t seed, std::string_view tensor_name) {
  return splitmix64(splitmix64(seed) ^ fnv1a64(tensor_name.data(), tensor_name.size()));
}

float preset_weight_value(uint64_t tensor_key, uint64_t index, bool is_norm) {
  // Irwin-Hall sum of four 16-bit uniforms: near-normal with exact integer arithmetic, where
  // Box-Muller's log/cos could differ between math libraries in the last bit.
  const uint64_t z = splitmix64(tensor_key + index * 0x9e3779b97f4a7c15ull);
  const uint64_t sum = (z & 0xffff) + ((z >> 16) & 0xffff) + ((z >> 32) & 0xffff) + (z >> 48);
  const double centered = double(sum) - 131070.0;    // exact: mean of the sum is 4 * 65535 / 2
  const double unit = 1.7320508075688772 / 65536.0;  // sqrt(3) / 65536 gives unit variance
  if (is_norm) return float(std::fma(centered, 0.05 * unit, 1.0));
  return float(centered * (0.02 * unit));
}

void write_model_checkpoint(const ModelPreset& preset, uint64_t seed,
                            const std::filesystem::path& out, const CheckpointWriteOptions& options,
                            const ProgressFn& progress) {
  if (options.dtype != TensorDtype::BF16 && options.dtype != TensorDtype::F32) {
    throw Error("make-model: dtype must be BF16 or F32, not " + dtype_name(options.dtype));
  }
  std::error_code ec;
  std::filesystem::create_directories(out, ec);
  if (ec || !std::filesystem::is_directory(out)) {
    throw Error(out.string() + ": cannot create the output directory" +
                (ec ? ": " + ec.message() : std::string()));
  }

  if (progress) progress(0.0, "training tokenizer");
  BpeTrainingOptions bpe;
  bpe.vocab_size = preset.tokenizer_vocab_size;
  const std::string tokenizer_text =
      train_bpe_tokenizer_json(read_training_texts(options.text_dir), bpe);
  const ordered_json tokenizer = ordered_json::parse(tokenizer_text);
  const int32_t bos = added_token_id(tokenizer, "<|begin_of_text|>");
  const int32_t eos = added_token_id(tokenizer, "<|end_of_text|>");
  if (bos >= preset.shape.vocab_size || eos >= preset.shape.vocab_size) {
    throw Error("make-model: the trained tokenizer does not fit the preset's vocabulary");
  }
  write_text(out / "tokenizer.json", tokenizer_text);
  write_text(out / "config.json", config_json(preset, bos, eos, options.dtype).dump(2) + "\n");
  write_text(
      out / "generation_config.json",
      ordered_json{{"bos_token_id", bos}, {"eos_token_id", eos}, {"do_sample", false}}.dump(2) +
          "\n");
  write_text(out / "tokenizer_config.json",
             ordered_json{{"add_bos_token", true},
                          {"add_eos_token", false},
                          {"bos_token", "<|begin_of_text|>"},
                          {"eos_token", "<|end_of_text|>"},
                          {"clean_up_tokenization_spaces", false},
                          {"model_max_length", preset.max_position_embeddings},
                          {"tokenizer_class", "PreTrainedTokenizerFast"}}
                     .dump(2) +
                 "\n");

  const std::vector<HfTensorSpec> specs = llama_tensor_specs(preset.shape);
  std::vector<TensorToWrite> tensors;
  for (const HfTensorSpec& s : specs) tensors.push_back({s.name, options.dtype, s.shape});
  const unsigned threads = std::max(1u, std::min(16u, std::thread::hardware_concurrency()));
  auto produce = [&](std::size_t i, std::vector<float>& values) {
    const uint64_t key = preset_tensor_key(seed, specs[i].name);
    const bool norm = specs[i].is_norm;
    const std::size_t n = values.size();
    auto fill = [&](std::size_t from, std::size_t to) {
      for (std::size_t k = from; k < to; ++k) values[k] = preset_weight_value(key, k, norm);
    };
    // Values depend only on (seed, name, index), so splitting the range keeps them identical.
    if (n < (1u << 20) || threads == 1) {
      fill(0, n);
      return;
    }
    std::vector<std::thread> pool;
    for (unsigned t = 0; t < threads; ++t) {
      pool.emplace_back(fill, n * t / threads, n * (t + 1) / threads);
    }
    for (auto& th : pool) th.join();
  };
  const std::map<std::string, std::string> metadata = {{"format", "pt"},
                                                       {"lazyscope_preset", preset.name},
                                                       {"lazyscope_seed", std::to_string(seed)}};
  ProgressFn weights_progress;
  if (progress) {
    weights_progress = [&](double f, std::string_view what) { progress(0.05 + 0.95 * f, what); };
  }
  write_safetensors_checkpoint(out, tensors, produce,
                               options.max_shard_bytes.value_or(preset.max_shard_bytes), metadata,
                               weights_progress);
  if (progress) progress(1.0, "done");
}

}  // namespace lazyscope

#include "engine/model/gguf_loader.h"

#include <cmath>
#include <cstdio>
#include <set>

#include "engine/model/gguf_tokenizer.h"
#include "base/error.h"

namespace lazyscope {
namespace {

constexpr double kPi = 3.14159265358979323846;

std::string hex64(uint64_t value) {
  char text[17];
  std::snprintf(text, sizeof(text), "%016llx", static_cast<unsigned long long>(value));
  return text;
}

// FNV-1a over header bytes and samples of the data: a cheap, stable file identity.
uint64_t fnv1a(uint64_t hash, const uint8_t* data, std::size_t size) {
  for (std::size_t i = 0; i < size; ++i) {
    hash ^= data[i];
    hash *= 1099511628211ull;
  }
  return hash;
}

std::string file_identity(const GgufFile& file) {
  uint64_t hash = 14695981039346656037ull;
  const uint64_t size = file.file_size();
  hash = fnv1a(hash, reinterpret_cast<const uint8_t*>(&size), sizeof(size));
  hash = fnv1a(hash, file.bytes(), std::size_t(file.header_bytes()));
  constexpr uint64_t kSamples = 256, kSampleBytes = 4096;
  for (uint64_t i = 0; i < kSamples && size > kSampleBytes; ++i) {
    const uint64_t at = (size - kSampleBytes) / (kSamples - 1) * i;
    hash = fnv1a(hash, file.bytes() + at, kSampleBytes);
  }
  return "gguf:" + hex64(hash);
}

// Dimensions without trailing ones, so [576] and [576, 1] compare equal.
std::vector<int64_t> squeezed(std::vector<int64_t> dims) {
  while (dims.size() > 1 && dims.back() == 1) dims.pop_back();
  return dims;
}

std::string dims_string(const std::vector<int64_t>& dims) {
  std::string text = "[";
  for (std::size_t i = 0; i < dims.size(); ++i) text += (i ? ", " : "") + std::to_string(dims[i]);
  return text + "]";
}

int positive_int(const GgufFile& file, const std::string& key, std::optional<int64_t> fallback) {
  std::optional<int64_t> value = file.get_int(key);
  if (!value) value = fallback;
  if (!value) throw Error(file.path().string() + ": metadata key '" + key + "' is missing");
  if (*value <= 0 || *value > (int64_t(1) << 30)) {
    throw Error(file.path().string() + ": metadata key '" + key + "' has an invalid value " +
                std::to_string(*value));
  }
  return int(*value);
}

// Llama 3.1-style GGUFs carry the RoPE frequency scaling as a rope_freqs tensor of per-pair
// divisors. Recover the llama3 parameters that produce it, or refuse.
RopeParams rope_from_freq_factors(const GgufFile& file, const GgufTensorInfo& tensor,
                                  RopeParams rope, int head_dim, const std::string& arch) {
  const std::string name = file.path().string();
  if (tensor.elements != head_dim / 2) {
    throw Error(name + ": tensor 'rope_freqs.weight' has " + std::to_string(tensor.elements) +
                " factors, expected head_dim / 2 = " + std::to_string(head_dim / 2));
  }
  const std::vector<float> factors = file.dequantize(tensor);
  float largest = 1.0f;
  for (float f : factors) largest = std::max(largest, f);
  if (largest == 1.0f) return rope;  // no scaling at all
  rope.llama3 = true;
  rope.factor = largest;
  rope.low_freq_factor =
      float(file.get_float(arch + ".rope.scaling.low_freq_factor").value_or(1.0));
  rope.high_freq_factor =
      float(file.get_float(arch + ".rope.scaling.high_freq_factor").value_or(4.0));
  rope.original_max_position =
      int(file.get_int(arch + ".rope.scaling.original_context_length").value_or(8192));
  const double low_wavelen = rope.original_max_position / rope.low_freq_factor;
  const double high_wavelen = rope.original_max_position / rope.high_freq_factor;
  for (int i = 0; i < head_dim / 2; ++i) {
    const double inv_freq = std::pow(double(rope.theta), -2.0 * i / head_dim);
    const double wavelen = 2 * kPi / inv_freq;
    double expected = 1.0;
    if (wavelen > low_wavelen) {
      expected = rope.factor;
    } else if (wavelen >= high_wavelen) {
      const double smooth = (rope.original_max_position / wavelen - rope.low_freq_factor) /
                            (rope.high_freq_factor - rope.low_freq_factor);
      expected = 1.0 / ((1 - smooth) / rope.factor + smooth);
    }
    if (std::abs(expected - factors[i]) > 1e-3 * expected) {
      throw Error(name +
                  ": tensor 'rope_freqs.weight' is not a Llama 3 RoPE scaling this engine "
                  "can reproduce (factor " +
                  std::to_string(i) + " is " + std::to_string(factors[i]) + ", expected " +
                  std::to_string(expected) + ")");
    }
  }
  return rope;
}

}  // namespace

void gguf_permute_qk_rows(std::vector<float>& weight, int heads, int head_dim, int cols) {
  const std::vector<float> source = weight;
  const int half = head_dim / 2;
  for (int h = 0; h < heads; ++h) {
    for (int s = 0; s < 2; ++s) {
      for (int i = 0; i < half; ++i) {
        const std::size_t hf_row = std::size_t(h) * head_dim + s * half + i;
        const std::size_t gguf_row = std::size_t(h) * head_dim + 2 * i + s;
        std::copy_n(source.begin() + hf_row * cols, cols, weight.begin() + gguf_row * cols);
      }
    }
  }
}

void gguf_unpermute_qk_rows(std::vector<float>& weight, int heads, int head_dim, int cols) {
  const std::vector<float> source = weight;
  const int half = head_dim / 2;
  for (int h = 0; h < heads; ++h) {
    for (int s = 0; s < 2; ++s) {
      for (int i = 0; i < half; ++i) {
        const std::size_t hf_row = std::size_t(h) * head_dim + s * half + i;
        const std::size_t gguf_row = std::size_t(h) * head_dim + 2 * i + s;
        std::copy_n(source.begin() + gguf_row * cols, cols, weight.begin() + hf_row * cols);
      }
    }
  }
}

ModelConfig gguf_model_config(const GgufFile& file) {
  const std::string name = file.path().string();
  const auto arch = file.get_string("general.architecture");
  if (!arch) throw Error(name + ": metadata key 'general.architecture' is missing");
  if (*arch != "llama") {
    throw Error(name + ": architecture '" + *arch +
                "' is not supported (only Llama-architecture GGUF files are)");
  }
  const std::string p = *arch + ".";
  ModelConfig config;
  config.name = file.path().stem().string();
  config.architecture = "LlamaForCausalLM";
  ModelShape& shape = config.shape;
  shape.hidden_size = positive_int(file, p + "embedding_length", std::nullopt);
  shape.num_layers = positive_int(file, p + "block_count", std::nullopt);
  shape.intermediate_size = positive_int(file, p + "feed_forward_length", std::nullopt);
  shape.num_heads = positive_int(file, p + "attention.head_count", std::nullopt);
  shape.num_kv_heads = positive_int(file, p + "attention.head_count_kv", shape.num_heads);
  if (shape.num_heads % shape.num_kv_heads != 0) {
    throw Error(name + ": attention.head_count " + std::to_string(shape.num_heads) +
                " is not a multiple of head_count_kv " + std::to_string(shape.num_kv_heads));
  }
  shape.head_dim = positive_int(file, p + "attention.key_length",
                                shape.hidden_size % shape.num_heads == 0
                                    ? std::optional<int64_t>(shape.hidden_size / shape.num_heads)
                                    : std::nullopt);
  const int value_length = positive_int(file, p + "attention.value_length", shape.head_dim);
  const int rope_dims = positive_int(file, p + "rope.dimension_count", shape.head_dim);
  if (value_length != shape.head_dim || rope_dims != shape.head_dim || shape.head_dim % 2 != 0) {
    throw Error(name + ": head dimension " + std::to_string(shape.head_dim) + ", value length " +
                std::to_string(value_length) + " and rope.dimension_count " +
                std::to_string(rope_dims) +
                " must be equal and even (partial RoPE is not supported)");
  }
  config.max_position_embeddings = positive_int(file, p + "context_length", 8192);
  shape.rms_norm_eps = float(file.get_float(p + "attention.layer_norm_rms_epsilon").value_or(1e-5));
  shape.rope.theta = float(file.get_float(p + "rope.freq_base").value_or(10000.0));
  if (!(shape.rms_norm_eps > 0) || !(shape.rope.theta > 1)) {
    throw Error(name + ": invalid rms epsilon or rope.freq_base");
  }
  const std::string scaling = file.get_string(p + "rope.scaling.type").value_or("none");
  const double scaling_factor = file.get_float(p + "rope.scaling.factor").value_or(1.0);
  if (scaling != "none" && !(scaling == "linear" && scaling_factor == 1.0)) {
    throw Error(name + ": RoPE scaling '" + scaling + "' (factor " +
                std::to_string(scaling_factor) + ") is not supported (only Llama 3's is)");
  }
  if (const GgufTensorInfo* freqs = file.find_tensor("rope_freqs.weight")) {
    shape.rope = rope_from_freq_factors(file, *freqs, shape.rope, shape.head_dim, *arch);
  }

  const GgufTensorInfo* embed = file.find_tensor("token_embd.weight");
  if (!embed) throw Error(name + ": tensor 'token_embd.weight' is missing");
  const std::vector<int64_t> embed_dims = squeezed(embed->dims);
  if (embed_dims.size() != 2 || embed_dims[0] != shape.hidden_size) {
    throw Error(name + ": tensor 'token_embd.weight' has shape " + dims_string(embed->dims) +
                ", expected [" + std::to_string(shape.hidden_size) + ", vocab]");
  }
  shape.vocab_size = int(embed_dims[1]);
  if (const auto vocab = file.get_int(p + "vocab_size"); vocab && *vocab != shape.vocab_size) {
    throw Error(name + ": " + p + "vocab_size is " + std::to_string(*vocab) +
                " but tensor 'token_embd.weight' has " + std::to_string(shape.vocab_size) +
                " rows");
  }
  shape.tie_word_embeddings = file.find_tensor("output.weight") == nullptr;
  return config;
}

LoadedModel load_gguf_model(const std::filesystem::path& gguf_path, const ProgressFn& progress,
                            bool fp32_matrices) {
  if (progress) progress(0.0, "reading " + gguf_path.filename().string());
  const GgufFile file = GgufFile::open(gguf_path);
  const std::string name = gguf_path.string();

  LoadedModel model;
  model.source = gguf_path;
  model.config = gguf_model_config(file);
  const ModelShape& shape = model.config.shape;

  model.tokenizer = load_gguf_tokenizer(file);
  if (model.tokenizer.vocab_size() > shape.vocab_size) {
    throw Error(name + ": the tokenizer has " + std::to_string(model.tokenizer.vocab_size()) +
                " tokens but tensor 'token_embd.weight' only " + std::to_string(shape.vocab_size) +
                " rows");
  }
  model.config.bos_token_id = model.tokenizer.bos_id();
  model.config.eos_token_ids = model.tokenizer.eos_ids();
  model.chat_template = file.get_string("tokenizer.chat_template").value_or("");

  const int64_t hidden = shape.hidden_size, inter = shape.intermediate_size;
  const int64_t q_dim = shape.q_dim(), kv_dim = shape.kv_dim(), vocab = shape.vocab_size;
  std::set<std::string> used;
  const std::size_t total_tensors = file.tensors().size();

  // Reads one tensor, checking it exists and has the shape the config implies.
  // Keeps a matrix's blocks as stored (rows permuted like the fp32 copy for q/k).
  auto keep = [&](const std::string& tensor_name, StoredMatrix& out, int permute_heads) {
    const GgufTensorInfo* tensor = file.find_tensor(tensor_name);
    const WeightFormat format = WeightFormat(tensor->type);
    if (!weight_format_info(format) || tensor->dims.size() < 2) return;
    out.format = format;
    out.cols = int(tensor->dims[0]);
    out.rows = int(tensor->elements / tensor->dims[0]);
    out.row_bytes = ggml_row_bytes(GgmlType(tensor->type), out.cols);
    const uint8_t* data = file.tensor_data(*tensor);
    out.bytes.assign(data, data + out.row_bytes * std::size_t(out.rows));
    if (permute_heads > 0) {
      const int head_dim = shape.head_dim, half = head_dim / 2;
      for (int h = 0; h < permute_heads; ++h) {
        for (int s = 0; s < 2; ++s) {
          for (int i = 0; i < half; ++i) {
            const std::size_t hf_row = std::size_t(h) * head_dim + s * half + i;
            const std::size_t gguf_row = std::size_t(h) * head_dim + 2 * i + s;
            std::copy_n(data + gguf_row * out.row_bytes, out.row_bytes, out.bytes.begin() + hf_row * out.row_bytes);
          }
        }
      }
    }
  };

  auto load = [&](const std::string& tensor_name, std::vector<int64_t> expected, bool matrix = false) {
    const GgufTensorInfo* tensor = file.find_tensor(tensor_name);
    if (!tensor) throw Error(name + ": tensor '" + tensor_name + "' is missing");
    if (squeezed(tensor->dims) != expected) {
      throw Error(name + ": tensor '" + tensor_name + "' has shape " + dims_string(tensor->dims) +
                  ", but the metadata implies " + dims_string(expected));
    }
    used.insert(tensor_name);
    if (matrix && !fp32_matrices && weight_format_info(WeightFormat(tensor->type))) return std::vector<float>{};
    std::vector<float> values = file.dequantize(*tensor);
    if (progress) {
      progress(double(used.size()) / double(total_tensors), "dequantizing " + tensor_name);
    }
    return values;
  };

  model.weights.embed = load("token_embd.weight", {hidden, vocab}, true);
  model.weights.final_norm = load("output_norm.weight", {hidden});
  if (!shape.tie_word_embeddings) model.weights.lm_head = load("output.weight", {hidden, vocab}, true);
  model.weights.layers.resize(std::size_t(shape.num_layers));
  keep("token_embd.weight", model.weights.embed_stored, 0);
  if (!shape.tie_word_embeddings) keep("output.weight", model.weights.lm_head_stored, 0);
  model.weights.stored_layers.resize(std::size_t(shape.num_layers));
  for (int l = 0; l < shape.num_layers; ++l) {
    const std::string b = "blk." + std::to_string(l) + ".";
    LayerWeights& layer = model.weights.layers[std::size_t(l)];
    layer.attn_norm = load(b + "attn_norm.weight", {hidden});
    layer.wq = load(b + "attn_q.weight", {hidden, q_dim}, true);
    layer.wk = load(b + "attn_k.weight", {hidden, kv_dim}, true);
    layer.wv = load(b + "attn_v.weight", {hidden, kv_dim}, true);
    layer.wo = load(b + "attn_output.weight", {q_dim, hidden}, true);
    layer.mlp_norm = load(b + "ffn_norm.weight", {hidden});
    layer.w_gate = load(b + "ffn_gate.weight", {hidden, inter}, true);
    layer.w_up = load(b + "ffn_up.weight", {hidden, inter}, true);
    layer.w_down = load(b + "ffn_down.weight", {inter, hidden}, true);
    if (!layer.wq.empty()) gguf_unpermute_qk_rows(layer.wq, shape.num_heads, shape.head_dim, int(hidden));
    if (!layer.wk.empty()) gguf_unpermute_qk_rows(layer.wk, shape.num_kv_heads, shape.head_dim, int(hidden));
    StoredLayer& stored = model.weights.stored_layers[std::size_t(l)];
    keep(b + "attn_q.weight", stored.wq, shape.num_heads);
    keep(b + "attn_k.weight", stored.wk, shape.num_kv_heads);
    keep(b + "attn_v.weight", stored.wv, 0);
    keep(b + "attn_output.weight", stored.wo, 0);
    keep(b + "ffn_gate.weight", stored.w_gate, 0);
    keep(b + "ffn_up.weight", stored.w_up, 0);
    keep(b + "ffn_down.weight", stored.w_down, 0);
  }
  if (file.find_tensor("rope_freqs.weight")) used.insert("rope_freqs.weight");
  for (const GgufTensorInfo& tensor : file.tensors()) {
    if (!used.count(tensor.name)) {
      throw Error(name + ": unexpected tensor '" + tensor.name + "' (" +
                  ggml_type_name(tensor.type) + " " + tensor.shape_string() +
                  "); this Llama loader does not know what to do with it");
    }
  }
  model.identity = file_identity(file);
  if (progress) progress(1.0, "loaded " + gguf_path.filename().string());
  return model;
}

}  // namespace lazyscope

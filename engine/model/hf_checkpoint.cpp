#include "engine/model/hf_checkpoint.h"

#include <algorithm>
#include <cstdio>
#include <sstream>

#include "base/error.h"

namespace lazyscope {
namespace {

std::string shape_text(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (std::size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

}  // namespace

std::vector<HfTensorSpec> llama_tensor_specs(const ModelShape& s) {
  const int64_t hidden = s.hidden_size, inter = s.intermediate_size;
  const int64_t q = s.q_dim(), kv = s.kv_dim();
  std::vector<HfTensorSpec> specs;
  specs.push_back({"model.embed_tokens.weight", {s.vocab_size, hidden}, -1, false});
  for (int l = 0; l < s.num_layers; ++l) {
    const std::string p = "model.layers." + std::to_string(l) + ".";
    specs.push_back({p + "input_layernorm.weight", {hidden}, l, true});
    specs.push_back({p + "self_attn.q_proj.weight", {q, hidden}, l, false});
    specs.push_back({p + "self_attn.k_proj.weight", {kv, hidden}, l, false});
    specs.push_back({p + "self_attn.v_proj.weight", {kv, hidden}, l, false});
    specs.push_back({p + "self_attn.o_proj.weight", {hidden, q}, l, false});
    specs.push_back({p + "post_attention_layernorm.weight", {hidden}, l, true});
    specs.push_back({p + "mlp.gate_proj.weight", {inter, hidden}, l, false});
    specs.push_back({p + "mlp.up_proj.weight", {inter, hidden}, l, false});
    specs.push_back({p + "mlp.down_proj.weight", {hidden, inter}, l, false});
  }
  specs.push_back({"model.norm.weight", {hidden}, -1, true});
  if (!s.tie_word_embeddings)
    specs.push_back({"lm_head.weight", {s.vocab_size, hidden}, -1, false});
  return specs;
}

std::vector<float>& weight_slot(ModelWeights& w, const HfTensorSpec& spec) {
  const std::string& n = spec.name;
  if (spec.layer < 0) {
    if (n == "model.embed_tokens.weight") return w.embed;
    if (n == "model.norm.weight") return w.final_norm;
    if (n == "lm_head.weight") return w.lm_head;
  } else {
    if (std::size_t(spec.layer) >= w.layers.size()) w.layers.resize(spec.layer + 1);
    LayerWeights& l = w.layers[spec.layer];
    const std::string suffix = n.substr(n.find('.', std::string("model.layers.").size()) + 1);
    if (suffix == "input_layernorm.weight") return l.attn_norm;
    if (suffix == "self_attn.q_proj.weight") return l.wq;
    if (suffix == "self_attn.k_proj.weight") return l.wk;
    if (suffix == "self_attn.v_proj.weight") return l.wv;
    if (suffix == "self_attn.o_proj.weight") return l.wo;
    if (suffix == "post_attention_layernorm.weight") return l.mlp_norm;
    if (suffix == "mlp.gate_proj.weight") return l.w_gate;
    if (suffix == "mlp.up_proj.weight") return l.w_up;
    if (suffix == "mlp.down_proj.weight") return l.w_down;
  }
  throw Error("internal: no weight slot for tensor '" + n + "'");
}

ModelWeights load_hf_weights(const SafetensorsCheckpoint& checkpoint, const ModelConfig& config,
                             const ProgressFn& progress) {
  const std::vector<HfTensorSpec> specs = llama_tensor_specs(config.shape);

  // Check everything before converting anything: a broken checkpoint fails fast.
  std::vector<std::string> missing;
  uint64_t total_bytes = 0;
  for (const HfTensorSpec& spec : specs) {
    const SafetensorsCheckpoint::Entry* e = checkpoint.find(spec.name);
    if (!e) {
      missing.push_back(spec.name);
      continue;
    }
    const std::string ctx = e->file->path().string() + ": tensor '" + spec.name + "'";
    if (!dtype_is_loadable(e->tensor->dtype)) {
      throw Error(ctx + ": dtype " + dtype_name(e->tensor->dtype) +
                  " cannot be loaded (supported: BF16, F16, F32)");
    }
    if (e->tensor->shape != spec.shape) {
      throw Error(ctx + ": shape " + shape_text(e->tensor->shape) + " does not match " +
                  shape_text(spec.shape) + " implied by the config (" + config.name + ")");
    }
    total_bytes += e->tensor->byte_size();
  }
  if (!missing.empty()) {
    std::string list;
    const std::size_t shown = std::min<std::size_t>(missing.size(), 8);
    for (std::size_t i = 0; i < shown; ++i) list += (i ? ", " : "") + missing[i];
    if (missing.size() > shown) list += ", ... (" + std::to_string(missing.size()) + " in all)";
    const std::string where = checkpoint.files().empty()
                                  ? std::string("checkpoint")
                                  : checkpoint.files().front()->path().parent_path().string();
    throw Error(where + ": missing tensor" + (missing.size() > 1 ? "s: " : ": ") + list);
  }

  ModelWeights weights;
  weights.layers.resize(config.shape.num_layers);
  uint64_t done = 0;
  for (const HfTensorSpec& spec : specs) {
    const SafetensorsCheckpoint::Entry* e = checkpoint.find(spec.name);
    if (progress) {
      progress(total_bytes ? double(done) / double(total_bytes) : 0.0,
               "loading " + e->file->path().filename().string());
    }
    e->file->read_f32(*e->tensor, weight_slot(weights, spec));
    done += e->tensor->byte_size();
  }
  if (progress) progress(1.0, "weights loaded");
  return weights;
}

ModelWeights load_hf_weights(const std::filesystem::path& dir, const ModelConfig& config,
                             const ProgressFn& progress) {
  return load_hf_weights(SafetensorsCheckpoint::open_directory(dir), config, progress);
}

uint64_t fnv1a64(const void* data, std::size_t size, uint64_t hash) {
  const auto* p = static_cast<const uint8_t*>(data);
  for (std::size_t i = 0; i < size; ++i) {
    hash ^= p[i];
    hash *= 0x100000001b3ull;
  }
  return hash;
}

std::string checkpoint_identity(const std::string& config_json_text,
                                const SafetensorsCheckpoint& checkpoint) {
  uint64_t h = fnv1a64(config_json_text.data(), config_json_text.size());
  // Files sorted by name so the order they were opened in does not matter.
  std::vector<const SafetensorsFile*> files;
  for (const auto& f : checkpoint.files()) files.push_back(f.get());
  std::sort(files.begin(), files.end(), [](const SafetensorsFile* a, const SafetensorsFile* b) {
    return a->path().filename() < b->path().filename();
  });
  for (const SafetensorsFile* f : files) {
    const std::string name = f->path().filename().string();
    const uint64_t size = f->file_size();
    h = fnv1a64(name.data(), name.size(), h);
    h = fnv1a64(&size, sizeof size, h);
    std::span<const uint8_t> header = f->header_bytes();
    h = fnv1a64(header.data(), header.size(), h);
    // Headers alone cannot tell two seeds of the same shapes apart; a few data bytes can.
    for (const TensorInfo& t : f->tensors()) {
      std::span<const uint8_t> bytes = f->tensor_bytes(t);
      const std::size_t sample = std::min<std::size_t>(bytes.size(), 256);
      h = fnv1a64(bytes.data(), sample, h);
      h = fnv1a64(bytes.data() + bytes.size() - sample, sample, h);
    }
  }
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(h));
  return hex;
}

}  // namespace lazyscope

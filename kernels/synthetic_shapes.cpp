#include "kernels/synthetic_shapes.h"

#include "base/error.h"

namespace lazyscope {
namespace {

ModelShape llama_shape(int vocab, int hidden, int inter, int layers, int heads, int kv_heads, int head_dim, bool tied) {
  ModelShape s;
  s.vocab_size = vocab;
  s.hidden_size = hidden;
  s.intermediate_size = inter;
  s.num_layers = layers;
  s.num_heads = heads;
  s.num_kv_heads = kv_heads;
  s.head_dim = head_dim;
  s.rms_norm_eps = 1e-5f;
  s.rope.theta = 500000.0f;
  s.rope.llama3 = true;
  s.rope.factor = 8.0f;
  s.tie_word_embeddings = tied;
  return s;
}

}  // namespace

ModelShape synthetic_shape(const std::string& name) {
  if (name == "tiny") return llama_shape(512, 64, 192, 2, 4, 2, 16, false);
  if (name == "small") return llama_shape(2048, 256, 768, 4, 8, 2, 32, false);
  if (name == "smollm2-135m") {
    // The product's default model: GQA 3 (9 query / 3 KV heads), plain RoPE, tied embeddings.
    ModelShape s = llama_shape(49152, 576, 1536, 30, 9, 3, 64, true);
    s.rope.theta = 100000.0f;
    s.rope.llama3 = false;
    return s;
  }
  if (name == "llama-3.2-1b") {
    ModelShape s = llama_shape(128256, 2048, 8192, 16, 32, 8, 64, true);
    s.rope.factor = 32.0f;
    return s;
  }
  if (name == "llama-3.1-8b") return llama_shape(128256, 4096, 14336, 32, 32, 8, 128, false);
  if (name == "llama-3.1-70b") return llama_shape(128256, 8192, 28672, 80, 64, 8, 128, false);
  std::string known;
  for (const std::string& n : synthetic_shape_names()) known += (known.empty() ? "" : ", ") + n;
  throw Error("unknown model shape '" + name + "' (expected one of " + known + ")");
}

std::vector<std::string> synthetic_shape_names() {
  return {"tiny", "small", "smollm2-135m", "llama-3.2-1b", "llama-3.1-8b", "llama-3.1-70b"};
}

}  // namespace lazyscope

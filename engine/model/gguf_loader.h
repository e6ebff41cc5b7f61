#pragma once
// Single-file GGUF (llama.cpp's format): metadata, tokenizer, tensors dequantized to fp32.
#include <filesystem>
#include <vector>

#include "base/progress.h"
#include "engine/model/gguf_file.h"
#include "engine/model/model_loader.h"

namespace lazyscope {

// fp32_matrices false: the Linear matrices and embeddings stay in their stored format only
// (ModelWeights' fp32 vectors for them are left empty).
LoadedModel load_gguf_model(const std::filesystem::path& gguf_file,
                            const ProgressFn& progress = {}, bool fp32_matrices = true);

// ModelConfig from the llama.* metadata and the tensor shapes (no weights are read).
ModelConfig gguf_model_config(const GgufFile& file);

// llama.cpp's converter reorders each head's q/k rows from HF's half-split RoPE pairing
// (i, i + D/2) to interleaved pairs (2i, 2i + 1). These convert a [heads * head_dim, cols]
// row-major matrix between the two; unpermute recovers the HF layout our kernels use.
void gguf_permute_qk_rows(std::vector<float>& weight, int heads, int head_dim, int cols);
void gguf_unpermute_qk_rows(std::vector<float>& weight, int heads, int head_dim, int cols);

}  // namespace lazyscope

#pragma once
// Batch-1 decode: everything of a layer after its attention (wo + residual, RMSNorm, gate_up,
// SwiGLU, down + residual) and the next layer's RMSNorm + wqkv + RoPE + KV store, in one
// persistent kernel of one CTA an SM (Hopper and newer). C++17-clean for nvcc.
#include <cuda_runtime_api.h>

#include <string>

#include "kernels/cuda/bf16_host.h"
#include "kernels/cuda/gemv.h"

namespace lazyscope::cuda {

struct DecodeLayerParams {
  const bf16_bits* attn = nullptr;       // [q_dim]: this layer's attention output (wo's input)
  float* x = nullptr;                    // [hidden] fp32 residual: x += attn @ wo^T, then x += mlp
  const bf16_bits* wo = nullptr;         // [hidden, q_dim]
  const float* mlp_norm = nullptr;       // [hidden]
  const bf16_bits* w_gate_up = nullptr;  // [2 * inter, hidden]: gate rows, then up rows
  const bf16_bits* w_down = nullptr;     // [hidden, inter]
  bf16_bits* act = nullptr;              // [inter] scratch: silu(gate) * up, rounded as swiglu rounds it
  // The next layer's wqkv, its input rmsnorm(x) * next_attn_norm (null wqkv: the model's last layer).
  const float* next_attn_norm = nullptr;
  const bf16_bits* next_wqkv = nullptr;
  QkvRopeOutput next_qkv;  // as gemv_rmsnorm_qkv_rope takes it
  // The next layer's wo and w_gate_up (null: none). Once its last copy is issued, a CTA's producer
  // prefetches into L2 up to l2_prefetch_bytes of what the next launch will read first: its share
  // of wo, then gate_up rows. The attention kernel between the launches leaves DRAM mostly idle.
  const bf16_bits* next_wo = nullptr;
  const bf16_bits* next_gate_up = nullptr;
  int l2_prefetch_bytes = 0;
  // gate_up rows handed out at run time: each CTA's producer claims the next few (gate, up) row
  // pairs from this counter whenever it has a free stage, so a CTA that streams faster takes more.
  // Zeroed once; every launch leaves it zero. Null: each CTA takes a fixed share, as in the other
  // phases.
  unsigned* gate_up_claims = nullptr;
  int hidden = 0, inter = 0, q_dim = 0;
  float eps = 0.0f;
  // The grid barrier's arrival counter, zeroed once at allocation. Each launch adds the grid size
  // (the SM count) at each of its barriers, so it stays a multiple of it between launches and one
  // counter serves a stream and its graph replays.
  unsigned long long* grid_sync = nullptr;
};

struct DecodeLayerLaunch {
  // Weight stages of 32 KB a CTA (2..8): how far the weight stream runs ahead of the arithmetic.
  int stages = 4;
  // Also ask for programmatic dependent launch. (Measured on the H100: beside the cooperative
  // attribute it gains nothing; the launch still waits for the kernel before it to end.)
  bool programmatic = true;
};

// Why this model shape cannot take the layer kernel on the current device ("" when it can): the
// device (compute capability 9.0+ and its code), the widths (multiples of 8; rows of more than
// 2,048 columns split into equal pieces of a multiple of 8), the head layout the wqkv epilogue
// needs, and shared memory for `stages` stages.
std::string decode_layer_unsupported(int hidden, int inter, int q_dim, int kv_dim, int head_dim, int stages);
// Launches it (cooperatively: every CTA resident at once, as its grid barriers need). The caller has
// checked the shape with decode_layer_unsupported; a stage count outside 2..8 throws.
void decode_layer(const DecodeLayerParams& p, const DecodeLayerLaunch& launch, cudaStream_t stream);

}  // namespace lazyscope::cuda

#pragma once
// The CUDA backend: the Llama forward in bf16 (fp32 residual stream) with cuBLAS GEMMs (GEMVs at
// one token), the lazy/plain paged attention kernels and a bf16 KV pool. One stream; a step
// synchronises only to read logits or the greedy tokens back. A one-token step is replayed from a
// CUDA graph captured once per launch signature (batch size, splits, lazy, output): every per-step
// value (tokens, positions, slots, block tables) is read by the kernels from one device metadata
// buffer in a layout fixed by the batch size. A batched decode step runs N sequences' tokens
// through the same GEMMs (N rows, cuBLAS) and one paged decode-attention launch, each sequence
// with its own block table and shifts.
//
// The code is split by concern: cuda_backend.cpp (construction, weights, pool, block copies),
// cuda_step.cpp (entry points, step workspace and metadata, GEMM, LM head), cuda_decode_step.cpp
// (one-token steps, single and batched, and their graphs), cuda_prefill_step.cpp (prompt steps).
#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include <map>
#include <tuple>
#include <vector>

#include "kernels/backend.h"
#include "kernels/cuda/attention.h"
#include "kernels/cuda/bf16_host.h"
#include "kernels/cuda/device_buffer.h"
#include "kernels/cuda/gemv.h"
#include "kernels/cuda/tuning.h"
#include "kernels/step_validation.h"
#include "kernels/tensor_shard.h"

struct ncclComm;  // NCCL's communicator (nccl.h), seen only by kernels/cuda/collectives.cpp

namespace lazyscope::cuda {

class CudaBackend final : public Backend {
 public:
  explicit CudaBackend(const CudaTuning& tuning = CudaTuning{});
  ~CudaBackend() override;
  std::string name() const override { return "cuda"; }
  std::string device() const override;
  std::size_t kv_element_bytes() const override { return 2; }
  std::string unsupported_reason(const ModelShape& shape) const override;
  void load(const ModelShape& shape, const WeightsView& weights) override;
  void load_synthetic(const ModelShape& shape, uint64_t seed) override;
  void allocate_pool(int num_blocks, int block_size) override;
  void forward(const ForwardStep& step, std::vector<float>* logits) override;
  // Argmax on the device; only the 4-byte token crosses to the host.
  int32_t forward_greedy(const ForwardStep& step) override;
  // One batched decode step for all the steps (one token each); a single step takes the
  // graph-replayed one-token path.
  void forward_batch(std::span<const ForwardStep> steps, std::vector<float>* logits) override;
  void forward_batch_greedy(std::span<const ForwardStep> steps, std::span<int32_t> tokens) override;
  void copy_blocks(std::span<const BlockCopy> copies) override;
  void synchronize() override;
  void next_decode_without_graph() override { eager_next_decode_ = true; }
  void drop_graphs() override;

  // The launch choices (benchmarks and tests change them; the product keeps the defaults).
  // Changing them waits for the stream and drops the captured graphs.
  const CudaTuning& tuning() const { return tuning_; }
  void set_tuning(const CudaTuning& tuning);
  int graph_captures() const { return graph_captures_; }  // graphs instantiated so far
  // Whether batch-1 decode steps take the persistent layer kernel (tuning, shape and device allow it).
  bool decode_layer_active() const { return decode_layer_ok_; }
  int graph_replays() const { return graph_replays_; }    // steps run from a graph

  // Tensor parallelism (tensor_parallel_backend.h runs one such rank per GPU), before load: this
  // backend then computes `shard`'s heads, MLP columns and vocabulary rows of the model it is
  // given, sums the o_proj and down partials and the embedding rows over `comm` (all-reduce) and
  // gathers the logits shards (all-gather). Only rank 0 copies logits to the host.
  void set_tensor_shard(const TensorShard& shard, ncclComm* comm);
  // Wall seconds the all-reduces of the steps so far took on the host clock, when
  // time_collectives is set (the benchmark's share of a step). It synchronises around each one,
  // so it needs CudaTuning::graphs off (a graph capture cannot synchronise).
  bool time_collectives = false;
  double collective_seconds = 0;

  // Test and benchmark access.
  cudaStream_t stream() const { return stream_; }
  const bf16_bits* k_pool(int layer) const { return k_pool_.as<bf16_bits>() + layer * layer_pool_elements(); }
  const bf16_bits* v_pool(int layer) const { return v_pool_.as<bf16_bits>() + layer * layer_pool_elements(); }
  int64_t layer_pool_elements() const {
    return int64_t(num_blocks_) * block_size_ * shape_.kv_dim();
  }

 private:
  struct LayerWeights {
    DeviceBuffer attn_norm, wqkv, wo, mlp_norm, w_gate_up, w_down;
  };
  enum class StepOutput { None, Logits, Greedy };
  // Where a one-token step's kernels find their per-sequence values (device addresses).
  struct DecodeMeta {
    const int32_t* tokens = nullptr;     // [batch]
    const int32_t* positions = nullptr;  // [batch]
    const int32_t* slots = nullptr;      // [batch]
    const int32_t* offsets = nullptr;    // [batch + 1] into entries
    const KvEntry* entries = nullptr;
    // Lazy steps with query copies (CudaTuning::decode_query_copies): each sequence's distinct
    // shifts, shifts[shift_offsets[s] .. shift_offsets[s + 1]), in a region of shift_capacity
    // values; copies_per_seq (>= any sequence's count) query copies a sequence. 0: the attention
    // kernel rotates the query itself.
    const int32_t* shift_offsets = nullptr;  // [batch + 1]
    const int32_t* shifts = nullptr;
    int shift_capacity = 0;
    int copies_per_seq = 0;
  };

  // cuda_backend.cpp
  void allocate_weights(const ModelShape& shape);
  // cuda_shard_weights.cpp: a tensor-parallel rank's slices of the weights.
  void load_shard(const ModelShape& shape, const WeightsView& weights);
  void load_synthetic_shard(const ModelShape& shape, uint64_t seed);
  // cuda_shard_step.cpp: the tensor-parallel parts of a step (plain backend: the local op only).
  bool sharded() const { return comm_ != nullptr; }
  bool owns_residual() const { return shard_.rank == 0; }  // adds the residual to its partial
  int output_vocab() const { return vocab_total_; }
  void embed_tokens(const int32_t* ids, int n, float* x);
  void reduce_residual(float* x, int rows);  // all-reduce of the partial sums (no-op unsharded)
  void gather_logits(int rows);              // logits_shard_ of every rank -> logits_
  StepLimits step_limits() const;
  void invalidate_graphs();
  // cuda_step.cpp
  void ensure_workspace(int n, int splits_rows, int output_rows);
  void gemm(const bf16_bits* x, const bf16_bits* w, int m, int n, int k, void* out, bool out_fp32, bool accumulate);
  // Runs the step; returns the greedy token for StepOutput::Greedy, else -1.
  int32_t run_step(const ForwardStep& step, StepOutput output, std::vector<float>* logits);
  // Final norm, LM head and (Greedy) argmax of `rows` residual rows from `x`, plus the copy of
  // the logits or tokens to pinned memory.
  void enqueue_head(const float* x, int rows, StepOutput output);
  // Pinned staging of a step's metadata (double-buffered); then one async upload.
  unsigned char* stage_meta(std::size_t bytes);
  void upload_meta(std::size_t bytes);
  // cuda_decode_step.cpp
  void run_decode(const ForwardStep& step, StepOutput output);
  void run_decode_batch(std::span<const ForwardStep> steps, StepOutput output);
  // Grows decode_q_copies_ to `copies_per_seq` query copies for each of `batch` sequences.
  void ensure_query_copies(int batch, int copies_per_seq);
  // The one-token forward of `batch` sequences (the body a graph captures).
  void enqueue_decode(const DecodeMeta& meta, int batch, int splits, bool lazy, int max_entries, StepOutput output);
  int decode_splits(int batch, int max_entries) const;
  // Runs enqueue_decode from the graph of its launch signature (captured on first use), or
  // straight on the stream when graphs are off.
  void launch_decode(const DecodeMeta& meta, int batch, int splits, bool lazy, int max_entries, StepOutput output);
  // cuda_prefill_step.cpp
  void run_prefill(const ForwardStep& step, int total_keys, StepOutput output);

  CudaTuning tuning_;
  TensorShard shard_;          // rank 0 of 1 unless set_tensor_shard
  ncclComm* comm_ = nullptr;   // null: not a tensor-parallel rank
  int vocab_total_ = 0;        // the full vocabulary (shape_ holds this rank's share)
  DeviceBuffer logits_shard_, logits_gathered_;
  cudaStream_t stream_ = nullptr;
  cublasHandle_t cublas_ = nullptr;
  int sm_count_ = 0;
  ModelShape shape_;
  bool loaded_ = false;
  DeviceBuffer embed_, lm_head_, final_norm_, inv_freq_;
  bool tied_ = false;
  std::vector<LayerWeights> layers_;
  int num_blocks_ = 0, block_size_ = 0;
  DeviceBuffer k_pool_, v_pool_;
  // Per-step workspace, grown to the largest step seen.
  int capacity_tokens_ = 0;
  int capacity_output_rows_ = 0;
  DeviceBuffer x_, h_, qkv_, attn_, gate_up_, act_, logits_;
  DeviceBuffer partial_o_, partial_ml_, q_rotated_;
  std::size_t partial_rows_splits_ = 0;
  DeviceBuffer step_meta_;
  DeviceBuffer copies_;
  std::vector<unsigned char> host_meta_;   // prefill / batch metadata being assembled
  PinnedBuffer staged_meta_[2];            // what the uploads read, alternating
  cudaEvent_t meta_uploaded_[2] = {nullptr, nullptr};
  int meta_slot_ = 0;
  DeviceBuffer gemv_partial_, gemv_counters_;
  GemvContext gemv_;
  DeviceBuffer device_tokens_, argmax_scratch_;
  PinnedBuffer host_logits_, host_tokens_;
  // Instantiated decode graphs by (batch, splits, lazy, output, shift capacity, copies a sequence);
  // they bake in every buffer address, so any reallocation clears them.
  std::map<std::tuple<int, int, bool, int, int, int>, cudaGraphExec_t> graphs_;
  DeviceBuffer decode_q_copies_;  // lazy one-token steps' query copies (DecodeParams::q_rotated)
  std::vector<int32_t> decode_shifts_;  // a lazy one-token step's distinct shifts, being assembled
  DeviceBuffer cublas_workspace_;  // cuBLAS's workspace, ours so that graph capture never allocates
  bool gemv_ok_ = false;  // every decode GEMM can take the GEMV path (hidden, q and mlp widths % 8)
  // Batch-1 decode steps run a layer's dense part as one persistent kernel (decode_layer.h).
  bool decode_layer_ok_ = false;
  DeviceBuffer layer_sync_;  // its grid barrier counter, then its gate_up claim counter
  void choose_decode_layer();
  int graph_captures_ = 0, graph_replays_ = 0;
  bool eager_next_decode_ = false;  // next_decode_without_graph()
};

}  // namespace lazyscope::cuda

// The CUDA side of the lazy-overhead probe: decode_attention (kernels/cuda/attention.h), one query
// per sequence, on plain tables and on lazy tables whose documents each carry their own shift, in
// bf16 as the backend runs it: lazy calls read the query copies (one a shift, each entry naming
// its copy) that the backend's decode steps have the kernel before attention write; that writing is
// not timed here. Each variant rotates over enough copies of its tables and pool that
// the working set is several times the L2, so every call reads K and V from HBM. Timed with CUDA
// events around back-to-back launches on one stream.
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "base/error.h"
#include "kernels/cuda/attention.h"
#include "kernels/cuda/device_buffer.h"
#include "kernels/overhead_probe.h"
#include "kernels/rope.h"

namespace lazyscope::cuda {
namespace {

template <typename T>
void upload(DeviceBuffer& buffer, const std::vector<T>& items) {
  buffer.resize(items.size() * sizeof(T) + 16);
  LAZYSCOPE_CUDA_CHECK(cudaMemcpy(buffer.as<void>(), items.data(), items.size() * sizeof(T), cudaMemcpyHostToDevice));
}

void upload_random_bf16(DeviceBuffer& buffer, std::size_t elements, unsigned seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  // One random chunk repeated: filling gigabytes element by element on the host would dominate.
  std::vector<bf16_bits> chunk(std::min<std::size_t>(elements, 1 << 20));
  for (bf16_bits& x : chunk) x = float_to_bf16(normal(rng));
  buffer.resize(elements * sizeof(bf16_bits));
  for (std::size_t at = 0; at < elements; at += chunk.size()) {
    const std::size_t n = std::min(chunk.size(), elements - at);
    LAZYSCOPE_CUDA_CHECK(cudaMemcpy(buffer.as<bf16_bits>() + at, chunk.data(), n * sizeof(bf16_bits), cudaMemcpyHostToDevice));
  }
}

class CudaAttentionProbe final : public AttentionProbe {
 public:
  explicit CudaAttentionProbe(const AttentionProbeShape& s) : s_(s) {
    check_probe_shape(s);
    if (s.head_dim != 16 && s.head_dim != 32 && s.head_dim != 64 && s.head_dim != 128) {
      throw Error("overhead probe: the CUDA decode kernel takes head dims 16, 32, 64 or 128 (got " +
                  std::to_string(s.head_dim) + ")");
    }
    if (kPrefillTileKeys % s.block_size != 0) {
      throw Error("overhead probe: the CUDA backend needs a block size that divides " + std::to_string(kPrefillTileKeys) +
                  " (got " + std::to_string(s.block_size) + ")");
    }
    cudaDeviceProp prop{};
    LAZYSCOPE_CUDA_CHECK(cudaGetDeviceProperties(&prop, 0));
    device_ = prop.name;
    const int blocks_per_seq = (s.context + s.block_size - 1) / s.block_size;
    const double kv_bytes = double(s.batch) * blocks_per_seq * s.block_size * s.num_kv_heads * s.head_dim * 2 * 2;
    replicas_ = std::max(1, std::min(64, int(std::ceil(256e6 / kv_bytes))));
    const std::size_t pool_elements =
        std::size_t(replicas_) * s.batch * blocks_per_seq * s.num_kv_heads * s.block_size * s.head_dim;
    std::size_t free_bytes = 0, total_bytes = 0;
    LAZYSCOPE_CUDA_CHECK(cudaMemGetInfo(&free_bytes, &total_bytes));
    if (double(pool_elements) * 4 > 0.8 * double(free_bytes)) {
      throw Error("overhead probe: the pool for this shape (" + std::to_string(pool_elements * 4 >> 20) +
                  " MiB) does not fit the GPU's free memory");
    }
    upload_random_bf16(k_, pool_elements, 1);
    upload_random_bf16(v_, pool_elements, 2);
    upload_random_bf16(q_, std::size_t(s.batch) * s.num_heads * s.head_dim, 3);
    const int doc = s.document_tokens > 0 ? s.document_tokens : s.context;
    const int documents = (s.context + doc - 1) / doc;
    upload_random_bf16(q_copies_, std::size_t(documents) * s.batch * s.num_heads * s.head_dim, 4);
    out_.resize(std::size_t(s.batch) * s.num_heads * s.head_dim * sizeof(bf16_bits));
    upload(positions_, std::vector<int32_t>(std::size_t(s.batch), s.context - 1 + 10000));
    RopeParams rope;
    upload(inv_freq_, rope_inv_freq(rope, s.head_dim));
    std::mt19937 rng(11);
    for (int lazy = 0; lazy < 2; ++lazy) {
      for (int r = 0; r < replicas_; ++r) {
        AttentionPlan plan;
        for (int b = 0; b < s.batch; ++b) {
          std::vector<int> order(blocks_per_seq);
          for (int i = 0; i < blocks_per_seq; ++i) order[i] = (r * s.batch + b) * blocks_per_seq + i;
          std::shuffle(order.begin(), order.end(), rng);
          std::vector<KvEntry> table(blocks_per_seq);
          for (int i = 0; i < blocks_per_seq; ++i) {
            const int first_key = i * s.block_size;
            table[i] = KvEntry{order[i], lazy ? (first_key / doc) * doc + 3 : 0,
                               std::min(s.block_size, s.context - first_key), 0};
          }
          append_table(plan, table.data(), int(table.size()), s.block_size, lazy != 0);
        }
        if (lazy) name_query_copies(plan);  // each entry names its document's copy, as the backend's steps do
        Tables t;
        upload(t.entries, plan.entries);
        upload(t.offsets, plan.seq_entry_offsets);
        t.max_entries = plan.max_entries;
        tables_[lazy].push_back(std::move(t));
      }
      max_entries_ = tables_[lazy].front().max_entries;
    }
    splits_ = decode_num_splits(s.batch, s.num_kv_heads, max_entries_, device_sm_count());
    partial_o_.resize(split_partial_o_floats(s.batch * s.num_heads, splits_, s.head_dim) * sizeof(float));
    partial_ml_.resize(split_partial_ml_floats(s.batch * s.num_heads, splits_) * sizeof(float));
    LAZYSCOPE_CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
    LAZYSCOPE_CUDA_CHECK(cudaEventCreate(&start_));
    LAZYSCOPE_CUDA_CHECK(cudaEventCreate(&stop_));
  }

  ~CudaAttentionProbe() override {
    cudaEventDestroy(start_);
    cudaEventDestroy(stop_);
    cudaStreamDestroy(stream_);
  }

  double time_us(bool lazy, int calls) override {
    LAZYSCOPE_CUDA_CHECK(cudaEventRecord(start_, stream_));
    for (int c = 0; c < calls; ++c) launch(lazy, c % replicas_);
    LAZYSCOPE_CUDA_CHECK(cudaEventRecord(stop_, stream_));
    LAZYSCOPE_CUDA_CHECK(cudaEventSynchronize(stop_));
    float ms = 0.0f;
    LAZYSCOPE_CUDA_CHECK(cudaEventElapsedTime(&ms, start_, stop_));
    return double(ms) * 1e3 / calls;
  }

  std::string backend() const override { return "cuda"; }
  std::string device() const override { return device_; }
  std::string kernel() const override {
    return "cuda decode_attention (bf16, the backend's KV-split choice; lazy on per-shift query copies, "
           "their writing not timed)";
  }

 private:
  struct Tables {
    DeviceBuffer entries, offsets;
    int max_entries = 0;
  };

  void launch(bool lazy, int replica) {
    const Tables& t = tables_[lazy][std::size_t(replica)];
    DecodeParams p;
    p.q = q_.as<bf16_bits>();
    p.q_row_stride = int64_t(s_.num_heads) * s_.head_dim;
    p.q_positions = positions_.as<int32_t>();
    p.k_pool = k_.as<bf16_bits>();
    p.v_pool = v_.as<bf16_bits>();
    p.entries = t.entries.as<KvEntry>();
    p.seq_entry_offsets = t.offsets.as<int32_t>();
    p.batch = s_.batch;
    p.max_entries = t.max_entries;
    p.num_heads = s_.num_heads;
    p.num_kv_heads = s_.num_kv_heads;
    p.head_dim = s_.head_dim;
    p.block_size = s_.block_size;
    p.inv_freq = inv_freq_.as<float>();
    p.lazy = lazy;
    if (lazy) p.q_rotated = q_copies_.as<bf16_bits>();
    p.out = out_.as<bf16_bits>();
    p.num_splits = splits_;
    p.partial_o = partial_o_.as<float>();
    p.partial_ml = partial_ml_.as<float>();
    decode_attention(p, stream_);
  }

  AttentionProbeShape s_;
  std::string device_;
  int replicas_ = 1, splits_ = 1, max_entries_ = 0;
  DeviceBuffer k_, v_, q_, q_copies_, out_, positions_, inv_freq_, partial_o_, partial_ml_;
  std::vector<Tables> tables_[2];
  cudaStream_t stream_ = nullptr;
  cudaEvent_t start_ = nullptr, stop_ = nullptr;
};

}  // namespace

std::unique_ptr<AttentionProbe> make_attention_probe(const AttentionProbeShape& shape) {
  return std::make_unique<CudaAttentionProbe>(shape);
}

}  // namespace lazyscope::cuda

// Differential tests against the PyPI reference libraries (safetensors, numpy, tokenizers):
// checkpoints they write load here with identical values, and ours load there.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <string>
#include <vector>

#include "engine/model/config.h"
#include "engine/model/hf_checkpoint.h"
#include "engine/model/presets.h"
#include "engine/model/safetensors.h"
#include "engine/model/safetensors_writer.h"
#include "base/error.h"
#include "model_test_util.h"

namespace lazyscope {
namespace {

using testing::ScratchDir;

// Single-quoted for the shell (paths here never hold quotes).
std::string shell_quoted(const std::filesystem::path& p) {
  std::string q = "'";
  q += p.string();
  q += "'";
  return q;
}

bool python_ready() {
  const std::string python = LAZYSCOPE_PYTHON;
  if (python.empty()) return false;
  std::string command = shell_quoted(python);
  command += " -c 'import safetensors, numpy, tokenizers' 2>/dev/null";
  return testing::run_shell(command) == 0;
}

int run_python(const ScratchDir& dir, const std::string& script, const std::filesystem::path& arg1,
               const std::filesystem::path& arg2) {
  testing::write_bytes(dir / "script.py", script);
  std::string command = shell_quoted(LAZYSCOPE_PYTHON);
  for (const auto& part : {dir / "script.py", arg1, arg2}) {
    command += ' ';
    command += shell_quoted(part);
  }
  return testing::run_shell(command);
}

// Bitwise equality, with any NaN equal to any NaN.
void expect_same_values(const std::vector<float>& got, const std::vector<float>& want,
                        const std::string& name) {
  ASSERT_EQ(got.size(), want.size()) << name;
  for (std::size_t i = 0; i < got.size(); ++i) {
    if (std::isnan(want[i])) {
      ASSERT_TRUE(std::isnan(got[i])) << name << "[" << i << "]";
    } else {
      ASSERT_EQ(std::bit_cast<uint32_t>(got[i]), std::bit_cast<uint32_t>(want[i]))
          << name << "[" << i << "]: " << got[i] << " vs " << want[i];
    }
  }
}

// Writes a sharded BF16 Llama checkpoint with the reference library (shard 1 through the
// low-level serializer, which knows BF16; shard 2 through safetensors.numpy with F16/F32), plus
// expected.safetensors holding every tensor as F32 decoded by numpy.
const char* kPythonWriter = R"PY(
import json, sys
import numpy as np
from safetensors import serialize_file, TensorSpec
from safetensors.numpy import save_file

out, expected_path = sys.argv[1], sys.argv[2]
V, H, I, L, NH, KV, HD = 37, 16, 24, 2, 4, 2, 4
config = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "vocab_size": V,
          "hidden_size": H, "intermediate_size": I, "num_hidden_layers": L,
          "num_attention_heads": NH, "num_key_value_heads": KV, "rms_norm_eps": 1e-5,
          "rope_parameters": {"rope_type": "llama3", "rope_theta": 500000.0, "factor": 8.0,
                              "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                              "original_max_position_embeddings": 8192},
          "tie_word_embeddings": True, "bos_token_id": 1, "eos_token_id": [2, 3]}
json.dump(config, open(out + "/config.json", "w"))

shapes = {"model.embed_tokens.weight": (V, H), "model.norm.weight": (H,)}
for l in range(L):
    p = f"model.layers.{l}."
    shapes.update({p + "input_layernorm.weight": (H,), p + "post_attention_layernorm.weight": (H,),
                   p + "self_attn.q_proj.weight": (NH * HD, H), p + "self_attn.k_proj.weight": (KV * HD, H),
                   p + "self_attn.v_proj.weight": (KV * HD, H), p + "self_attn.o_proj.weight": (H, NH * HD),
                   p + "mlp.gate_proj.weight": (I, H), p + "mlp.up_proj.weight": (I, H),
                   p + "mlp.down_proj.weight": (H, I)})
rng = np.random.default_rng(1234)
names = sorted(shapes)
shard1, shard2, expected, keep = {}, {}, {}, []
for k, name in enumerate(names):
    shape = shapes[name]
    if k % 3 != 2:
        # BF16 from random fp32 (round to nearest even by integer arithmetic), decoded by numpy.
        f = (rng.standard_normal(shape) * 0.05).astype(np.float32)
        if k == 0:
            f.flat[0:4] = [np.inf, -0.0, 1e-40, 3.0e38]  # inf, signed zero, subnormal, large
        u = f.view(np.uint32).astype(np.uint64)
        bits = ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)
        bits = np.ascontiguousarray(bits)
        keep.append(bits)
        shard1[name] = TensorSpec(dtype="bfloat16", shape=list(shape), data_ptr=bits.ctypes.data,
                                  data_len=bits.nbytes)
        expected[name] = (bits.astype(np.uint32) << 16).view(np.float32)
    elif k % 2 == 0:
        h = (rng.standard_normal(shape) * 0.05).astype(np.float16)
        h.flat[0:3] = [np.float16(6e-8), np.float16(-6.1e-5), np.float16(65504)]
        shard2[name] = h
        expected[name] = h.astype(np.float32)
    else:
        f = rng.standard_normal(shape).astype(np.float32)
        shard2[name] = f
        expected[name] = f
# An unrelated extra F16 tensor exercising every bit pattern.
allh = np.arange(65536, dtype=np.uint16).view(np.float16)
shard2["extra.all_f16"] = allh
expected["extra.all_f16"] = allh.astype(np.float32)

s1, s2 = "model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors"
serialize_file(shard1, out + "/" + s1, metadata={"format": "pt"})
save_file(shard2, out + "/" + s2, metadata={"format": "pt"})
weight_map = {n: s1 for n in shard1}
weight_map.update({n: s2 for n in shard2})
json.dump({"metadata": {"total_size": 0}, "weight_map": weight_map},
          open(out + "/model.safetensors.index.json", "w"))
save_file({n: np.ascontiguousarray(v) for n, v in expected.items()}, expected_path)
)PY";

TEST(SafetensorsPython, ReadsReferenceWrittenShardedBf16Checkpoint) {
  if (!python_ready())
    GTEST_SKIP() << "LAZYSCOPE_PYTHON with safetensors/numpy/tokenizers not available";
  ScratchDir dir;
  std::filesystem::create_directories(dir / "ckpt");
  ASSERT_EQ(run_python(dir, kPythonWriter, dir / "ckpt", dir / "expected.safetensors"), 0);
  SafetensorsFile expected(dir / "expected.safetensors");
  SafetensorsCheckpoint ckpt = SafetensorsCheckpoint::open_directory(dir / "ckpt");
  EXPECT_EQ(ckpt.files().size(), 2u);
  ASSERT_EQ(ckpt.tensors().size(), expected.tensors().size());
  std::vector<float> got, want;
  for (const TensorInfo& t : expected.tensors()) {
    const SafetensorsCheckpoint::Entry* e = ckpt.find(t.name);
    ASSERT_NE(e, nullptr) << t.name;
    EXPECT_EQ(e->tensor->shape, t.shape) << t.name;
    e->file->read_f32(*e->tensor, got);
    expected.read_f32(t, want);
    expect_same_values(got, want, t.name);
  }
  // The whole checkpoint maps into ModelWeights (tied, rope_parameters layout).
  ModelConfig config = load_model_config(dir / "ckpt" / "config.json");
  EXPECT_EQ(config.shape.head_dim, 4);  // derived: 16 / 4
  EXPECT_TRUE(config.shape.rope.llama3);
  ModelWeights w = load_hf_weights(ckpt, config);
  expected.read_f32(*expected.find("model.layers.1.mlp.down_proj.weight"), want);
  expect_same_values(w.layers[1].w_down, want, "w_down");
  EXPECT_TRUE(w.lm_head.empty());
}

// Reads what our writer produced with the reference libraries and writes back the values it
// decoded (BF16 through the raw deserializer and numpy bit shifts) as expected.safetensors.
const char* kPythonReader = R"PY(
import json, os, sys
import numpy as np
from safetensors import deserialize, safe_open
from safetensors.numpy import save_file
from tokenizers import Tokenizer

ckpt, expected_path = sys.argv[1], sys.argv[2]
files = sorted(f for f in os.listdir(ckpt) if f.endswith(".safetensors"))
index_path = os.path.join(ckpt, "model.safetensors.index.json")
if os.path.exists(index_path):
    weight_map = json.load(open(index_path))["weight_map"]
    assert sorted(set(weight_map.values())) == files, (weight_map, files)
decoded = {}
for f in files:
    path = os.path.join(ckpt, f)
    with safe_open(path, framework="numpy") as handle:  # validates the header like HF does
        names = set(handle.keys())
        assert handle.metadata()["format"] == "pt"
    for name, t in deserialize(open(path, "rb").read()):
        assert name in names
        if t["dtype"] == "BF16":
            bits = np.frombuffer(bytes(t["data"]), dtype="<u2").astype(np.uint32)
            decoded[name] = (bits << 16).view(np.float32).reshape(t["shape"])
        else:
            assert t["dtype"] == "F32", t["dtype"]
            with safe_open(path, framework="numpy") as handle:
                decoded[name] = handle.get_tensor(name)
save_file({n: np.ascontiguousarray(v) for n, v in decoded.items()}, expected_path)
if os.path.exists(os.path.join(ckpt, "tokenizer.json")):
    tok = Tokenizer.from_file(os.path.join(ckpt, "tokenizer.json"))
    config = json.load(open(os.path.join(ckpt, "config.json")))
    ids = tok.encode("The river town, 42 kitchens.", add_special_tokens=True).ids
    assert ids[0] == config["bos_token_id"], ids
    assert tok.get_vocab_size() <= config["vocab_size"]
)PY";

// Compares every tensor of `dir` as we read it with what the reference library decoded.
void check_python_reads(const std::filesystem::path& ckpt_dir) {
  ScratchDir dir;
  ASSERT_EQ(run_python(dir, kPythonReader, ckpt_dir, dir / "expected.safetensors"), 0);
  SafetensorsFile expected(dir / "expected.safetensors");
  SafetensorsCheckpoint ckpt = SafetensorsCheckpoint::open_directory(ckpt_dir);
  ASSERT_EQ(expected.tensors().size(), ckpt.tensors().size());
  std::vector<float> got, want;
  for (const TensorInfo& t : expected.tensors()) {
    const SafetensorsCheckpoint::Entry* e = ckpt.find(t.name);
    ASSERT_NE(e, nullptr) << t.name;
    EXPECT_EQ(e->tensor->shape, t.shape);
    e->file->read_f32(*e->tensor, got);
    expected.read_f32(t, want);
    expect_same_values(got, want, t.name);
  }
}

TEST(SafetensorsPython, ReferenceReadsOurShardedWriterOutput) {
  if (!python_ready())
    GTEST_SKIP() << "LAZYSCOPE_PYTHON with safetensors/numpy/tokenizers not available";
  ScratchDir dir;
  std::vector<TensorToWrite> tensors;
  for (int i = 0; i < 6; ++i) {
    tensors.push_back({std::string("t").append(std::to_string(i)),
                       i % 2 ? TensorDtype::F32 : TensorDtype::BF16,
                       {int64_t(3 + i), 5}});
  }
  write_safetensors_checkpoint(dir.path(), tensors,
                               [](std::size_t i, std::vector<float>& v) {
                                 for (std::size_t k = 0; k < v.size(); ++k)
                                   v[k] = std::sin(float(i * 100 + k)) * 3.0f;
                                 v[0] = -0.0f;
                               },
                               200, {{"format", "pt"}});
  ASSERT_TRUE(std::filesystem::exists(dir / "model.safetensors.index.json"));
  check_python_reads(dir.path());
}

TEST(SafetensorsPython, ReferenceReadsMakeModelCheckpoints) {
  if (!python_ready())
    GTEST_SKIP() << "LAZYSCOPE_PYTHON with safetensors/numpy/tokenizers not available";
  ScratchDir dir;
  CheckpointWriteOptions options;
  options.text_dir = std::filesystem::path(LAZYSCOPE_SOURCE_DIR) / "resources" / "text";
  write_model_checkpoint(find_model_preset("tiny"), 3, dir / "bf16", options);
  check_python_reads(dir / "bf16");
  options.dtype = TensorDtype::F32;
  options.max_shard_bytes = 120000;
  write_model_checkpoint(find_model_preset("tiny"), 3, dir / "f32", options);
  check_python_reads(dir / "f32");
}

}  // namespace
}  // namespace lazyscope

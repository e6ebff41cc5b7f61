"""Small seeds for the fuzz targets whose per-input cost grows with the input's size.

  small_seeds.py tokenizer TOKENIZER.json OUT.json
      the same tokenizer.json (normalizer, pre-tokenizer, added tokens, decoder, post-processor)
      with only the vocabulary and merges that the fuzz target's fixed text uses
  small_seeds.py gguf OUT_LLAMA.gguf OUT_QUANTS.gguf
      a complete one-layer Llama GGUF (metadata, tokenizer, one tensor of each type the loader
      meets in real files) with 32-wide tensors, and one 256-element tensor of every quant type

The seeds reach nearly the coverage of the test fixtures they replace (libFuzzer's edges at start:
GGUF 1484 against 1491, tokenizer 1688 against 1710) in a twentieth and a quarter of the bytes:
libFuzzer copies, hashes and mutates every input, and the loaders read and dequantize all of it.
"""
import json
import sys

import numpy as np
import gguf
from gguf import GGMLQuantizationType as T

# What fuzz/fuzz_tokenizer.cpp and fuzz/fuzz_gguf.cpp encode.
FIXED_TEXT = "Hello, world! 123 h\u00e9llo  <|im_start|>x\n\tz"


def byte_level_alphabet():
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("\u00a1"), ord("\u00ac") + 1)) + \
        list(range(ord("\u00ae"), ord("\u00ff") + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return {b: chr(c) for b, c in zip(bs, cs)}


def needed_chars():
    alphabet = byte_level_alphabet()
    return {alphabet[b] for b in FIXED_TEXT.encode("utf-8")}


def small_vocab(vocab, merges):
    """The tokens made only of the fixed text's bytes, and the merges between them."""
    need = needed_chars()
    keep = {t: i for t, i in vocab.items() if all(ch in need for ch in t)}
    kept_merges = []
    for m in merges:
        a, b = m.split(" ") if isinstance(m, str) else m
        if a in keep and b in keep and a + b in keep:
            kept_merges.append(m)
    return keep, kept_merges


def tokenizer(src, out):
    spec = json.load(open(src, encoding="utf-8"))
    vocab, merges = small_vocab(spec["model"]["vocab"], spec["model"]["merges"])
    # Dense ids (added tokens follow), as a real file has them.
    order = sorted(vocab, key=lambda t: vocab[t])
    spec["model"]["vocab"] = {t: i for i, t in enumerate(order)}
    spec["model"]["merges"] = merges
    for i, token in enumerate(spec.get("added_tokens", [])):
        token["id"] = len(order) + i
    with open(out, "w", encoding="utf-8") as f:
        json.dump(spec, f, ensure_ascii=False, separators=(",", ":"))


def gguf_llama(out):
    need = sorted(needed_chars())
    specials = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
    tokens = specials + need + ["He", "ll", "llo", "Hello", "\u0120w", "or", "\u0120wor", "ld"]
    merges = ["H e", "l l", "ll o", "He llo", "\u0120 w", "o r", "\u0120w or", "l d"]
    rng = np.random.default_rng(7)
    hidden, heads, kv_heads, inter = 32, 2, 1, 32
    head_dim = hidden // heads
    writer = gguf.GGUFWriter(out, "llama")
    writer.add_name("fuzz-seed")
    writer.add_context_length(64)
    writer.add_embedding_length(hidden)
    writer.add_block_count(1)
    writer.add_feed_forward_length(inter)
    writer.add_head_count(heads)
    writer.add_head_count_kv(kv_heads)
    writer.add_rope_freq_base(10000.0)
    writer.add_rope_dimension_count(head_dim)
    writer.add_layer_norm_rms_eps(1e-6)
    writer.add_vocab_size(len(tokens))
    writer.add_tokenizer_model("gpt2")
    writer.add_tokenizer_pre("smollm")
    writer.add_token_list(tokens)
    writer.add_token_types([3 if t in specials else 1 for t in tokens])
    writer.add_token_merges(merges)
    writer.add_bos_token_id(1)
    writer.add_eos_token_id(2)
    writer.add_add_bos_token(True)
    writer.add_chat_template("{% for m in messages %}<|im_start|>{{ m['content'] }}<|im_end|>{% endfor %}")
    writer.add_array("test.nested", [[1, 2], [3]])
    writer.add_array("test.floats", [1.5, -2.25])
    writer.add_bool("test.flag", True)
    writer.add_int64("test.int64", -(2 ** 40))
    writer.add_float64("test.f64", 0.125)

    def weight(rows, cols):
        return rng.normal(0, 0.05, size=(rows, cols)).astype(np.float32)

    writer.add_tensor("token_embd.weight", weight(len(tokens), hidden).astype(np.float16))
    writer.add_tensor("output_norm.weight", np.ones(hidden, dtype=np.float32))
    p = "blk.0."
    writer.add_tensor(p + "attn_norm.weight", np.ones(hidden, dtype=np.float32))
    writer.add_tensor(p + "attn_q.weight", weight(heads * head_dim, hidden))
    writer.add_tensor(p + "attn_k.weight", weight(kv_heads * head_dim, hidden))
    writer.add_tensor(p + "attn_v.weight", gguf.quants.quantize(weight(kv_heads * head_dim, hidden), T.Q8_0),
                      raw_dtype=T.Q8_0)
    writer.add_tensor(p + "attn_output.weight", weight(hidden, heads * head_dim).astype(np.float16))
    writer.add_tensor(p + "ffn_norm.weight", np.ones(hidden, dtype=np.float32))
    writer.add_tensor(p + "ffn_gate.weight", gguf.quants.quantize(weight(inter, hidden), T.Q4_1), raw_dtype=T.Q4_1)
    writer.add_tensor(p + "ffn_up.weight", gguf.quants.quantize(weight(inter, hidden), T.Q5_0), raw_dtype=T.Q5_0)
    writer.add_tensor(p + "ffn_down.weight", weight(hidden, inter))
    finish(writer)


def gguf_quants(out):
    rng = np.random.default_rng(1234)
    writer = gguf.GGUFWriter(out, "llama")
    for name in ["F32", "F16", "BF16", "Q8_0", "Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q4_K", "Q5_K", "Q6_K"]:
        qtype = T[name]
        block, size = gguf.GGML_QUANT_SIZES[qtype]
        cols = max(block, 32)
        if name in ("Q4_K", "Q5_K", "Q6_K"):  # no Python quantizer: random blocks with small scales
            raw = rng.integers(0, 256, size=(1, size), dtype=np.uint8)
            scales = rng.uniform(-0.05, 0.05, size=(1, 2)).astype(np.float16).view(np.uint8)
            if qtype == T.Q6_K:
                raw[:, size - 2:] = scales[:, :2]
            else:
                raw[:, 0:4] = scales
        else:
            raw = gguf.quants.quantize(rng.normal(0, 1, size=(1, cols)).astype(np.float32), qtype)
        writer.add_tensor("q." + name, raw, raw_dtype=qtype)
    finish(writer)


def finish(writer):
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()


def main(argv):
    if argv[1] == "tokenizer":
        tokenizer(argv[2], argv[3])
    elif argv[1] == "gguf":
        gguf_llama(argv[2])
        gguf_quants(argv[3])
    else:
        sys.exit("unknown mode " + argv[1])


if __name__ == "__main__":
    main(sys.argv)

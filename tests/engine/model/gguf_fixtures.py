"""Writes GGUF fixtures for the C++ tests with the PyPI `gguf` package, and reference outputs
from the `gguf` dequantizers and the HF `tokenizers` library.

  gguf_fixtures.py quants OUT.gguf
      for every type: tensor q.<TYPE> (quantized) and ref.<TYPE> (gguf.quants.dequantize of it, F32)
  gguf_fixtures.py llama OUT.gguf REF_DIR [--tied] [--pre NAME] [--llama3-rope] [--flaw=KIND]
      (KIND: arch = not llama, ffn = metadata disagrees with shapes, drop = a missing tensor,
       extra = an unexpected tensor)
      a tiny complete Llama GGUF (metadata, tokenizer, tensors); REF_DIR gets the HF-layout q/k of
      layer 0 (q0.bin, k0.bin, raw fp32) and tokens.json (strings and HF tokenizers' ids)
  gguf_fixtures.py hf-ids MODEL.gguf PRE OUT.json [COUNT]
      builds an HF tokenizer from MODEL.gguf's vocabulary and merges with pre-tokenizer PRE and
      writes COUNT random and adversarial strings with their ids
"""
import json
import random
import sys

import numpy as np
import gguf
from gguf import GGMLQuantizationType as T
from gguf import GGUFValueType
from tokenizers import Tokenizer, Regex, models, pre_tokenizers, decoders, trainers

LLAMA3_REGEX = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}"
                r"| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")

QUANT_TYPES = ["F32", "F16", "BF16", "Q8_0", "Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q4_K", "Q5_K", "Q6_K"]


def random_k_blocks(rng, qtype, rows, cols):
    """K-quants have no Python quantizer: random block bytes with sane f16 scales are valid."""
    block, size = gguf.GGML_QUANT_SIZES[qtype]
    nblocks = rows * cols // block
    raw = rng.integers(0, 256, size=(nblocks, size), dtype=np.uint8)
    scales = rng.uniform(-0.05, 0.05, size=(nblocks, 2)).astype(np.float16).view(np.uint8)
    if qtype == T.Q6_K:
        raw[:, size - 2:] = scales[:, :2]  # d is last
    else:
        raw[:, 0:4] = scales  # d, dmin first
    return raw.reshape(rows, cols // block * size)


def write_quants(out):
    rng = np.random.default_rng(1234)
    writer = gguf.GGUFWriter(out, "llama")
    rows, cols = 4, 512
    for name in QUANT_TYPES:
        qtype = T[name]
        data = rng.normal(0, 1, size=(rows, cols)).astype(np.float32)
        data[0, :8] = [0, -0.0, 1e-8, -1e-8, 65000, -65000, 3.5, 1e-5]  # extremes, subnormals
        if name in ("Q4_K", "Q5_K", "Q6_K"):
            raw = random_k_blocks(rng, qtype, rows, cols)
        else:
            raw = gguf.quants.quantize(data, qtype)
        ref = gguf.quants.dequantize(raw, qtype).astype(np.float32)
        assert ref.shape == (rows, cols), (name, ref.shape)
        writer.add_tensor("q." + name, raw, raw_dtype=qtype)
        writer.add_tensor("ref." + name, ref)
    finish(writer)


def finish(writer):
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()


def hf_tokenizer(vocab, merges, added, pre):
    model = models.BPE(vocab=vocab, merges=merges, ignore_merges=pre in ("llama-bpe", "llama3"))
    tok = Tokenizer(model)
    if pre == "smollm":
        tok.pre_tokenizer = pre_tokenizers.Sequence([
            pre_tokenizers.Digits(individual_digits=True),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)])
    elif pre in ("llama-bpe", "llama3"):
        tok.pre_tokenizer = pre_tokenizers.Sequence([
            pre_tokenizers.Split(Regex(LLAMA3_REGEX), behavior="isolated", invert=False),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])
    else:
        tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    tok.decoder = decoders.ByteLevel()
    tok.add_special_tokens(added)
    return tok


SPECIALS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
TRAIN_TEXT = """The quick brown fox jumps over the lazy dog. It's 2024 and we're testing 12345 tokens!
LazyScope stores each document's KV once; the query is rotated lazily. Don't you think so?
Numbers like 3.14159, 1,000,000 and 42 appear; so do    spaces,\ttabs and
newlines. Café, naïve, Ünïcödé, 日本語のテキスト, emoji 🙂🚀, and symbols #@$%^&*()."""


def train_small_tokenizer():
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    trainer = trainers.BpeTrainer(vocab_size=420, special_tokens=SPECIALS, show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator([TRAIN_TEXT] * 4, trainer)
    spec = json.loads(tok.to_str())
    vocab = spec["model"]["vocab"]
    merges = [tuple(m.split(" ")) if isinstance(m, str) else tuple(m) for m in spec["model"]["merges"]]
    tokens = [None] * len(vocab)
    for text, idx in vocab.items():
        tokens[idx] = text
    return tokens, merges


def test_strings(rng, count, specials):
    pool = (list("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789") +
            list(" " * 12) + list("\n\n\t\r") + list(".,;:!?'\"()[]{}<>-_=+*/\\|@#$%^&~`") +
            list("éüßñçøåÉÜ") + list("日本語中文한국어") + ["🙂", "🚀", "👍🏽", "\u200b", "\u00a0"] +
            ["'s", "'S", "'ll", "'LL", "'re", "'ve", "'d", "'m", "'t"] + specials)
    fixed = ["", " ", "  ", "\n", " \n ", "hello world", " hello", "hello  world", "a   1",
             "abc  123", "   123 456", "1234567890", "12345678901234567890", "x1y2z3", " 1 2 3",
             "It's", "IT'S", "we'LL", "don't", "\t\t\tindent", "trailing   ", "a\n\n\nb",
             "a \n b", "$100.00", "3.14159", "1,000,000", "🙂🙂🙂", "日本語", "Ünïcödé",
             "<|im_start|>user\nhi<|im_end|>\n", "text<|endoftext|>more", "<|im_start|><|im_end|>",
             "   <|im_end|>  ", "a\u00a0b", "ab\u200bcd", "١٢٣ arabic digits", "²³ superscripts",
             "Ⅻ roman", "---===***", "    def f(x):\n        return x + 1\n"]
    strings = list(fixed)
    while len(strings) < count:
        length = int(rng.integers(1, 40))
        strings.append("".join(pool[int(rng.integers(0, len(pool)))] for _ in range(length)))
    return strings


def write_llama(out, ref_dir, tied, pre, llama3_rope, flaws=()):
    rng = np.random.default_rng(7)
    tokens, merges = train_small_tokenizer()
    vocab_size, hidden, heads, kv_heads, inter, layers = len(tokens), 64, 4, 2, 96, 2
    head_dim = hidden // heads
    writer = gguf.GGUFWriter(out, "gpt2" if "arch" in flaws else "llama")
    writer.add_name("tiny-llama-test")
    writer.add_context_length(256)
    writer.add_embedding_length(hidden)
    writer.add_block_count(layers)
    writer.add_feed_forward_length(inter + 32 if "ffn" in flaws else inter)
    writer.add_head_count(heads)
    writer.add_head_count_kv(kv_heads)
    writer.add_rope_freq_base(500000.0 if llama3_rope else 10000.0)
    writer.add_rope_dimension_count(head_dim)
    writer.add_layer_norm_rms_eps(1e-6)
    writer.add_vocab_size(vocab_size)
    writer.add_tokenizer_model("gpt2")
    writer.add_tokenizer_pre(pre)
    writer.add_token_list(tokens)
    writer.add_token_types([3 if t in SPECIALS else 1 for t in tokens])
    writer.add_token_merges([a + " " + b for a, b in merges])
    writer.add_bos_token_id(1)
    writer.add_eos_token_id(2)
    writer.add_add_bos_token(True)
    writer.add_chat_template("{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}")
    writer.add_array("test.nested", [[1, 2], [3]])
    writer.add_array("test.floats", [1.5, -2.25])
    writer.add_bool("test.flag", True)
    writer.add_int64("test.int64", -(2 ** 40))
    writer.add_float64("test.f64", 0.125)

    def permute(w, n_head):  # what llama.cpp's converter does to HF q/k rows
        return (w.reshape(n_head, 2, w.shape[0] // n_head // 2, *w.shape[1:])
                .swapaxes(1, 2).reshape(w.shape))

    def weight(rows, cols):
        return rng.normal(0, 0.05, size=(rows, cols)).astype(np.float32)

    if llama3_rope:  # Llama 3.2-style frequency scaling stored as per-pair divisors
        factor, low, high, orig = 32.0, 1.0, 4.0, 8192
        inv = 500000.0 ** (-np.arange(0, head_dim, 2, dtype=np.float64) / head_dim)
        wavelen = 2 * np.pi / inv
        smooth = (orig / wavelen - low) / (high - low)
        f = np.where(wavelen > orig / low, factor,
                     np.where(wavelen < orig / high, 1.0, 1.0 / ((1 - smooth) / factor + smooth)))
        writer.add_tensor("rope_freqs.weight", f.astype(np.float32))
    writer.add_tensor("token_embd.weight", weight(vocab_size, hidden))
    writer.add_tensor("output_norm.weight", np.ones(hidden, dtype=np.float32))
    if not tied:
        writer.add_tensor("output.weight", weight(vocab_size, hidden))
    for layer in range(layers):
        p = f"blk.{layer}."
        wq, wk = weight(heads * head_dim, hidden), weight(kv_heads * head_dim, hidden)
        if layer == 0:
            wq.tofile(f"{ref_dir}/q0.bin")
            wk.tofile(f"{ref_dir}/k0.bin")
        writer.add_tensor(p + "attn_norm.weight", np.ones(hidden, dtype=np.float32))
        writer.add_tensor(p + "attn_q.weight", permute(wq, heads))
        writer.add_tensor(p + "attn_k.weight", permute(wk, kv_heads))
        writer.add_tensor(p + "attn_v.weight", gguf.quants.quantize(weight(kv_heads * head_dim, hidden), T.Q8_0), raw_dtype=T.Q8_0)
        writer.add_tensor(p + "attn_output.weight", weight(hidden, heads * head_dim).astype(np.float16))
        writer.add_tensor(p + "ffn_norm.weight", np.ones(hidden, dtype=np.float32))
        writer.add_tensor(p + "ffn_gate.weight", gguf.quants.quantize(weight(inter, hidden), T.Q4_1), raw_dtype=T.Q4_1)
        if "drop" in flaws and layer == 1:
            continue
        writer.add_tensor(p + "ffn_up.weight", gguf.quants.quantize(weight(inter, hidden), T.Q5_0), raw_dtype=T.Q5_0)
        writer.add_tensor(p + "ffn_down.weight", weight(hidden, inter))
    if "extra" in flaws:
        writer.add_tensor("blk.0.attn_q.bias", np.zeros(hidden, dtype=np.float32))
    finish(writer)

    vocab = {t: i for i, t in enumerate(tokens)}
    hf = hf_tokenizer(vocab, merges, SPECIALS, pre)
    strings = test_strings(np.random.default_rng(3), 300, SPECIALS)
    cases = [{"text": s, "ids": hf.encode(s, add_special_tokens=False).ids} for s in strings]
    with open(f"{ref_dir}/tokens.json", "w", encoding="utf-8") as f:
        json.dump(cases, f, ensure_ascii=False)


def write_hf_ids(model_path, pre, out, count):
    reader = gguf.GGUFReader(model_path)
    def strings_of(key):
        field = reader.fields[key]
        return [bytes(field.parts[i]).decode("utf-8") for i in field.data]
    tokens = strings_of("tokenizer.ggml.tokens")
    merges = [tuple(m.split(" ")) for m in strings_of("tokenizer.ggml.merges")]
    types_field = reader.fields["tokenizer.ggml.token_type"]
    types = [int(types_field.parts[i][0]) for i in types_field.data]
    specials = [t for t, ty in zip(tokens, types) if ty == 3]
    vocab = {t: i for i, t in enumerate(tokens)}
    hf = hf_tokenizer(vocab, merges, specials, pre)
    strings = test_strings(np.random.default_rng(11), count, specials[:3])
    # Realistic prose too: words sampled from the vocabulary's own tokens.
    words = [t.replace("\u0120", " ") for t in tokens[300:20000] if t.isprintable()]
    prose_rng = random.Random(5)
    for _ in range(count // 4):
        strings.append("".join(prose_rng.choice(words) for _ in range(prose_rng.randint(3, 30))))
    cases = [{"text": s, "ids": hf.encode(s, add_special_tokens=False).ids} for s in strings]
    with open(out, "w", encoding="utf-8") as f:
        json.dump(cases, f, ensure_ascii=False)


def main(argv):
    if argv[1] == "quants":
        write_quants(argv[2])
    elif argv[1] == "llama":
        rest = argv[4:]
        pre = rest[rest.index("--pre") + 1] if "--pre" in rest else "smollm"
        flaws = [a[len("--flaw="):] for a in rest if a.startswith("--flaw=")]
        write_llama(argv[2], argv[3], "--tied" in rest, pre, "--llama3-rope" in rest, flaws)
    elif argv[1] == "hf-ids":
        write_hf_ids(argv[2], argv[3], argv[4], int(argv[5]) if len(argv) > 5 else 4000)
    else:
        sys.exit("unknown mode " + argv[1])


if __name__ == "__main__":
    main(sys.argv)

#!/usr/bin/env python3
"""An independent float64 NumPy Llama forward over a GGUF file (weights dequantized by the `gguf`
package, q/k rows un-permuted with the inverse of llama.cpp's converter permutation), compared
with a LazyScope full-mode logits dump. Runs anywhere the `gguf` package and numpy are (no torch);
the transformers check is scripts/reference/smollm2_transformers.py.

  gguf_numpy_reference.py MODEL.gguf --write-request REQUEST.json [--text TEXT]
      tokenizes a chat prompt with HF `tokenizers` built from the GGUF vocabulary and writes a
      request file in the *_ids form (docs/formats.md)
  gguf_numpy_reference.py MODEL.gguf --request REQUEST.json --compare DUMP.json
      prints max-abs differences of prompt_last_logits and every step_logits entry
"""
import argparse
import json
import os
import sys

import numpy as np
import gguf

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "tests", "engine", "model"))


def load(path):
    reader = gguf.GGUFReader(path)
    fields = reader.fields

    def scalar(key, default=None):
        if key not in fields:
            return default
        return fields[key].contents()

    cfg = {
        "layers": scalar("llama.block_count"), "hidden": scalar("llama.embedding_length"),
        "heads": scalar("llama.attention.head_count"),
        "kv_heads": scalar("llama.attention.head_count_kv"),
        "eps": scalar("llama.attention.layer_norm_rms_epsilon", 1e-5),
        "theta": scalar("llama.rope.freq_base", 10000.0),
    }
    cfg["head_dim"] = cfg["hidden"] // cfg["heads"]
    weights = {}
    for t in reader.tensors:
        w = gguf.quants.dequantize(t.data, t.tensor_type).astype(np.float64)
        weights[t.name] = w.reshape([int(d) for d in reversed(t.shape)]) if w.ndim > 1 else w.reshape(-1)
    return cfg, weights


def unpermute(w, n_head):
    # Inverse of convert_hf_to_gguf's permute: interleaved rope pairs back to HF half-split.
    return (w.reshape(n_head, w.shape[0] // n_head // 2, 2, *w.shape[1:])
            .swapaxes(1, 2).reshape(w.shape))


def forward(cfg, W, ids):
    n, D = len(ids), cfg["head_dim"]
    H, KV = cfg["heads"], cfg["kv_heads"]
    x = W["token_embd.weight"][ids]
    inv = cfg["theta"] ** (-np.arange(0, D, 2, dtype=np.float64) / D)
    ang = np.arange(n)[:, None] * inv[None, :]
    cos, sin = np.cos(np.concatenate([ang, ang], -1)), np.sin(np.concatenate([ang, ang], -1))

    def rope(t):  # t: [heads, n, D], HF rotate_half
        half = D // 2
        rot = np.concatenate([-t[..., half:], t[..., :half]], -1)
        return t * cos + rot * sin

    def norm(v, w):
        return v / np.sqrt((v * v).mean(-1, keepdims=True) + cfg["eps"]) * w

    mask = np.triu(np.full((n, n), -np.inf), 1)
    for layer in range(cfg["layers"]):
        p = f"blk.{layer}."
        h = norm(x, W[p + "attn_norm.weight"])
        q = h @ unpermute(W[p + "attn_q.weight"], H).T
        k = h @ unpermute(W[p + "attn_k.weight"], KV).T
        v = h @ W[p + "attn_v.weight"].T
        q = rope(q.reshape(n, H, D).transpose(1, 0, 2))
        k = rope(k.reshape(n, KV, D).transpose(1, 0, 2))
        v = v.reshape(n, KV, D).transpose(1, 0, 2)
        k, v = np.repeat(k, H // KV, 0), np.repeat(v, H // KV, 0)
        s = q @ k.transpose(0, 2, 1) / np.sqrt(D) + mask
        s = np.exp(s - s.max(-1, keepdims=True))
        s /= s.sum(-1, keepdims=True)
        o = (s @ v).transpose(1, 0, 2).reshape(n, H * D)
        x = x + o @ W[p + "attn_output.weight"].T
        h = norm(x, W[p + "ffn_norm.weight"])
        g = h @ W[p + "ffn_gate.weight"].T
        u = h @ W[p + "ffn_up.weight"].T
        x = x + ((g / (1 + np.exp(-g))) * u) @ W[p + "ffn_down.weight"].T
    x = norm(x, W["output_norm.weight"])
    head = W.get("output.weight", W["token_embd.weight"])
    return x @ head.T


def request_ids(request):
    order = request.get("order") or list(range(len(request.get("document_ids", []))))
    ids = list(request.get("prefix_ids", []))
    for i in order:
        ids += request["document_ids"][i]
    return ids + list(request["query_ids"])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("model")
    ap.add_argument("--write-request")
    ap.add_argument("--text", default="The Eiffel Tower was completed in 1889 for the World's Fair.")
    ap.add_argument("--request")
    ap.add_argument("--compare")
    args = ap.parse_args()
    if args.write_request:
        import gguf_fixtures
        reader = gguf.GGUFReader(args.model)
        toks = [bytes(reader.fields["tokenizer.ggml.tokens"].parts[i]).decode() for i in reader.fields["tokenizer.ggml.tokens"].data]
        merges = [tuple(bytes(reader.fields["tokenizer.ggml.merges"].parts[i]).decode().split(" ")) for i in reader.fields["tokenizer.ggml.merges"].data]
        tt = reader.fields["tokenizer.ggml.token_type"]
        specials = [t for t, i in zip(toks, tt.data) if int(tt.parts[i][0]) == 3]
        hf = gguf_fixtures.hf_tokenizer({t: i for i, t in enumerate(toks)}, merges, specials, "smollm")
        enc = lambda s: hf.encode(s, add_special_tokens=False).ids
        request = {"prefix_ids": enc("<|im_start|>system\nAnswer from the documents.<|im_end|>\n<|im_start|>user\n"),
                   "document_ids": [enc("Document: " + args.text + "\n\n")],
                   "query_ids": enc("Question: When was it completed?<|im_end|>\n<|im_start|>assistant\n"),
                   "max_new_tokens": 8}
        with open(args.write_request, "w") as f:
            json.dump(request, f)
        return
    with open(args.request) as f:
        ids = request_ids(json.load(f))
    with open(args.compare) as f:
        dump = json.load(f)
    cfg, W = load(args.model)
    seq = ids + list(dump.get("generated_ids", []))
    logits = forward(cfg, W, seq)
    steps = dump.get("step_logits") or [dump["prompt_last_logits"]]
    worst = 0.0
    for i, ours in enumerate(steps):
        pos = len(ids) - 1 + i
        if pos >= len(seq):
            break
        diff = float(np.abs(np.asarray(ours, dtype=np.float64) - logits[pos]).max())
        worst = max(worst, diff)
        print(f"step {i}: max-abs {diff:.3e}  argmax ours {int(np.argmax(ours))} ref {int(np.argmax(logits[pos]))}")
    first = float(np.abs(np.asarray(dump["prompt_last_logits"]) - logits[len(ids) - 1]).max())
    print(f"prompt_last_logits max-abs {first:.3e}; worst over steps {worst:.3e}; "
          f"logit range {logits[len(ids) - 1].min():.2f}..{logits[len(ids) - 1].max():.2f}")


if __name__ == "__main__":
    main()

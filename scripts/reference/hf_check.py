#!/usr/bin/env python3
"""Cross-check LazyScope's HF checkpoint loading and full-mode forward against PyTorch + transformers.

Runs on the GPU machine (PyTorch and transformers 5.x installed, no network needed); uses CUDA
when present, the CPU otherwise. The reference runs in float64, with the weights read back from
the bf16 checkpoint on disk, so the only differences left are LazyScope's fp32 arithmetic.

Usage (from the repository root, after building lazyscope-cli):

  # 1. A LazyScope tiny checkpoint supplies the tokenizer (tokenizer.json, tokenizer_config.json).
  build/app/lazyscope-cli make-model --preset tiny --seed 1 --out /tmp/ls-tiny

  # 2. Build a small LlamaForCausalLM with transformers (bf16, llama3 rope scaling, sharded into
  #    2+ files with model.safetensors.index.json), save_pretrained it, copy the tokenizer, and
  #    write a token-id request (docs/formats.md) next to it.
  python3 scripts/reference/hf_check.py make --out /tmp/hf-llama --tokenizer-from /tmp/ls-tiny

  # 3. float64 reference logits at the last prompt position.
  python3 scripts/reference/hf_check.py reference --model /tmp/hf-llama \
      --request /tmp/hf-llama/request_ids.json --out /tmp/hf-ref.json

  # 4. LazyScope on the same checkpoint and request, then compare (exit status 1 above --tol).
  build/app/lazyscope-cli generate --model /tmp/hf-llama --request /tmp/hf-llama/request_ids.json \
      --mode full --policy none --max-new-tokens 1 --backend cpu --dump-logits /tmp/ls-dump.json
  python3 scripts/reference/hf_check.py compare /tmp/hf-ref.json /tmp/ls-dump.json --tol 2e-3

  # (--backend cuda checks the GPU path; its bf16 arithmetic needs a looser --tol.)

  # Or steps 2+3 in one go:
  python3 scripts/reference/hf_check.py all --out /tmp/hf-llama --tokenizer-from /tmp/ls-tiny \
      --ref-out /tmp/hf-ref.json

`reference` also works on any Llama checkpoint directory (e.g. a real Llama-3.1-8B), with a
request that holds token ids or text (text is tokenized with the directory's tokenizer.json:
prefix gets BOS when the tokenizer adds one, documents and query get none, as LazyScope does).
"""

import argparse
import json
import os
import random
import shutil
import struct
import sys


def fail(message):
    print("hf_check: error: " + message, file=sys.stderr)
    sys.exit(2)


def read_json(path, what):
    try:
        with open(path, "r", encoding="utf-8") as f:
            return json.load(f)
    except FileNotFoundError:
        fail(f"{what} not found: {path}")
    except json.JSONDecodeError as e:
        fail(f"{what} {path} is not valid JSON: {e}")


def safetensors_header(path):
    """The JSON header of a .safetensors file, read without any library."""
    with open(path, "rb") as f:
        raw = f.read(8)
        if len(raw) != 8:
            fail(f"{path}: truncated safetensors file")
        (length,) = struct.unpack("<Q", raw)
        header = f.read(length)
        if len(header) != length:
            fail(f"{path}: header length runs past the end of the file")
    return json.loads(header)


def import_torch():
    try:
        import torch
        import transformers
    except ImportError as e:
        fail(f"PyTorch and transformers are needed for this mode ({e})")
    return torch, transformers


def load_tokenizer_ids(tokenizer_dir):
    """(bos_id, eos_id, vocab_size) of a LazyScope checkpoint's tokenizer."""
    tok = read_json(os.path.join(tokenizer_dir, "tokenizer.json"), "tokenizer.json")
    vocab = tok.get("model", {}).get("vocab", {})
    added = {t["content"]: t["id"] for t in tok.get("added_tokens", [])}
    size = max([*vocab.values(), *added.values()]) + 1
    config_path = os.path.join(tokenizer_dir, "config.json")
    bos = eos = None
    if os.path.exists(config_path):
        config = read_json(config_path, "config.json")
        bos = config.get("bos_token_id")
        eos = config.get("eos_token_id")
        if isinstance(eos, list):
            eos = eos[0] if eos else None
    bos = bos if bos is not None else added.get("<|begin_of_text|>")
    eos = eos if eos is not None else added.get("<|end_of_text|>")
    if bos is None or eos is None:
        fail(f"{tokenizer_dir}: cannot find BOS/EOS token ids")
    return bos, eos, size


def make_checkpoint(args):
    torch, transformers = import_torch()
    from transformers import LlamaConfig, LlamaForCausalLM

    bos, eos, tokenizer_vocab = load_tokenizer_ids(args.tokenizer_from)
    vocab = max(args.vocab, tokenizer_vocab)
    config_dict = {
        "architectures": ["LlamaForCausalLM"],
        "model_type": "llama",
        "vocab_size": vocab,
        "hidden_size": args.hidden,
        "intermediate_size": args.intermediate,
        "num_hidden_layers": args.layers,
        "num_attention_heads": args.heads,
        "num_key_value_heads": args.kv_heads,
        "head_dim": args.hidden // args.heads,
        "max_position_embeddings": 131072,
        "rms_norm_eps": 1e-5,
        "hidden_act": "silu",
        "rope_theta": 500000.0,
        "rope_scaling": {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
                         "high_freq_factor": 4.0, "original_max_position_embeddings": 8192},
        "tie_word_embeddings": False,
        "attention_bias": False,
        "mlp_bias": False,
        "initializer_range": args.init_std,
        "bos_token_id": bos,
        "eos_token_id": eos,
    }
    if int(transformers.__version__.split(".")[0]) >= 5:
        # transformers 5 keeps theta and scaling together in rope_parameters.
        rope = dict(config_dict.pop("rope_scaling"))
        rope["rope_theta"] = config_dict.pop("rope_theta")
        config_dict["rope_parameters"] = rope
    config = LlamaConfig.from_dict(config_dict)
    # Whatever layout this version uses, llama3 scaling and theta 500000 must survive.
    rope = getattr(config, "rope_parameters", None) or getattr(config, "rope_scaling", None) or {}
    theta = rope.get("rope_theta", getattr(config, "rope_theta", None)) if isinstance(rope, dict) else None
    if not isinstance(rope, dict) or rope.get("rope_type", rope.get("type")) != "llama3" or theta != 500000.0:
        fail(f"transformers {transformers.__version__} lost the llama3 rope settings: {rope}, theta {theta}")

    torch.manual_seed(args.seed)
    model = LlamaForCausalLM(config)
    with torch.no_grad():
        # Norm weights away from 1 so that a loader ignoring them would show.
        for name, p in model.named_parameters():
            if name.endswith("norm.weight"):
                p.copy_(1.0 + 0.1 * torch.randn_like(p))
    model = model.to(torch.bfloat16)

    os.makedirs(args.out, exist_ok=True)
    for stale in os.listdir(args.out):
        if stale.endswith(".safetensors") or stale == "model.safetensors.index.json":
            os.remove(os.path.join(args.out, stale))
    model.save_pretrained(args.out, max_shard_size=args.max_shard_size)

    index_path = os.path.join(args.out, "model.safetensors.index.json")
    if not os.path.exists(index_path):
        fail(f"save_pretrained wrote no shard index; lower --max-shard-size (now {args.max_shard_size})")
    shards = sorted(set(read_json(index_path, "index")["weight_map"].values()))
    if len(shards) < 2:
        fail(f"only {len(shards)} shard written; lower --max-shard-size")
    for shard in shards:
        header = safetensors_header(os.path.join(args.out, shard))
        dtypes = {v["dtype"] for k, v in header.items() if k != "__metadata__"}
        if dtypes != {"BF16"}:
            fail(f"{shard}: expected only BF16 tensors, found {sorted(dtypes)}")

    for name in ("tokenizer.json", "tokenizer_config.json"):
        src = os.path.join(args.tokenizer_from, name)
        if os.path.exists(src):
            shutil.copyfile(src, os.path.join(args.out, name))
    if not os.path.exists(os.path.join(args.out, "tokenizer.json")):
        fail(f"{args.tokenizer_from} has no tokenizer.json")

    # Token ids as docs/formats.md describes them: prefix (BOS included), documents, query.
    rng = random.Random(args.seed)
    normal = [i for i in range(tokenizer_vocab) if i not in (bos, eos)]
    request = {
        "prefix_ids": [bos] + [rng.choice(normal) for _ in range(5)],
        "document_ids": [[rng.choice(normal) for _ in range(n)] for n in (23, 17, 30)],
        "order": [0, 1, 2],
        "query_ids": [rng.choice(normal) for _ in range(9)],
        "max_new_tokens": 4,
    }
    with open(os.path.join(args.out, "request_ids.json"), "w") as f:
        json.dump(request, f, indent=1)
    saved = read_json(os.path.join(args.out, "config.json"), "config.json")
    print(f"wrote {args.out}: {len(shards)} bf16 shards, transformers {transformers.__version__}, "
          f"rope keys in config.json: {[k for k in ('rope_scaling', 'rope_parameters', 'rope_theta') if k in saved]}")
    print(f"request with token ids: {os.path.join(args.out, 'request_ids.json')}")


def prompt_ids(request, model_dir):
    """The full-mode prompt of a request file (docs/formats.md), as token ids."""
    if "query_ids" in request or "prefix_ids" in request or "document_ids" in request:
        prefix = request.get("prefix_ids", [])
        documents = request.get("document_ids", [])
        query = request.get("query_ids", [])
    else:
        try:
            from tokenizers import Tokenizer
        except ImportError:
            fail("the request holds text; the `tokenizers` package is needed to tokenize it")
        tok = Tokenizer.from_file(os.path.join(model_dir, "tokenizer.json"))
        # BOS only on the prefix, as LazyScope does; the post-processor decides if there is one.
        with_bos = tok.encode("", add_special_tokens=True).ids
        prefix = with_bos + tok.encode(request.get("prefix", "") or "", add_special_tokens=False).ids
        documents = [tok.encode(d, add_special_tokens=False).ids for d in request.get("documents", [])]
        query = tok.encode(request.get("query", ""), add_special_tokens=False).ids
    order = request.get("order")
    if order is None:
        order = list(range(len(documents)))
    ids = list(prefix)
    for i in order:
        if not 0 <= i < len(documents):
            fail(f"request order index {i} out of range ({len(documents)} documents)")
        ids += documents[i]
    ids += query
    if not ids:
        fail("the request gives no tokens")
    return ids


def run_reference(args):
    torch, transformers = import_torch()
    from transformers import LlamaForCausalLM

    request = read_json(args.request, "request")
    ids = prompt_ids(request, args.model)
    device = "cuda" if torch.cuda.is_available() and not args.cpu else "cpu"
    major = int(transformers.__version__.split(".")[0])
    dtype_kw = {"dtype": torch.float64} if major >= 5 else {"torch_dtype": torch.float64}
    model = LlamaForCausalLM.from_pretrained(args.model, attn_implementation="eager", **dtype_kw)
    model = model.to(device).eval()
    if next(model.parameters()).dtype != torch.float64:
        fail("the model did not load in float64")
    vocab = model.config.vocab_size
    if max(ids) >= vocab or min(ids) < 0:
        fail(f"token ids outside the vocabulary ({vocab})")
    with torch.no_grad():
        out = model(input_ids=torch.tensor([ids], dtype=torch.long, device=device), use_cache=False)
    logits = out.logits[0, -1].to(torch.float64).cpu().tolist()
    result = {
        "mode": "full",
        "backend": f"transformers {transformers.__version__} {device} float64",
        "prompt_tokens": len(ids),
        "prompt_ids": ids,
        "prompt_last_logits": logits,
        "argmax": max(range(len(logits)), key=logits.__getitem__),
    }
    with open(args.out, "w") as f:
        json.dump(result, f)
    print(f"reference logits for {len(ids)} prompt tokens on {device} -> {args.out} "
          f"(argmax {result['argmax']})")


def compare(args):
    ref = read_json(args.reference, "reference")
    got = read_json(args.lazyscope, "LazyScope logits dump")
    for name, d in (("reference", ref), ("LazyScope dump", got)):
        if not isinstance(d.get("prompt_last_logits"), list) or not d["prompt_last_logits"]:
            fail(f"{name} has no prompt_last_logits")
    a, b = ref["prompt_last_logits"], got["prompt_last_logits"]
    if "prompt_tokens" in got and got["prompt_tokens"] != ref["prompt_tokens"]:
        fail(f"prompt lengths differ: reference {ref['prompt_tokens']}, LazyScope {got['prompt_tokens']}")
    # LazyScope may size logits by the tokenizer; compare the common prefix and say so.
    n = min(len(a), len(b))
    if len(a) != len(b):
        print(f"note: logit vector lengths differ ({len(a)} vs {len(b)}); comparing the first {n}")
    diffs = [abs(float(x) - float(y)) for x, y in zip(a[:n], b[:n])]
    worst = max(range(n), key=diffs.__getitem__)
    arg_a = max(range(n), key=lambda i: a[i])
    arg_b = max(range(n), key=lambda i: b[i])
    top2 = sorted(a[:n], reverse=True)[:2]
    print(f"max-abs diff {diffs[worst]:.3e} at token {worst} (reference {a[worst]:.6f}, LazyScope {b[worst]:.6f})")
    print(f"mean-abs diff {sum(diffs) / n:.3e}; logit range [{min(a):.4f}, {max(a):.4f}]")
    print(f"argmax reference {arg_a}, LazyScope {arg_b} ({'same' if arg_a == arg_b else 'DIFFERENT'}; "
          f"reference top-2 margin {top2[0] - top2[1]:.3e})")
    ok = diffs[worst] <= args.tol
    print(("PASS" if ok else "FAIL") + f": max-abs diff {'<=' if ok else '>'} {args.tol:g}")
    sys.exit(0 if ok else 1)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="mode", required=True)

    def add_make_args(p):
        p.add_argument("--out", required=True, help="checkpoint directory to write")
        p.add_argument("--tokenizer-from", required=True,
                       help="LazyScope checkpoint directory whose tokenizer.json is copied")
        p.add_argument("--seed", type=int, default=0)
        p.add_argument("--vocab", type=int, default=0, help="config vocab_size (at least the tokenizer's)")
        p.add_argument("--hidden", type=int, default=128)
        p.add_argument("--intermediate", type=int, default=384)
        p.add_argument("--layers", type=int, default=2)
        p.add_argument("--heads", type=int, default=4)
        p.add_argument("--kv-heads", type=int, default=2)
        p.add_argument("--init-std", type=float, default=0.05,
                       help="weight std (larger than HF's 0.02 so logits are not all near zero)")
        p.add_argument("--max-shard-size", default="300KB", help="save_pretrained shard size")

    make = sub.add_parser("make", help="build and save a small bf16 sharded LlamaForCausalLM")
    add_make_args(make)

    ref = sub.add_parser("reference", help="float64 last-position logits for a request")
    ref.add_argument("--model", required=True, help="HF checkpoint directory")
    ref.add_argument("--request", required=True, help="request JSON (docs/formats.md)")
    ref.add_argument("--out", required=True, help="where to write the reference JSON")
    ref.add_argument("--cpu", action="store_true", help="run on the CPU even with a GPU")

    both = sub.add_parser("all", help="make, then reference on the written request")
    add_make_args(both)
    both.add_argument("--ref-out", required=True)
    both.add_argument("--cpu", action="store_true")

    cmp_ = sub.add_parser("compare", help="max-abs diff of reference vs a LazyScope --dump-logits file")
    cmp_.add_argument("reference")
    cmp_.add_argument("lazyscope")
    cmp_.add_argument("--tol", type=float, default=2e-3)

    args = parser.parse_args()
    if args.mode == "make":
        make_checkpoint(args)
    elif args.mode == "reference":
        run_reference(args)
    elif args.mode == "all":
        make_checkpoint(args)
        args.model, args.request = args.out, os.path.join(args.out, "request_ids.json")
        args.out = args.ref_out
        run_reference(args)
    else:
        compare(args)


if __name__ == "__main__":
    main()

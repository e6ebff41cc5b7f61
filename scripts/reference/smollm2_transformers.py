#!/usr/bin/env python3
"""Full-attention reference logits for a GGUF model (SmolLM2-135M-Instruct by default) from HF
transformers, which dequantizes the same GGUF file to fp32, and a comparison with a LazyScope
logits dump (`lazyscope-cli generate --mode full --dump-logits FILE`, docs/formats.md).

Needs: torch, transformers, and the `gguf` package (transformers reads GGUF through it).

  # reference logits at the last position of the given ids, as JSON on stdout
  smollm2_transformers.py --gguf ~/.cache/lazyscope/models/SmolLM2-135M-Instruct.Q4_1.gguf \
      --ids 1,4093,198,...
  # the same, compared with a LazyScope dump of the same prompt (ids from --ids or --ids-file);
  # every step_logits[i] is checked against transformers run over ids + generated_ids[:i]
  smollm2_transformers.py --gguf FILE --ids-file prompt_ids.json --compare dump.json

Exit status 1 when --compare is given and the max-abs difference exceeds --tolerance (1e-2).
"""
import argparse
import json
import os
import sys


def parse_args():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--gguf", default=os.path.expanduser(
        "~/.cache/lazyscope/models/SmolLM2-135M-Instruct.Q4_1.gguf"))
    p.add_argument("--ids", help="comma-separated prompt token ids")
    p.add_argument("--ids-file", help="JSON list of prompt token ids (or a request file with prompt ids)")
    p.add_argument("--text", help="tokenize this text with transformers' GGUF tokenizer instead")
    p.add_argument("--compare", help="LazyScope logits dump to compare with")
    p.add_argument("--device", default="cpu", help="cpu (default) or cuda; fp32 either way, TF32 off")
    p.add_argument("--tolerance", type=float, default=1e-2)
    p.add_argument("--out", help="write the reference JSON here instead of stdout")
    return p.parse_args()


def prompt_ids(args, tokenizer_loader):
    if args.ids:
        return [int(x) for x in args.ids.split(",") if x.strip()]
    if args.ids_file:
        with open(args.ids_file) as f:
            data = json.load(f)
        if isinstance(data, dict):  # a request file with token ids (docs/formats.md)
            order = data.get("order") or list(range(len(data["document_ids"])))
            ids = list(data.get("prefix_ids", []))
            for i in order:
                ids += data["document_ids"][i]
            return ids + list(data["query_ids"])
        return [int(x) for x in data]
    if args.text is not None:
        return tokenizer_loader().encode(args.text, add_special_tokens=False)
    sys.exit("give --ids, --ids-file or --text")


def main():
    args = parse_args()
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    directory, name = os.path.split(os.path.abspath(args.gguf))

    def tokenizer_loader():
        return AutoTokenizer.from_pretrained(directory, gguf_file=name)

    ids = prompt_ids(args, tokenizer_loader)
    dump = None
    generated = []
    if args.compare:
        with open(args.compare) as f:
            dump = json.load(f)
        generated = list(dump.get("generated_ids", []))
        if dump.get("prompt_tokens") not in (None, len(ids)):
            sys.exit(f"the dump has {dump['prompt_tokens']} prompt tokens but {len(ids)} ids were given")

    model = AutoModelForCausalLM.from_pretrained(directory, gguf_file=name, torch_dtype=torch.float32)
    model.to(args.device).eval()
    # Eager attention: the plain softmax(QK^T)V reference, no fused kernels.
    if hasattr(model.config, "_attn_implementation"):
        model.config._attn_implementation = "eager"
    sequence = ids + generated  # step i is the distribution at position len(ids) - 1 + i
    with torch.no_grad():
        logits = model(torch.tensor([sequence], device=args.device)).logits[0].float().cpu()
    last = logits[len(ids) - 1]
    reference = {
        "model": args.gguf,
        "prompt_tokens": len(ids),
        "prompt_ids": ids,
        "prompt_last_logits": last.tolist(),
        "argmax": int(last.argmax()),
        "top5": torch.topk(last, 5).indices.tolist(),
    }

    if dump is not None:
        steps = dump.get("step_logits") or [dump["prompt_last_logits"]]
        worst, rows = 0.0, []
        for i, ours in enumerate(steps):
            position = len(ids) - 1 + i
            if position >= logits.shape[0]:
                break
            ref = logits[position]
            ours_t = torch.tensor(ours, dtype=torch.float32)
            diff = float((ours_t - ref).abs().max())
            worst = max(worst, diff)
            rows.append({"step": i, "max_abs": diff, "argmax_ours": int(ours_t.argmax()),
                         "argmax_ref": int(ref.argmax())})
        first = float((torch.tensor(dump["prompt_last_logits"]) - last).abs().max())
        reference["comparison"] = {"prompt_last_max_abs": first, "max_abs_over_steps": worst,
                                   "steps": rows, "tolerance": args.tolerance,
                                   "pass": worst <= args.tolerance and first <= args.tolerance}
        print(f"prompt_last_logits max-abs {first:.3e}; over {len(rows)} steps {worst:.3e}; "
              f"argmax agree {sum(r['argmax_ours'] == r['argmax_ref'] for r in rows)}/{len(rows)}",
              file=sys.stderr)

    text = json.dumps(reference)
    if args.out:
        with open(args.out, "w") as f:
            f.write(text)
    else:
        print(text)
    if dump is not None and not reference["comparison"]["pass"]:
        sys.exit(1)


if __name__ == "__main__":
    main()

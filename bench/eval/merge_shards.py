#!/usr/bin/env python3
"""Combines `lazyscope-cli eval --json` files that ran parts of one evaluation (question shards,
or configurations in separate processes) into one table.

Each configuration's figures are recomputed from the per-question answers of every file that ran
it: EM, containment and F1 means, recall@k, the token hit ratio (cached over counted prompt
tokens), TTFT p50 and output tokens/s (generated tokens over the files' seconds for that
configuration). Files named after --untimed add answers only: their clocks (another machine, a
loaded one) stay out of TTFT and tokens/s. A question answered twice for one configuration is an
error. Lazy vs materialized is read from each file's per-question verdicts.

usage: merge_shards.py OUT.json FILE... [--untimed FILE...]
"""
import json
import statistics
import sys


def main(argv):
    if len(argv) < 3:
        sys.exit(__doc__)
    out_path, rest = argv[1], argv[2:]
    timed, untimed = [], []
    target = timed
    for a in rest:
        if a == "--untimed":
            target = untimed
            continue
        target.append(a)
    files = [(p, json.load(open(p)), True) for p in timed] + [(p, json.load(open(p)), False) for p in untimed]

    keys = []
    answers = {}  # key -> qid -> answer
    questions = {}  # qid -> question entry (without answers)
    seconds = {}
    timed_ids = {}
    identity = {}  # qid -> verdict dict
    meta = None
    for path, j, is_timed in files:
        meta = meta or j
        for c in j["configurations"]:
            k = c["key"]
            if k not in keys:
                keys.append(k)
            if is_timed:
                seconds[k] = seconds.get(k, 0.0) + c.get("seconds", 0.0)
        for q in j["questions"]:
            qid = q["id"]
            entry = questions.setdefault(qid, {x: q[x] for x in q if x not in ("answers", "lazy_vs_materialized", "disagree")})
            for k, a in q["answers"].items():
                slot = answers.setdefault(k, {})
                if qid in slot:
                    sys.exit(f"{path}: question {qid} answered twice under {k}")
                slot[qid] = a
                if is_timed:
                    timed_ids.setdefault(k, set()).add(qid)
            if "lazy_vs_materialized" in q:
                identity[qid] = q["lazy_vs_materialized"]

    def summary(k):
        got = answers.get(k, {})
        qs = list(got)
        n = len(qs)
        mean = lambda f: sum(got[q][f] for q in qs) / n if n else 0.0
        with_gold = [q for q in qs if questions[q].get("gold_passages")]
        recall = sum(questions[q]["recall_at_k"] for q in with_gold) / len(with_gold) if with_gold else 0.0
        cached = sum(got[q].get("cached_tokens", 0) for q in qs)
        counted = sum(got[q].get("cache_prompt_tokens", 0) for q in qs)
        tq = sorted(timed_ids.get(k, set()))
        ttft = statistics.median([got[q]["ttft_ms"] for q in tq]) if tq else 0.0
        generated = sum(got[q]["generated_tokens"] for q in tq)
        secs = seconds.get(k, 0.0)
        return {
            "key": k, "questions": n, "timed_questions": len(tq),
            "exact_match": mean("exact_match"), "contains": mean("contains"), "f1": mean("f1"),
            "recall_at_k": recall, "token_hit_ratio": cached / counted if counted else 0.0,
            "ttft_p50_ms": ttft, "output_tokens_per_s": generated / secs if secs else 0.0,
            "seconds": secs,
        }

    configs = [summary(k) for k in keys]
    by_key = {c["key"]: c for c in configs}
    flips = {q: v for q, v in identity.items() if not v["identical"]}
    compared = [q for q in identity]
    token_flips = [q for q in compared if answers["block/lazy"][q]["ids"] != answers["block/materialized"][q]["ids"]] \
        if "block/lazy" in answers and "block/materialized" in answers else []
    merged = {
        "merged_from": [p for p, _, _ in files], "untimed": untimed,
        "model": meta["model"], "backend": meta["backend"], "device": meta.get("device", ""),
        "chat_template": meta["chat_template"], "retrieval": meta["retrieval"], "k": meta["k"],
        "max_new_tokens": meta["max_new_tokens"], "system": meta["system"],
        "concurrency": meta.get("concurrency", 1),
        "configurations": configs,
        "lazy_vs_materialized": {
            "compared": len(compared), "token_flips": sorted(token_flips),
            "max_abs_logit_diff": max([v["max_abs_logit_diff"] for v in identity.values()] or [0.0]),
            "largest_flip_margin": max([max(v["margins"]) for q, v in flips.items() if q in token_flips] or [0.0]),
            "earliest_flip_step": min([v["step"] for q, v in flips.items() if q in token_flips] or [-1]),
        },
        "questions": [dict(questions[q], answers={k: answers[k][q] for k in keys if q in answers[k]})
                      for q in sorted(questions)],
    }
    if "full/none" in by_key and "block/lazy" in by_key:
        f, b = by_key["full/none"], by_key["block/lazy"]
        merged["block_em_loss_points"] = 100 * (f["exact_match"] - b["exact_match"])
        merged["block_contains_loss_points"] = 100 * (f["contains"] - b["contains"])
        merged["block_f1_loss_points"] = 100 * (f["f1"] - b["f1"])
    with open(out_path, "w") as fh:
        json.dump(merged, fh, indent=1, ensure_ascii=False)

    print("| configuration | n | EM % | contains % | F1 % | recall@k | hit % | TTFT p50 | tokens/s |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for c in configs:
        timing = f"{c['ttft_p50_ms'] / 1000:.2f} s | {c['output_tokens_per_s']:.1f}" if c["timed_questions"] else "- | -"
        n = f"{c['questions']}" + (f" ({c['timed_questions']} timed)" if c["timed_questions"] != c["questions"] else "")
        print(f"| {c['key']} | {n} | {100 * c['exact_match']:.1f} | {100 * c['contains']:.1f} | {100 * c['f1']:.1f} | "
              f"{c['recall_at_k']:.3f} | {100 * c['token_hit_ratio']:.1f} | {timing} |")
    lm = merged["lazy_vs_materialized"]
    print(f"\nlazy vs materialized: {lm['compared']} compared, tokens differ on {len(lm['token_flips'])}; "
          f"max |dlogit| {lm['max_abs_logit_diff']:.3g}, largest margin at a flip {lm['largest_flip_margin']:.3g}")
    for key in ("block_em_loss_points", "block_contains_loss_points", "block_f1_loss_points"):
        if key in merged:
            print(f"{key}: {merged[key]:.1f}")


if __name__ == "__main__":
    main(sys.argv)

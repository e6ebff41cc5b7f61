#!/usr/bin/env python3
"""Writes a small, SYNTHETIC HotpotQA-layout file from the bundled sample corpus.

Not HotpotQA data: the sample's own multi-hop questions (kind "multi-hop", two gold passages)
in HotpotQA's distractor layout, so `corpus import --format hotpotqa` and `eval` can be measured
on that layout. Each record's context holds the two gold passages and eight distractors drawn
with a fixed seed, shuffled; supporting facts name the gold passages' titles.

usage: make_hotpotqa_synthetic.py [OUT]   (default: hotpotqa_synthetic.json beside this script)
"""
import json
import pathlib
import random
import re
import sys

here = pathlib.Path(__file__).resolve().parent
sample = here.parent.parent / "corpora" / "sample"
out = pathlib.Path(sys.argv[1]) if len(sys.argv) > 1 else here / "hotpotqa_synthetic.json"

passages = [json.loads(line) for line in (sample / "passages.jsonl").open() if line.strip()]
questions = [json.loads(line) for line in (sample / "questions.jsonl").open() if line.strip()]
by_id = {p["id"]: p for p in passages}
rng = random.Random(16)


def sentences(text):
    return [s for s in re.split(r"(?<=[.!?])\s+", text.strip()) if s]


records = []
for q in questions:
    if q["kind"] != "multi-hop":
        continue
    gold = [by_id[i] for i in q["doc_ids"]]
    others = [p for p in passages if p["id"] not in q["doc_ids"]]
    context = gold + rng.sample(others, 8)
    rng.shuffle(context)
    records.append({
        "_id": "synthetic-" + q["id"],
        "question": q["question"],
        "answer": q["answers"][0],
        "type": "bridge",
        "level": "synthetic",
        "supporting_facts": [[p["title"], 0] for p in gold],
        "context": [[p["title"], sentences(p["text"])] for p in context],
    })
out.write_text(json.dumps(records, ensure_ascii=False) + "\n")
print(f"{out}: {len(records)} synthetic HotpotQA-layout records")

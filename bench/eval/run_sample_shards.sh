#!/bin/bash
# The sample's 177 questions on a 16-core CPU (CPU backend, fast kernels), in six processes of
# 2-4 threads: full/none in four shards (no history: sharding changes nothing), block/lazy +
# block/materialized in two halves (each half's pools start empty); each stopped (Ctrl-C, keeping
# what finished) after T seconds. An older build's figures (32.8 / 13.0 / 12.4 % containment, in
# docs/evaluation.md) came from this script on the GPU machine's CPU; the current figures from
# bench/eval/run_identity_and_wording.sh. bench/eval/merge_shards.py combines the JSON files.
# Layout under M: app/lazyscope-cli, share/lazyscope (the build's), lib/ (libraries the machine
# lacks), the model file. Usage: M=DIR T=SECONDS OUT=DIR bench/eval/run_sample_shards.sh
set -u
M=${M:-/tmp/m}; T=${T:-100}; OUT=${OUT:-/tmp/out}
CLI=$M/app/lazyscope-cli
export LD_LIBRARY_PATH=$M/lib HOME=$M/home
mkdir -p $HOME $M/out $OUT
MODEL=${MODEL:-$M/SmolLM2-135M-Instruct.Q4_1.gguf}
Q=$M/share/lazyscope/corpus/sample/questions.jsonl
{ lscpu | grep -E "Model name|^CPU\(s\)"; nproc; date -u; } > $M/out/env.txt
$CLI corpus stats >> $M/out/env.txt 2>&1   # builds the sample's store once, before the parallel runs
sed -n 1,44p $Q > $M/f1.jsonl; sed -n 45,88p $Q > $M/f2.jsonl
sed -n 89,132p $Q > $M/f3.jsonl; sed -n 133,177p $Q > $M/f4.jsonl
sed -n 1,88p $Q > $M/b1.jsonl; sed -n 89,177p $Q > $M/b2.jsonl
common="--model $MODEL --backend cpu --cpu-precision fast --max-new-tokens 16 --kv-budget 1GiB --quiet"
t0=$(date +%s)
for i in 1 2 3 4; do
  timeout -s INT $T $CLI eval $common --questions $M/f$i.jsonl --configs full/none --threads 2 \
    --json $M/out/full$i.json > $M/out/full$i.txt 2>&1 &
done
for i in 1 2; do
  timeout -s INT $T $CLI eval $common --questions $M/b$i.jsonl --configs block/lazy,block/materialized \
    --threads 4 --json $M/out/block$i.json > $M/out/block$i.txt 2>&1 &
done
wait
echo "== runs took $(( $(date +%s) - t0 )) s" >> $M/out/env.txt
cd $M/out && tar czf $OUT/results.tgz *.json *.txt
for f in env full1 full2 full3 full4 block1 block2; do echo "== $f"; tail -14 $M/out/$f.txt; done

#!/bin/bash
# Two measurements over the sample's 177 questions on a 16-core CPU (CPU backend), 16 processes
# of one thread each, side by side, every process stopped (Ctrl-C: the finished questions are
# kept and written) after T seconds:
#  1. Lazy vs materialized on the exact fp32 reference (--cpu-precision exact): block/lazy and
#     block/materialized in E contiguous shards, one request at a time (--concurrency 1, so both
#     policies' logits are kept and compared for every question, not only where tokens differ).
#     Each shard's pools start empty.
#  2. The prompt wording and chat-template setting (fast kernels, the default): full/none and
#     block/lazy under each candidate, each candidate in interleaved shards (question i in shard
#     i mod S, so a shard stopped early still covers the whole set), one request at a time. The
#     default candidate also runs block/materialized: the fast kernels' lazy vs materialized
#     figures come from the same run.
# Answers do not depend on a pool's history (a cached block holds what encoding it again gives),
# so sharding changes the hit ratio and the speed figures, not the answers.
# Layout under M: app/lazyscope-cli, share/lazyscope (the build's), lib/ (libraries the machine
# lacks), the model file. Usage: M=DIR T=SECONDS OUT=DIR bench/eval/run_identity_and_wording.sh
# bench/eval/merge_shards.py combines the JSON files of one measurement.
set -u
M=${M:-/tmp/m}; T=${T:-220}; OUT=${OUT:-/tmp/out}; E=${E:-7}
CLI=$M/app/lazyscope-cli
export LD_LIBRARY_PATH=$M/lib HOME=$M/home OPENBLAS_NUM_THREADS=1
R=$M/out
mkdir -p $HOME $R $OUT
MODEL=${MODEL:-$M/SmolLM2-135M-Instruct.Q4_1.gguf}
Q=${Q:-$M/share/lazyscope/corpus/sample/questions.jsonl}
n=$(wc -l < $Q)
{ lscpu | grep -E "Model name|^CPU\(s\)"; grep -o -m1 -E "avx512_vnni|avx512f " /proc/cpuinfo | sort -u;
  nproc; date -u; sha256sum $MODEL; "$CLI" --version; } > $R/env.txt 2>&1
"$CLI" corpus stats >> $R/env.txt 2>&1   # builds the sample's store once, before the parallel runs
common="--model $MODEL --backend cpu --max-new-tokens 16 --kv-budget ${KV:-1GiB} --quiet --threads 1 --concurrency 1"
t0=$(date +%s)
run() {  # NAME ARGS...: one process, stopped with SIGINT after T seconds; its exit status kept
  local name=$1; shift
  (timeout -s INT $T "$CLI" eval $common "$@" --json $R/$name.json > $R/$name.txt 2>&1
   echo "$name rc=$? after $(( $(date +%s) - t0 )) s" >> $R/rc.txt) &
}
for i in $(seq 0 $((E - 1))); do
  sed -n "$(( i * n / E + 1 )),$(( (i + 1) * n / E ))p" $Q > $M/e$i.jsonl
  run exact$i --cpu-precision exact --questions $M/e$i.jsonl --configs block/lazy,block/materialized
done
shards() {  # NAME S ARGS...: S interleaved shards of one candidate
  local name=$1 s=$2; shift 2
  for r in $(seq 0 $((s - 1))); do
    awk -v s=$s -v r=$r '(NR - 1) % s == r' $Q > $M/$name$r.jsonl
    run $name$r --cpu-precision fast --questions $M/$name$r.jsonl "$@"
  done
}
brief="Answer the question using the documents. Be brief."
shards default 3 --system "$brief" --chat auto --configs full/none,block/lazy,block/materialized
shards plain 2 --system "$brief" --chat off --configs full/none,block/lazy
shards template 2 --system "" --chat auto --configs full/none,block/lazy
shards phrase 2 --system "${PHRASE:-Reply with only the answer, in one to five words.}" \
  --chat auto --configs full/none,block/lazy
wait
echo "== runs took $(( $(date +%s) - t0 )) s" >> $R/env.txt
cd $R && tar czf $OUT/results.tgz *.json *.txt
cat $R/env.txt $R/rc.txt
for f in $R/exact*.txt; do echo "== $f"; grep -E "lazy vs materialized|rror|interrupted" $f; done

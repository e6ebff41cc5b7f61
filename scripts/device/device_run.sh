#!/usr/bin/env bash
# One device-machine call: build the CUDA targets, then run the chosen steps. Logs go to $OUT.
# Usage (on the GPU machine, repo root): scripts/device/device_run.sh STEP...
#   tests     the GPU tests (test_kernels_cuda)
#   sanitize  compute-sanitizer memcheck and racecheck on a subset of the kernel tests
#   bench     bench_cuda_attention and bench_cuda_end_to_end
#   batched   bench_cuda_end_to_end --batched: decode tokens/s by batch size against the weight + K/V bound
#   ttft      bench_cuda_end_to_end --ttft: the cached-RAG TTFT table alone
#   model     bench_cuda_end_to_end --model ${MODEL:-llama-3.2-1b}: one model's decode row and variants
#   context   batch-1 decode of llama-3.1-8b at a 10K-token context: the benchmark's greedy and logits
#             paths, and generate --synthetic llama-3.1-8b with and without logits kept (--dump-logits)
#   peers     bench/peers_sdpa.py (PyTorch SDPA flash / cuDNN on the same shapes)
#   profile   Nsight Compute sections of one decode and one prefill launch (see below)
#   trace     generate --trace-gpu on a synthetic Llama-3.2-1B RAG request: session report, Chrome trace
#             and the top kernels by GPU time
#   all       every step above
# Environment: MEMCHECK_FILTER / RACECHECK_FILTER (gtest filters), RACECHECK=0 (memcheck only).
set -o pipefail
steps=" $* "
[ "$steps" = "  " ] && steps=" all "
[[ "$steps" == *" all "* ]] && steps=" tests sanitize bench batched context peers profile trace "  # bench covers ttft and model
has() { [[ "$steps" == *" $1 "* ]]; }
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
# At most 8 files come back from $OUT: the build log, the environment and the trace reports stay in
# $LOGS (build-dev/logs); round.log (the caller's tee), the tests, sanitizer and bench logs go back.
LOGS=build-dev/logs
mkdir -p $LOGS
export PATH=/usr/local/cuda/bin:$PATH
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv > "$LOGS/env.txt" 2>&1
B=build-dev
t0=$(date +%s)
cmake -S . -B $B -G Ninja -DLAZYSCOPE_WITH_GUI=OFF -DCMAKE_CUDA_ARCHITECTURES=90 -DLAZYSCOPE_PYTHON=python3 \
  -DLAZYSCOPE_BUILD_BENCH=ON > "$LOGS/build.log" 2>&1 || { tail -20 "$LOGS/build.log"; exit 1; }
targets="lazyscope_cuda test_kernels_cuda bench_cuda_attention bench_cuda_end_to_end lazyscope-cli"
ninja -C $B -j16 -k 0 $targets >> "$LOGS/build.log" 2>&1 || echo "BUILD: some targets failed (see build.log)"
grep -E "error|FAILED|spill" "$LOGS/build.log" | grep -v " 0 bytes spill" | head -30
echo "== build took $(( $(date +%s) - t0 )) s"
T=$B/tests/test_kernels_cuda
if has tests; then
  timeout 200 $T --gtest_brief=1 2>&1 | tee "$OUT/tests.log" | tail -40
  echo "== tests rc=$?"
fi
if has sanitize; then
  echo "== memcheck"
  timeout 120 compute-sanitizer --tool memcheck --error-exitcode 9 $T \
    --gtest_filter="${MEMCHECK_FILTER:-*D128_gqa4_bs16_small_lazy*:*D64_gqa8_bs32_large_lazy*:*D128_gqa1_bs32_zero_plain*:*D128_gqa7*:*D32_gqa3*:*KvCache*:*KvWrite*:*HeadDims/BackendTest.Logits*D64_gqa4*:*BatchedDecode*batch3_*:*BatchedDecode*batch16_mixed*:*Argmax*}" \
    > "$LOGS/memcheck.log" 2>&1; echo "memcheck rc=$?"; grep -E "ERROR SUMMARY|PASSED|FAILED" "$LOGS/memcheck.log" | tail -4
  [ "${RACECHECK:-1}" = 0 ] && echo "racecheck skipped (RACECHECK=0)"
  [ "${RACECHECK:-1}" = 0 ] || { echo "== racecheck"; timeout 120 compute-sanitizer --tool racecheck --error-exitcode 9 $T \
    --gtest_filter="${RACECHECK_FILTER:-Kernels/*D128_gqa4_bs16_small_lazy*:Kernels/*D64_gqa8_bs32_large_lazy*:Kernels/*D128_gqa1_bs32_zero_plain*:Kernels/*D32_gqa3*:*KvCacheTest*}" \
    > "$LOGS/racecheck.log" 2>&1; echo "racecheck rc=$?"; grep -E "RACECHECK SUMMARY|PASSED|FAILED" "$LOGS/racecheck.log" | tail -4; }
  cat "$LOGS/memcheck.log" "$LOGS/racecheck.log" > "$OUT/sanitize.log" 2>/dev/null
fi
if has bench; then
  timeout 150 $B/bench/bench_cuda_attention 2>&1 | tee "$OUT/bench_attention.md"
fi
if has peers; then
  timeout 120 python3 bench/peers_sdpa.py 2>&1 | tee "$OUT/peers_sdpa.md"
fi
if has bench; then
  timeout 200 $B/bench/bench_cuda_end_to_end 2>&1 | tee "$OUT/bench_end_to_end.md"
fi
if has batched && ! has bench; then
  timeout 150 $B/bench/bench_cuda_end_to_end --batched 2>&1 | tee "$OUT/bench_batched.md"
fi
if has ttft && ! has bench; then
  timeout 120 $B/bench/bench_cuda_end_to_end --ttft 2>&1 | tee "$OUT/bench_ttft.md"
fi
if has model && ! has bench; then
  timeout 120 $B/bench/bench_cuda_end_to_end --model "${MODEL:-llama-3.2-1b}" 2>&1 | tee "$OUT/bench_model.md"
fi
if has context; then
  timeout 120 $B/bench/bench_cuda_end_to_end --decode-context 10240 2>&1 | tee "$OUT/decode_context.md"
  # The same context through the CLI: five 2,048-token documents and a 64-token query, 128 new tokens.
  python3 -c 'import json; d=[list(range(1000+i*3000, 1000+i*3000+2048)) for i in range(5)]
print(json.dumps({"document_ids":d,"query_ids":list(range(50,114)),"max_new_tokens":128}))' > "$LOGS/context_request.json"
  CLI=$B/app/lazyscope-cli
  for keep in greedy logits; do
    extra=""
    [ $keep = logits ] && extra="--dump-logits $LOGS/context_logits.json"
    echo "generate, $keep:" | tee -a "$OUT/decode_context.md"
    timeout 120 $CLI generate --synthetic llama-3.1-8b --backend cuda --kv-budget 4GiB \
      --request "$LOGS/context_request.json" $extra 2>&1 | grep -E "ms/token|rror" | tee -a "$OUT/decode_context.md"
  done
fi
if has profile; then
  # One launch each, picked by kernel name and launch count in bench_cuda_attention's order: decode
  # batch 16 x 8K plain (24 configurations of 213 launches before it, then 3 warm-ups) and causal-16K
  # plain prefill (3 shapes of 468 launches, then 3 warm-ups). Sections only, clocks as found.
  S="--section SpeedOfLight --section ComputeWorkloadAnalysis --section MemoryWorkloadAnalysis --section Occupancy --section WarpStateStats --section LaunchStats"
  timeout 120 ncu --clock-control none $S -k "regex:${PROFILE_DECODE_KERNEL:-decode_kernel}" \
    --launch-skip "${PROFILE_DECODE_SKIP:-5115}" --launch-count 1 $B/bench/bench_cuda_attention --decode \
    > "$LOGS/ncu_decode.txt" 2>&1; echo "ncu decode rc=$?"
  # Batch 4 x 1K plain and lazy (configurations 10 and 11): where the lazy overhead shows.
  for skip in 2133 2346; do
    timeout 90 ncu --clock-control none --section SpeedOfLight --section InstructionStats --section LaunchStats \
      -k "regex:decode_kernel" --launch-skip $skip --launch-count 1 $B/bench/bench_cuda_attention --decode \
      >> "$LOGS/ncu_decode.txt" 2>&1; echo "ncu decode (skip $skip) rc=$?"
  done
  timeout 120 ncu --clock-control none $S -k "regex:${PROFILE_PREFILL_KERNEL:-prefill_kernel}" \
    --launch-skip "${PROFILE_PREFILL_SKIP:-1407}" --launch-count 1 $B/bench/bench_cuda_attention \
    > "$LOGS/ncu_prefill.txt" 2>&1; echo "ncu prefill rc=$?"
  cat "$LOGS/ncu_decode.txt" "$LOGS/ncu_prefill.txt" > "$OUT/ncu.txt"
fi
if has trace; then
  python3 -c 'import json; d=[list(range(100+i*7, 100+i*7+300)) for i in range(4)]
print(json.dumps({"prefix_ids":[1,2,3],"document_ids":d,"query_ids":list(range(40,72)),"max_new_tokens":16}))' > "$LOGS/rag_request.json"
  CLI=$B/app/lazyscope-cli
  for policy in lazy materialized; do
    timeout 120 $CLI generate --synthetic llama-3.2-1b --backend cuda --kv-budget 1GiB --request "$LOGS/rag_request.json" \
      --policy $policy --trace-gpu --record "$LOGS/trace_$policy.db" 2>&1 | tail -4
    $CLI session trace "$LOGS/trace_$policy.db" --out "$LOGS/trace_$policy.json" 2>&1 | tail -1
    python3 - "$LOGS/trace_$policy.db" <<'PY'
import sqlite3, sys
db = sqlite3.connect(sys.argv[1])
print("GPU time by kernel (top 8) and by category:", sys.argv[1])
for name, n, ms in db.execute("SELECT name, COUNT(*), SUM(duration_ms) FROM spans WHERE category='kernel' GROUP BY name ORDER BY 3 DESC LIMIT 8"):
    print(f"  {ms:9.3f} ms  {n:5d}x  {name}")
for cat, n, ms in db.execute("SELECT category, COUNT(*), SUM(duration_ms) FROM spans WHERE category IN ('kernel','memcpy','memset','range') GROUP BY category"):
    print(f"  {cat:8s} {n:6d} spans {ms:9.3f} ms")
PY
  done
fi
echo "== total $(( $(date +%s) - t0 )) s"

#!/usr/bin/env bash
# One device-machine call for the serving engine: build, then the paper preset per policy on the
# GPU beside its accounting model, the 8B shape at a budget of 16 documents, and bench_serving.
# Usage (GPU machine, repo root): bench/serving_device_run.sh [BENCH_SECONDS]. Logs go to $OUT.
set -o pipefail
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
export PATH=/usr/local/cuda/bin:$PATH
B=build-dev
t0=$(date +%s)
{ nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv; } > "$OUT/env.txt" 2>&1
cmake -S . -B $B -G Ninja -DCMAKE_BUILD_TYPE=Release -DLAZYSCOPE_WITH_GUI=OFF -DCMAKE_CUDA_ARCHITECTURES=90 \
  -DLAZYSCOPE_PYTHON=python3 > "$OUT/build.log" 2>&1 || { tail -30 "$OUT/build.log"; exit 1; }
ninja -C $B -j16 lazyscope-cli bench_serving test_engine_serving >> "$OUT/build.log" 2>&1 || { grep -E "error" -A3 "$OUT/build.log" | head -40; exit 1; }
echo "== build took $(( $(date +%s) - t0 )) s"
CLI=$B/app/lazyscope-cli
{
  echo "== test_engine_serving"; timeout 60 $B/tests/test_engine_serving --gtest_brief=1 2>&1 | tail -5
  for backend in cuda accounting; do
    echo "== paper preset, $backend"
    timeout 150 $CLI workload --preset paper --backend $backend --json "$OUT/paper_$backend.json" 2>&1
  done
  for backend in cuda accounting; do
    echo "== 8B, budget of 16 documents (4 GiB), $backend"
    timeout 90 $CLI workload --preset paper --backend $backend --shape llama-3.1-8b --synthetic llama-3.1-8b \
      --kv-budget 4GiB --policies materialized,lazy --json "$OUT/paper8b_$backend.json" 2>&1
  done
} 2>&1 | tee "$OUT/workload.log"
echo "== bench_serving"
timeout $(( ${1:-150} + 60 )) $B/bench/bench_serving --seconds "${1:-150}" 2>&1 | tee "$OUT/bench_serving.md"
echo "== total $(( $(date +%s) - t0 )) s"

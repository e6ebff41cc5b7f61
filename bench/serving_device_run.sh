#!/usr/bin/env bash
# One device-machine call for the serving engine: build, then the chosen steps. Logs go to $OUT.
# Usage (GPU machine, repo root): bench/serving_device_run.sh STEP... [--bench-seconds N]
#   paper     --preset paper per policy on the GPU and in accounting mode; the 8B shape at a
#             budget of 16 documents (4 GiB), materialized and lazy
#   validate  workloads the step-time model was not fitted to, on the GPU and in accounting mode:
#             the window layout (paper preset otherwise), and Zipf alpha 1.1 at concurrency 8
#   bench     bench_serving (TTFT/throughput vs concurrency and rate, decode tok/s vs batch)
#   decode    bench_serving --decode-only (decode tok/s vs batch 1-64, scheduler host time per step)
set -o pipefail
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
steps=" "
seconds=150
while [ $# -gt 0 ]; do
  case "$1" in
    --bench-seconds) seconds=$2; shift 2 ;;
    *) steps="$steps$1 "; shift ;;
  esac
done
[ "$steps" = " " ] && steps=" paper bench "
has() { [[ "$steps" == *" $1 "* ]]; }
export PATH=/usr/local/cuda/bin:$PATH
B=build-dev
t0=$(date +%s)
{ nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv; } > "$OUT/env.txt" 2>&1
cmake -S . -B $B -G Ninja -DCMAKE_BUILD_TYPE=Release -DLAZYSCOPE_WITH_GUI=OFF -DCMAKE_CUDA_ARCHITECTURES=90 \
  -DLAZYSCOPE_PYTHON=python3 -DLAZYSCOPE_BUILD_BENCH=ON > "$OUT/build.log" 2>&1 || { tail -30 "$OUT/build.log"; exit 1; }
ninja -C $B -j16 lazyscope-cli bench_serving test_engine_serving >> "$OUT/build.log" 2>&1 || { grep -E "error" -A3 "$OUT/build.log" | head -40; exit 1; }
echo "== build took $(( $(date +%s) - t0 )) s"
CLI=$B/app/lazyscope-cli
echo "== test_engine_serving (the CUDA serving test included)"
timeout 90 $B/tests/test_engine_serving --gtest_brief=1 2>&1 | tail -4
timeout 60 $B/tests/test_engine_serving --gtest_filter='BatchedTokens.*' 2>&1 | grep -E "OK|FAILED|SKIPPED|differs|Failure" | head -12
if has paper; then
  {
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
fi
if has validate; then
  {
    for backend in cuda accounting; do
      echo "== window layout, paper preset otherwise, $backend"
      timeout 100 $CLI workload --preset paper --layout window --policies positional,materialized,lazy \
        --backend $backend --json "$OUT/window_$backend.json" 2>&1
      echo "== zipf alpha 1.1, concurrency 8, 120 requests, 32 output tokens, $backend"
      timeout 100 $CLI workload --preset paper --zipf 1.1 --concurrency 8 --requests 120 --output-tokens 32 \
        --policies materialized,lazy --backend $backend --json "$OUT/zipf11_$backend.json" 2>&1
    done
  } 2>&1 | tee "$OUT/validate.log"
fi
if has decode; then
  echo "== bench_serving --decode-only"
  timeout 120 $B/bench/bench_serving --decode-only 2>&1 | tee "$OUT/bench_decode.md"
fi
if has bench; then
  echo "== bench_serving"
  timeout $(( seconds + 60 )) $B/bench/bench_serving --seconds "$seconds" 2>&1 | tee "$OUT/bench_serving.md"
fi
echo "== total $(( $(date +%s) - t0 )) s"

#!/usr/bin/env bash
# The GPU side of the sanitizer runs, for the GPU machine (repo root): builds the CUDA test
# binaries and runs every GPU test under each compute-sanitizer tool.
#   scripts/device/sanitize_all.sh [TOOL...]   TOOL: memcheck racecheck initcheck synccheck (default all)
# Env: OUT (logs; default /tmp/out), BUILD (default build-sanitize), SANITIZE_TIMEOUT (seconds per
# tool and binary, default 900), SANITIZE_FILTER (a gtest filter, default every test).
# Prints one line per tool and binary: the sanitizer's error summary and the gtest verdict. Exits
# non-zero when any tool reports an error or a test fails under it. A timeout is reported as
# TIMEOUT, never as a pass.
set -uo pipefail
tools=("$@")
((${#tools[@]})) || tools=(memcheck racecheck initcheck synccheck)
OUT=${OUT:-/tmp/out}
B=${BUILD:-build-sanitize}
limit=${SANITIZE_TIMEOUT:-900}
# CUPTI (the device-trace tests) and compute-sanitizer both attach to the driver's callbacks; those
# tests run unsanitized in scripts/device/device_run.sh.
filter=${SANITIZE_FILTER:-*-DeviceTrace.*}
mkdir -p "$OUT"
export PATH=/usr/local/cuda/bin:$PATH
command -v compute-sanitizer > /dev/null || { echo "compute-sanitizer not found"; exit 2; }
nvidia-smi -L > /dev/null 2>&1 || { echo "no GPU: nothing to sanitize"; exit 2; }
# Line info for the reports; optimisation as shipped so the kernels tested are the real ones.
cmake -S . -B "$B" -G Ninja -DCMAKE_BUILD_TYPE=Release -DLAZYSCOPE_WITH_GUI=OFF -DLAZYSCOPE_BUILD_BENCH=OFF \
  -DCMAKE_CUDA_ARCHITECTURES=90 -DCMAKE_CUDA_FLAGS=-lineinfo -DLAZYSCOPE_PYTHON=python3 \
  > "$OUT/sanitize_build.log" 2>&1 || { tail -20 "$OUT/sanitize_build.log"; exit 1; }
# Every GPU test lives in test_kernels_cuda (kernels, the CUDA backend, the engine on it).
binaries=(test_kernels_cuda)
ninja -C "$B" -j"$(nproc)" "${binaries[@]}" >> "$OUT/sanitize_build.log" 2>&1 || {
  grep -E "error|FAILED" "$OUT/sanitize_build.log" | head -20
  exit 1
}
failed=0
printf '%-10s %-22s %-8s %s\n' tool binary rc summary
for tool in "${tools[@]}"; do
  extra=()
  case $tool in
    memcheck) extra=(--leak-check full) ;;
    racecheck) extra=(--racecheck-report analysis) ;;
    initcheck | synccheck) ;;
    *) echo "unknown tool $tool"; exit 2 ;;
  esac
  for bin in "${binaries[@]}"; do
    log="$OUT/sanitize_${tool}_${bin}.log"
    timeout "$limit" compute-sanitizer --tool "$tool" "${extra[@]}" --error-exitcode 9 --print-limit 50 \
      "$B/tests/$bin" --gtest_filter="$filter" --gtest_brief=1 > "$log" 2>&1
    rc=$?
    summary=$(grep -E "(ERROR|RACECHECK|INITCHECK|SYNCCHECK|LEAK) SUMMARY" "$log" | tail -1)
    verdict=$(grep -E "^\[  (PASSED|FAILED|SKIPPED) " "$log" | tr '\n' ' ')
    if ((rc == 124)); then
      verdict="TIMEOUT after ${limit}s; $verdict"
      failed=1
    elif ((rc != 0)); then
      failed=1
    fi
    printf '%-10s %-22s %-8s %s | %s\n' "$tool" "$bin" "$rc" "${summary:-no summary}" "$verdict"
  done
done
exit $failed

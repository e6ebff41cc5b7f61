#!/usr/bin/env bash
# The GPU side of the sanitizer runs, for the GPU machine (repo root): builds the CUDA test
# binary and runs every GPU test under each compute-sanitizer tool.
#   scripts/device/sanitize_all.sh [TOOL...]   TOOL: memcheck synccheck initcheck racecheck (default all)
# Env: OUT (logs; default /tmp/out), BUILD (default build-sanitize), SANITIZE_FILTER (a gtest filter,
#   default every test), SANITIZE_BUDGET (seconds for all tools together, default 400: the build
#   plus the tools fit one 10-minute device call), SANITIZE_TIMEOUT (a fixed limit per tool instead
#   of the budget's share).
# The budget is shared as the tools go: each gets what is left divided by the tools still to run,
# so a quick tool leaves its time to the slower ones (racecheck runs last for that reason).
# Prints one line per tool: its exit code, the sanitizer's error summary, how many tests finished
# and the gtest verdict. Exits non-zero when any tool reports an error, a test fails under it, or
# a tool runs out of time: a timeout is reported as TIMEOUT with the tests it finished, never as
# a pass.
set -uo pipefail
tools=("$@")
((${#tools[@]})) || tools=(memcheck synccheck initcheck racecheck)
OUT=${OUT:-/tmp/out}
B=${BUILD:-build-sanitize}
budget=${SANITIZE_BUDGET:-400}
fixed_limit=${SANITIZE_TIMEOUT:-}
# CUPTI (the device-trace tests) and compute-sanitizer both attach to the driver's callbacks; those
# tests run unsanitized in scripts/device/device_run.sh.
filter=${SANITIZE_FILTER:-*-DeviceTrace.*}
for tool in "${tools[@]}"; do
  case $tool in
    memcheck | racecheck | initcheck | synccheck) ;;
    *) echo "unknown tool '$tool' (expected memcheck, racecheck, initcheck or synccheck)"; exit 2 ;;
  esac
done
mkdir -p "$OUT"
export PATH=/usr/local/cuda/bin:$PATH
command -v compute-sanitizer > /dev/null || { echo "compute-sanitizer not found"; exit 2; }
nvidia-smi -L > /dev/null 2>&1 || { echo "no GPU: nothing to sanitize"; exit 2; }
t0=$(date +%s)
# Line info for the reports; optimisation as shipped so the kernels tested are the real ones.
cmake -S . -B "$B" -G Ninja -DCMAKE_BUILD_TYPE=Release -DLAZYSCOPE_WITH_GUI=OFF -DLAZYSCOPE_BUILD_BENCH=OFF \
  -DCMAKE_CUDA_ARCHITECTURES=90 -DCMAKE_CUDA_FLAGS=-lineinfo -DLAZYSCOPE_PYTHON=python3 \
  > "$OUT/sanitize_build.log" 2>&1 || { tail -20 "$OUT/sanitize_build.log"; exit 1; }
# Every GPU test lives in test_kernels_cuda (kernels, the CUDA backend, the engine on it).
bin=test_kernels_cuda
ninja -C "$B" -j"$(nproc)" "$bin" >> "$OUT/sanitize_build.log" 2>&1 || {
  grep -E "error|FAILED" "$OUT/sanitize_build.log" | head -20
  exit 1
}
T="$B/tests/$bin"
total=$("$T" --gtest_filter="$filter" --gtest_list_tests | grep -c '^  ')
echo "build took $(($(date +%s) - t0)) s; $total tests match '$filter'"
# cuBLAS's own nvjet kernels are not ours; racecheck reported hazards inside them before (where this
# compute-sanitizer can leave them out; the line below says whether it did).
not_ours=()
if compute-sanitizer --help 2>&1 | grep -q -- '--kernel-name-exclude'; then
  not_ours=(--kernel-name-exclude kns=nvjet)
  echo "racecheck leaves out cuBLAS's nvjet kernels"
fi
failed=0
left=$budget
printf '%-10s %-5s %-7s %-46s %s\n' tool rc seconds summary "tests finished | verdict"
for i in "${!tools[@]}"; do
  tool=${tools[$i]}
  remaining_tools=$((${#tools[@]} - i))
  limit=${fixed_limit:-$((left / remaining_tools))}
  ((limit < 10)) && limit=10
  extra=()
  case $tool in
    memcheck) extra=(--leak-check full) ;;
    racecheck) extra=(--racecheck-report analysis "${not_ours[@]}") ;;
  esac
  log="$OUT/sanitize_${tool}.log"
  start=$(date +%s)
  # timeout signals its whole process group, so the test binary under the sanitizer stops too;
  # -k: SIGKILL 10 s after SIGTERM if the tool does not exit.
  timeout -k 10 "$limit" compute-sanitizer --tool "$tool" "${extra[@]}" --error-exitcode 9 --print-limit 50 \
    "$T" --gtest_filter="$filter" > "$log" 2>&1
  rc=$?
  took=$(($(date +%s) - start))
  left=$((left - took))
  ((left < 0)) && left=0
  summary=$(grep -E "(ERROR|RACECHECK|INITCHECK|SYNCCHECK|LEAK) SUMMARY" "$log" | tail -1 | sed 's/^========= //')
  finished=$(grep -cE '^\[ +(OK|FAILED|SKIPPED) +\] .* \([0-9]+ ms\)$' "$log")
  verdict=$(grep -E "^\[  (PASSED|FAILED|SKIPPED) " "$log" | tr '\n' ' ')
  if ((rc == 124 || rc == 137)); then
    verdict="TIMEOUT after ${limit}s (last started: $(grep -E '^\[ RUN +\]' "$log" | tail -1 | sed 's/^\[ RUN *\] //'))"
    failed=1
  elif ((rc != 0)); then
    failed=1
  fi
  printf '%-10s %-5s %-7s %-46s %s\n' "$tool" "$rc" "$took" "${summary:-no summary}" \
    "$finished/$total | $verdict"
done
exit $failed

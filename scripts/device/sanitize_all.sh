#!/usr/bin/env bash
# The GPU side of the sanitizer runs, for the GPU machine (repo root): builds the GPU test binaries
# and runs every GPU test under each compute-sanitizer tool, many small test processes at once
# (scripts/device/sanitize_runner.py), after the same tests unsanitized and a few probes of what the
# tools can see (scripts/device/sanitizer_probe.cu).
#   scripts/device/sanitize_all.sh [TOOL...]   TOOL: memcheck synccheck initcheck racecheck (default all)
# The GPU tests: test_kernels_cuda (kernels, the CUDA backend, the engine on it) but DeviceTrace.*,
# and test_engine_serving's BatchedTokens.Cuda*. No other binary has a test that touches the GPU
# (test_engine_runtime's tolerance tests and test_profiler's trace tests are host-only). The
# DeviceTrace tests use CUPTI, which attaches to the driver's callbacks as compute-sanitizer does:
# they run in the unsanitized pass only.
# Env:
#   OUT               logs (default /tmp/out): sanitize_summary.txt, sanitize_logs.tar.gz, build log
#   BUILD             build folder (default build-sanitize); SANITIZE_SKIP_BUILD=1 uses it as it is
#   SANITIZE_BUDGET   seconds for every test process together, from the first (default 420, so that
#                     the build and all four tools fit one 10-minute call); what has not started by
#                     then is reported as not run, a process still running is a TIMEOUT
#   SANITIZE_END_BY   a time (seconds since the epoch) by which the script must end: the budget
#                     shrinks to fit it after the build (for a device call with less time)
#   SANITIZE_JOBS     test processes at once (default: half the cores, at most 8)
#   SANITIZE_CHUNK    tests per process (default 6)
#   SANITIZE_FILTER   gtest filter of test_kernels_cuda's tests (default every GPU test); it may
#                     have negative patterns ("*-Batches/BatchedDecodeTest.*/batch64_*")
#   SANITIZE_SERVING_FILTER  the same for test_engine_serving (default BatchedTokens.Cuda*; "-" none)
# Under initcheck the backend zeroes each cuBLAS GEMM's output just before the GEMM
# (LAZYSCOPE_CUDA_ZERO_GEMM_OUTPUTS=1, kernels/cuda/tool_switches.h): initcheck does not see
# cuBLAS's Hopper kernels store. One backend test runs under initcheck without it too, as the
# control. Racecheck checks cuBLAS's kernels too and counts the race records inside them apart (not
# ours; mbarrier-ordered TMA traffic): leaving them out with --kernel-name-exclude broke the tool in 38
# of 258 tests on 2026-12-02 (see docs/reliability.md). SANITIZE_EXCLUDE_CUBLAS=1 leaves them out.
# Prints the summary: per tool the tests run, passed, failed, skipped, broke the tool and not run,
# and the sanitizer's error count. Exits non-zero unless every tool checked every test clean.
set -uo pipefail
tools=("$@")
((${#tools[@]})) || tools=(memcheck synccheck initcheck racecheck)
OUT=${OUT:-/tmp/out}
B=${BUILD:-build-sanitize}
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
compute-sanitizer --version | tail -1
t0=$(date +%s)
probe=$B/sanitizer_probe
if [ "${SANITIZE_SKIP_BUILD:-0}" != 1 ]; then
  mkdir -p "$B"
  nvcc -arch=sm_90 -O2 -lineinfo -o "$probe" scripts/device/sanitizer_probe.cu -lcublas > "$B/probe_build.log" 2>&1 &
  probe_pid=$!
  # Line info for the reports; optimisation as shipped so the kernels tested are the real ones.
  cmake -S . -B "$B" -G Ninja -DCMAKE_BUILD_TYPE=Release -DLAZYSCOPE_WITH_GUI=OFF -DLAZYSCOPE_BUILD_BENCH=OFF \
    -DCMAKE_CUDA_ARCHITECTURES=90 -DCMAKE_CUDA_FLAGS=-lineinfo -DLAZYSCOPE_PYTHON=python3 \
    > "$OUT/sanitize_build.log" 2>&1 || { tail -20 "$OUT/sanitize_build.log"; exit 1; }
  ninja -C "$B" -j"$(nproc)" test_kernels_cuda test_engine_serving >> "$OUT/sanitize_build.log" 2>&1 || {
    grep -E "error|FAILED" "$OUT/sanitize_build.log" | head -20
    exit 1
  }
  wait "$probe_pid" || { echo "sanitizer_probe did not build:"; tail -5 "$B/probe_build.log"; }
  echo "build took $(($(date +%s) - t0)) s"
fi
kernels=$B/tests/test_kernels_cuda
serving=$B/tests/test_engine_serving
gpu_filter=${SANITIZE_FILTER:-*}
# DeviceTrace.* joins the filter's negative patterns ("A:B-C:D" -> "A:B-C:D:DeviceTrace.*").
if [[ $gpu_filter == *-* ]]; then no_trace="$gpu_filter:DeviceTrace.*"; else no_trace="$gpu_filter-DeviceTrace.*"; fi
serving_filter=${SANITIZE_SERVING_FILTER:-BatchedTokens.Cuda*}
commands=()
if [ -x "$probe" ]; then
  # initcheck on a cuBLAS GEMM's output read by a plain kernel, with and without zeroing it first
  # (the prefill's wqkv shape of the tiny test model), and racecheck on programmatic launches and
  # graphs, each alone.
  for zero in "" zero; do
    commands+=("initcheck-gemm-read${zero:+-zeroed}=compute-sanitizer --tool initcheck --print-limit 3 $probe gemm-read 45 768 256 $zero")
  done
  for launch in "plain stream" "pdl stream" "plain graph" "pdl graph"; do
    commands+=("racecheck-${launch// /-}=compute-sanitizer --tool racecheck --racecheck-report analysis $probe launches $launch")
  done
fi
budget=${SANITIZE_BUDGET:-420}
if [ -n "${SANITIZE_END_BY:-}" ]; then
  fits=$((SANITIZE_END_BY - $(date +%s) - 20))  # 20 s for the probe's kernel list and the tarball
  ((fits < budget)) && budget=$fits
  ((budget < 10)) && { echo "no time left for the sanitizers (SANITIZE_END_BY)"; exit 1; }
fi
echo "sanitizer budget: $budget s"
jobs=${SANITIZE_JOBS:-$(($(nproc) / 2))}
[ -z "${SANITIZE_JOBS:-}" ] && ((jobs > 8)) && jobs=8
((jobs < 1)) && jobs=1
args=(--out "$OUT" --tools "$(IFS=,; echo "${tools[*]}")" --budget "$budget" --jobs "$jobs"
  --chunk "${SANITIZE_CHUNK:-6}"
  --binary "$kernels=$no_trace" --unsanitized "$kernels=$gpu_filter")
[ "$serving_filter" != - ] && args+=(--binary "$serving=$serving_filter" --unsanitized "$serving=$serving_filter")
args+=(
  --heavy 'SmolLM2|BatchedDecodeTest|FusedDecodeMatchesSeparateOps|GreedyMatchesCpuBackend|BatchedTokens|PrefillManyTiles|GraphStepsMatchStream|ProgrammaticLaunch|DecodeSplitsCap'
  --initcheck-control 'HeadDims/BackendTest.LogitsMatchCpuBackendOnTinyModel/D64_gqa4')
# (The help into a variable first: grep -q under pipefail would fail the pipe it leaves early.)
help=$(compute-sanitizer --help 2>&1)
if [ "${SANITIZE_EXCLUDE_CUBLAS:-0}" = 1 ] && grep -q -- '--kernel-name-exclude' <<< "$help"; then
  args+=(--exclude-library-kernels --library-kernels nvjet)
  echo "racecheck leaves out kernels named nvjet* (cuBLAS)"
fi
for c in "${commands[@]}"; do args+=(--command "$c"); done
python3 scripts/device/sanitize_runner.py "${args[@]}"
rc=$?
if [ -x "$probe" ] && command -v ncu > /dev/null; then
  # Which kernels cuBLAS runs for the probe's GEMM (after the runs: the profiler wants the GPU alone).
  echo "kernels of the probe's GEMM (ncu):"
  timeout 15 ncu --clock-control none --metrics gpu__time_duration.sum "$probe" gemm-read 45 768 256 2>&1 |
    grep -E 'Context [0-9]+, Stream|rror' | head -8
fi
tar -czf "$OUT/sanitize_logs.tar.gz" -C "$OUT" jobs && rm -rf "$OUT/jobs"
echo "sanitizers took $(($(date +%s) - t0)) s in all (rc $rc)"
exit $rc

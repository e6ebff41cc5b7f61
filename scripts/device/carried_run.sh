#!/bin/bash
# One device-tool call over binaries built on the development machine (scripts/device/carry_build.sh):
# unpacks .devbin/bins.tar.xz (base/, new/) and .devbin/vars.tar.xz (further variants, if carried)
# and runs the steps asked for, each skipped once the call's time (LIMIT seconds) is nearly spent.
# Steps: tests (new: prefill, backend, graph and tensor-parallel tests; TEST_VARIANTS others: the
# D 128 prefill subset), bench (bench_cuda_attention --prefill of each of VARIANTS, ROUNDS rounds,
# alternating), e2e (bench_cuda_end_to_end $E2E_ARGS of each of E2E_VARIANTS, default base then
# new), race (racecheck and memcheck on prefill tests of RACE_BIN, default new), peers
# (bench/peers_sdpa.py --prefill), full (the rest of test_kernels_cuda, FULL_FILTER). Logs and
# tables go to $OUT.
# Usage, from the device tool: OUT=$OUT scripts/device/carried_run.sh tests bench e2e
#   with carry [".devbin/bins.tar.xz", "scripts/..."] (the script itself travels with the tree).
set -o pipefail
cd "$(dirname "$0")/../../.devbin"
steps=" $* "
has() { [[ "$steps" == *" $1 "* ]]; }
OUT=${OUT:-/tmp/out}; mkdir -p $OUT
LIMIT=${LIMIT:-540}
SECONDS=0
bad=""
left() { [ $SECONDS -lt $((LIMIT - $1)) ] || { echo "-- skipped: $2 (${SECONDS}s)"; return 1; }; }
tar xJf bins.tar.xz; [ -f vars.tar.xz ] && tar xJf vars.tar.xz
# The test binary embeds the path of the checkout it was built in (LAZYSCOPE_SOURCE_DIR): point it here.
built_at=${BUILT_AT:-/work/main}
[ -e "$built_at" ] || { mkdir -p "$(dirname "$built_at")" && ln -s "$(cd .. && pwd)" "$built_at"; }
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv,noheader
if has tests; then
  for v in ${TEST_VARIANTS:-new}; do
    echo "== $v: one lazy prefill test first (30 s limit)"
    timeout 30 ./$v/test_kernels_cuda --gtest_brief=1 \
      --gtest_filter='Kernels/AttentionTest.PrefillMatchesCpuReference/D128_gqa4_bs16_small_lazy' 2>&1 | tail -3
    rc=$?; echo "rc=$rc (${SECONDS}s)"; [ $rc = 0 ] || { bad="$bad $v"; continue; }
    filter='*Prefill*:*Backend*:CudaGraphTest.*:*TensorParallel*'; [ "$v" = new ] || filter="${VARIANT_FILTER:-*Prefill*D128*:AttentionPrefillTest.*:PrefillManyTiles*}"
    timeout 150 ./$v/test_kernels_cuda --gtest_brief=1 --gtest_filter="$filter" 2>&1 | tee $OUT/tests_$v.log | tail -6
    echo "rc=$? (${SECONDS}s)"
  done
fi
if has bench; then
  for r in $(seq ${ROUNDS:-2}); do
    for b in ${VARIANTS:-base new}; do
      [[ " $bad " == *" $b "* ]] && continue
      left 60 "bench $b round $r" || continue
      echo "### $b, round $r (${SECONDS}s)"
      timeout 100 ./$b/bench_cuda_attention --prefill 2>&1 | tee -a $OUT/bench_$b.md | grep "^| [4c5]"
    done
  done
fi
if has e2e; then
  for b in ${E2E_VARIANTS:-base new}; do
    left 100 "e2e $b" || continue
    echo "### $b end to end (${SECONDS}s)"
    timeout 150 ./$b/bench_cuda_end_to_end ${E2E_ARGS:---model llama-3.1-8b} 2>&1 | tee -a $OUT/e2e_$b.md | grep "^| llama"
  done
fi
if has race; then
  left 90 "racecheck" && { timeout 120 compute-sanitizer --tool racecheck --error-exitcode 9 ./${RACE_BIN:-new}/test_kernels_cuda \
    --gtest_filter="${RACE_FILTER:-AttentionPrefillTest.ShiftAtEveryBlock*:Kernels/AttentionTest.PrefillMatchesCpuReference/D128_gqa4_bs16_small_lazy:Kernels/AttentionTest.PrefillMatchesCpuReference/D64_gqa8_bs32_zero_plain}" \
    > $OUT/racecheck.log 2>&1; echo "racecheck rc=$? (${SECONDS}s)"; grep -E "RACECHECK SUMMARY|PASSED|FAILED" $OUT/racecheck.log | tail -4; }
  left 90 "memcheck" && { timeout 120 compute-sanitizer --tool memcheck --error-exitcode 9 ./${RACE_BIN:-new}/test_kernels_cuda \
    --gtest_filter="${MEM_FILTER:-*Prefill*D128*lazy*:PrefillManyTiles*:AttentionPrefillTest.*}" \
    > $OUT/memcheck.log 2>&1; echo "memcheck rc=$? (${SECONDS}s)"; grep -E "ERROR SUMMARY|PASSED|FAILED" $OUT/memcheck.log | tail -4; }
fi
if has peers; then
  left 60 "peers" && { timeout 100 python3 ../bench/peers_sdpa.py --prefill 2>&1 | tee $OUT/peers.md | grep "^|"; }
fi
if has full; then
  left 120 "full suite" && { timeout $((LIMIT - SECONDS - 10)) ./new/test_kernels_cuda --gtest_brief=1 --gtest_filter="${FULL_FILTER:-*}" 2>&1 | tee $OUT/all_tests.log | tail -8; echo "rc=$? (${SECONDS}s)"; }
fi
echo "done ${SECONDS}s"

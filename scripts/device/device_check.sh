#!/usr/bin/env bash
# A short device-machine call for shape coverage: build the kernel tests and the end-to-end bench,
# run every GPU test, compute-sanitizer on the new shapes (GQA 3/6, head_dim 16/32, a backend
# run), and one model's decode row. Logs go to $OUT. Usage: scripts/device/device_check.sh [model]
set -o pipefail
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
export PATH=/usr/local/cuda/bin:$PATH
B=build-dev
SECONDS=0
cmake -S . -B $B -G Ninja -DLAZYSCOPE_WITH_GUI=OFF -DCMAKE_CUDA_ARCHITECTURES=90 -DLAZYSCOPE_PYTHON=python3 \
  -DLAZYSCOPE_BUILD_BENCH=ON > "$OUT/build.log" 2>&1 || { tail -20 "$OUT/build.log"; exit 1; }
ninja -C $B -j16 -k 0 test_kernels_cuda bench_cuda_end_to_end >> "$OUT/build.log" 2>&1 || echo "BUILD: some targets failed"
grep -E "error|FAILED" "$OUT/build.log" | head -20
echo "build ${SECONDS}s"
T=$B/tests/test_kernels_cuda
timeout 150 $T --gtest_brief=1 2>&1 | tee "$OUT/tests.log" | tail -25
echo "tests done ${SECONDS}s"
F='*D64_gqa3_bs16_small_lazy*:*D128_gqa6_bs16_large_lazy*:*D64_gqa3_bs16_zero_plain*:*D16_gqa2_bs16_small_lazy*:*D32_gqa3_bs32_large_lazy*:*D128_gqa7_bs16_small_lazy*:*KvCache*/0:*HeadDims/BackendTest.Logits*D16*:*BatchedDecode*batch3_mixed*'
echo "== memcheck"
timeout 90 compute-sanitizer --tool memcheck --error-exitcode 9 $T --gtest_filter="$F" \
  > "$OUT/memcheck.log" 2>&1; echo "memcheck rc=$?"; tail -3 "$OUT/memcheck.log"
echo "== racecheck"
timeout 60 compute-sanitizer --tool racecheck --error-exitcode 9 $T \
  --gtest_filter='*D64_gqa3_bs16_small_lazy*:*D16_gqa2_bs16_small_lazy*:*D128_gqa6_bs16_large_lazy*' \
  > "$OUT/racecheck.log" 2>&1; echo "racecheck rc=$?"; tail -3 "$OUT/racecheck.log"
echo "sanitizers done ${SECONDS}s"
timeout 40 $B/bench/bench_cuda_end_to_end --model "${1:-smollm2-135m}" 2>&1 | tee "$OUT/bench_model.md" | tail -4
echo "all done ${SECONDS}s"

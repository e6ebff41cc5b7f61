#!/usr/bin/env bash
# One device-machine call: build the CUDA targets, run the GPU tests, compute-sanitizer on the
# kernel tests, then the benchmarks and the PyTorch peers. Logs go to $OUT.
# Usage (on the GPU machine, repo root): kernels/cuda/device_run.sh [tests|bench|all]
set -o pipefail
what=${1:-all}
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
export PATH=/usr/local/cuda/bin:$PATH
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv > "$OUT/env.txt" 2>&1
B=build-dev
cmake -S . -B $B -G Ninja -DLAZYSCOPE_WITH_GUI=OFF -DCMAKE_CUDA_ARCHITECTURES=90 -DLAZYSCOPE_PYTHON=python3 \
  -DLAZYSCOPE_BUILD_BENCH=ON > "$OUT/build.log" 2>&1 || { tail -20 "$OUT/build.log"; exit 1; }
targets="lazyscope_cuda"
[ "$what" != bench ] && targets="$targets test_kernels_cuda"
[ "$what" != tests ] && targets="$targets bench_cuda_attention bench_cuda_end_to_end"
ninja -C $B -j16 -k 0 $targets >> "$OUT/build.log" 2>&1 || echo "BUILD: some targets failed (see build.log)"
grep -E "error|FAILED" "$OUT/build.log" | head -20
T=$B/tests/test_kernels_cuda
if [ "$what" != bench ]; then
  if [ ! -x $T ]; then
    # The test target also needs the CLI; build the kernel tests alone if that failed.
    T=$B/test_kernels_cuda_alone
    g++ -std=c++20 -O2 -I. -Itests -I/usr/local/cuda/include tests/kernels/cuda/*_test.cpp -o $T \
      $B/kernels/liblazyscope_cuda.a $B/kernels/liblazyscope_kernels.a -L/usr/local/cuda/lib64 \
      -lcublas -lcublasLt -lcudart -lgtest -lgtest_main -lopenblas -pthread >> "$OUT/build.log" 2>&1
  fi
  timeout 300 $T --gtest_brief=1 2>&1 | tee "$OUT/tests.log" | tail -40
  echo "== memcheck"
  timeout 200 compute-sanitizer --tool memcheck --error-exitcode 9 $T \
    --gtest_filter='*D128_gqa4_bs16_small_lazy*:*D64_gqa8_bs32_large_lazy*:*D128_gqa1_bs32_zero_plain*:*KvCache*:*HeadDims/BackendTest.Logits*D64_gqa4*:*HeadDims/BackendTest.Logits*D128_gqa4*' \
    > "$OUT/memcheck.log" 2>&1; echo "memcheck rc=$?"; tail -3 "$OUT/memcheck.log"
  echo "== racecheck"
  timeout 200 compute-sanitizer --tool racecheck --error-exitcode 9 $T \
    --gtest_filter='*D128_gqa4_bs16_small_lazy*:*D64_gqa8_bs32_large_lazy*:*D128_gqa1_bs32_zero_plain*:*KvCache*' \
    > "$OUT/racecheck.log" 2>&1; echo "racecheck rc=$?"; tail -3 "$OUT/racecheck.log"
fi
if [ "$what" != tests ]; then
  timeout 200 $B/bench/bench_cuda_attention 2>&1 | tee "$OUT/bench_attention.md"
  [ "${PEERS:-1}" = 1 ] && timeout 150 python3 bench/peers_sdpa.py 2>&1 | tee "$OUT/peers_sdpa.md"
  timeout 200 $B/bench/bench_cuda_end_to_end 2>&1 | tee "$OUT/bench_end_to_end.md"
fi

#!/usr/bin/env bash
# The CPU test suite again under AddressSanitizer + UndefinedBehaviorSanitizer (clang, build-asan/),
# then every libFuzzer target for a few seconds from seeds made of valid files, so a regression in
# a loader shows. Needs scripts/setup.sh to have run (clang, libclang-rt-14-dev).
#   FUZZ_SECONDS: seconds per fuzz target (default 4); 0 skips fuzzing.
#   SANITIZE_GUI: OFF leaves the workbench (Qt) and its widget tests out (default ON).
#   LAZYSCOPE_SANITIZED_BUILD: the build folder (default build-asan).
# Prints how long the build, the tests and the fuzzing took: wall seconds and the CPU seconds of
# everything they ran (on a busy machine the CPU time says what the part costs on idle cores).
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
python="${LAZYSCOPE_PYTHON:-$root/.venv/bin/python3}"
build="${LAZYSCOPE_SANITIZED_BUILD:-build-asan}"
# The workbench and its widget tests are part of the suite (on Qt's offscreen platform); its build
# adds about a fifth to the sanitized build's CPU time (docs/reliability.md).
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++ -DLAZYSCOPE_FUZZ=ON \
  -DLAZYSCOPE_WITH_CUDA=OFF -DLAZYSCOPE_BUILD_BENCH=OFF -DLAZYSCOPE_WITH_GUI="${SANITIZE_GUI:-ON}" \
  -DLAZYSCOPE_PYTHON="$python" ${LAZYSCOPE_CMAKE_ARGS:-}
# Set before the build too: test discovery runs the sanitized test binaries.
# scripts/asan.supp: a system library's legal use of strndup that strict_string_checks reports
# (the X keyboard library, when the workbench runs on a display); nothing of ours is in it.
export ASAN_OPTIONS="detect_leaks=1:abort_on_error=1:strict_string_checks=1:detect_stack_use_after_return=1:suppressions=$root/scripts/asan.supp"
export LSAN_OPTIONS="suppressions=$root/scripts/lsan.supp:print_suppressions=0"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1"
# cpu=CPU seconds (user + system) of every finished child of this shell so far. `times` runs in
# this shell (a subshell's children are not ours), its output through a file.
times_file=$(mktemp)
trap 'rm -f "$times_file"' EXIT
child_cpu() {
  times > "$times_file"
  cpu=$(tail -1 "$times_file" | awk '{ t = 0; for (i = 1; i <= 2; i++) { split($i, a, /[ms]/); t += a[1] * 60 + a[2] } printf "%d", t }')
}
child_cpu; c0=$cpu
t0=$SECONDS
cmake --build "$build" -j "$(nproc)"
child_cpu; echo "sanitized build: $((SECONDS - t0)) s (CPU $((cpu - c0)) s)"
child_cpu; c0=$cpu
t0=$SECONDS
export QT_QPA_PLATFORM="${QT_QPA_PLATFORM:-offscreen}"
ctest --test-dir "$build" --output-on-failure -j "$(nproc)"
child_cpu; echo "sanitized tests: $((SECONDS - t0)) s (CPU $((cpu - c0)) s)"
seconds="${FUZZ_SECONDS:-4}"
if ((seconds > 0)); then
  LAZYSCOPE_PYTHON="$python" fuzz/make_seeds.sh "$build/app/lazyscope-cli" "$build/fuzz-seeds"
  rm -rf "$build/fuzz-work"
  child_cpu; c0=$cpu
  t0=$SECONDS
  fuzz/run.sh "$build" "$build/fuzz-seeds" "$build/fuzz-work" "$seconds"
  child_cpu; echo "brief fuzzing: $((SECONDS - t0)) s (CPU $((cpu - c0)) s)"
fi

#!/usr/bin/env bash
# Runs every fuzz target for SECONDS each: fuzz/run.sh BUILD SEEDS WORK SECONDS [TARGET...]
#   BUILD: a LAZYSCOPE_FUZZ=ON build; SEEDS: from fuzz/make_seeds.sh; WORK: gets each target's
#   growing corpus, its log and any crash input. Prints executions and crashes per target and
#   exits non-zero when any target found a crash, a leak, a timeout or a sanitizer report.
set -uo pipefail
build="$1" seeds="$2" work="$3" seconds="$4"
shift 4
targets=("$@")
if ((${#targets[@]} == 0)); then
  mapfile -t targets < <(find "$build/fuzz" -maxdepth 1 -type f -name 'fuzz_*' -perm -u+x -printf '%f\n' | sort)
fi
mkdir -p "$work"
export ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=1:allocator_may_return_null=1}"
export UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}"
failed=0
printf '%-26s %12s %8s %7s  %s\n' target executions exec/s status log
for t in "${targets[@]}"; do
  mkdir -p "$work/$t/corpus" "$work/$t/crashes"
  [ -d "$seeds/$t" ] && cp -n "$seeds/$t"/* "$work/$t/corpus/" 2>/dev/null
  log="$work/$t/fuzz.log"
  # -rss_limit_mb bounds memory growth; -timeout flags one input running over 10 s as a hang.
  "$build/fuzz/$t" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 \
    -print_final_stats=1 -artifact_prefix="$work/$t/crashes/" "$work/$t/corpus" > "$log" 2>&1
  rc=$?
  runs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$' | tail -1)
  speed=$(grep -o 'stat::average_exec_per_sec: *[0-9]*' "$log" | grep -o '[0-9]*$' | tail -1)
  status=ok
  if ((rc != 0)); then status="FAIL($rc)"; failed=1; fi
  printf '%-26s %12s %8s %7s  %s\n' "$t" "${runs:-?}" "${speed:-?}" "$status" "$log"
done
exit $failed

#!/usr/bin/env bash
# A fuzz campaign: every target at once, several workers for the slow ones, for a fixed time, on
# a machine with many cores. Two halves, so the binaries can be built on one machine and run on
# another:
#   fuzz/campaign.sh pack BUILD SEEDS PACK     stripped fuzz binaries, their seed corpora and the
#                                              shared libraries the run machine may lack -> PACK
#   fuzz/campaign.sh run PACK SECONDS OUT      runs every target in PACK for SECONDS; OUT gets
#                                              campaign.md (the table), crashes.tar.gz (every crash,
#                                              leak, timeout or out-of-memory input) and logs.tar.gz
# WORKERS="fuzz_cli=2 fuzz_gguf=3 ..." gives a target that many workers (default 1 each; the rest
# of the cores go to the slowest targets of pack's timing). Workers of one target share its corpus
# folder (libFuzzer reloads it every second), and the table sums their executions.
set -uo pipefail

pack() {
  local build="$1" seeds="$2" out="$3"
  rm -rf "$out"
  mkdir -p "$out/bin" "$out/lib" "$out/seeds"
  local t
  for f in "$build"/fuzz/fuzz_*; do
    [ -f "$f" ] && [ -x "$f" ] || continue
    t=$(basename "$f")
    strip --strip-debug -o "$out/bin/$t" "$f"  # symbols stay: reports name functions
    [ -d "$seeds/$t" ] && cp -r "$seeds/$t" "$out/seeds/$t"
  done
  cp "$(dirname "$0")/json.dict" "$out/json.dict"
  # Libraries that an Ubuntu 24.04 image without our Debian packages may not have.
  ldd "$out"/bin/fuzz_* | awk '/=> \// {print $1, $3}' | sort -u | while read -r name path; do
    case $name in
      libc.so* | libm.so* | libgcc_s.so* | libstdc++.so* | ld-linux*) ;;
      *) cp -L "$path" "$out/lib/$name" ;;
    esac
  done
  echo "pack $out: $(ls "$out/bin" | wc -l) targets, $(du -sh "$out" | cut -f1)"
}

run() {
  local pack="$1" seconds="$2" out="$3"
  pack=$(realpath "$pack")
  mkdir -p "$out"
  out=$(realpath "$out")
  local work=${CAMPAIGN_WORK:-/tmp/campaign}
  rm -rf "$work"
  mkdir -p "$work"
  export LD_LIBRARY_PATH="$pack/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  export ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=1:allocator_may_return_null=1}"
  export UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}"
  mapfile -t targets < <(ls "$pack/bin" | sort)
  declare -A workers=()
  local t w
  for t in "${targets[@]}"; do workers[$t]=1; done
  for kv in ${WORKERS:-}; do workers[${kv%%=*}]=${kv#*=}; done
  local cores total=0
  cores=$(nproc)
  for t in "${targets[@]}"; do total=$((total + workers[$t])); done
  echo "campaign: ${#targets[@]} targets, $total workers on $cores cores, $seconds s each"
  local pids=() logs_of=()
  for t in "${targets[@]}"; do
    mkdir -p "$work/$t/corpus" "$work/$t/crashes"
    local seed_dir=() dict=()
    [ -d "$pack/seeds/$t" ] && seed_dir=("$pack/seeds/$t")
    # The JSON loaders get the dictionary of JSON syntax and their field names.
    case $t in
      fuzz_config | fuzz_tokenizer | fuzz_request | fuzz_safetensors* | fuzz_corpus_hotpotqa | fuzz_corpus_2wiki | \
        fuzz_corpus_triviaqa | fuzz_corpus_jsonl) dict=(-dict="$pack/json.dict") ;;
    esac
    for ((i = 0; i < workers[$t]; i++)); do
      # -rss_limit_mb bounds memory growth; -timeout flags one input running over 10 s as a hang;
      # -seed differs per worker so that they do not repeat each other's mutations.
      "$pack/bin/$t" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -seed=$((1000 + i)) "${dict[@]}" \
        -print_final_stats=1 -artifact_prefix="$work/$t/crashes/" "$work/$t/corpus" "${seed_dir[@]}" \
        > "$work/$t/worker$i.log" 2>&1 &
      pids+=($!)
      logs_of+=("$work/$t/worker$i.log")
    done
  done
  # Each worker's exit status goes beside its log: non-zero is a finding or a worker that failed.
  for i in "${!pids[@]}"; do
    wait "${pids[$i]}"
    echo $? > "${logs_of[$i]%.log}.rc"
  done
  local table="$out/campaign.md" failed=0
  {
    echo "Fuzz campaign: $seconds s per target, $cores cores, $(date -u +%F)"
    echo
    echo "| target | workers | executions | exec/s | crashes | workers failed | cov at start | cov at end | corpus |"
    echo "|---|---:|---:|---:|---:|---:|---:|---:|---:|"
  } > "$table"
  for t in "${targets[@]}"; do
    local runs=0 speed=0 cov0="?" cov1=0 bad crashes corpus r s c
    for log in "$work/$t"/worker*.log; do
      r=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$' | tail -1)
      if [ -z "$r" ]; then  # a worker that stopped on a finding prints no final stats
        r=$(grep -oE '^#[0-9]+' "$log" | tr -d '#' | tail -1)
      fi
      runs=$((runs + ${r:-0}))
      s=$(grep -o 'stat::average_exec_per_sec: *[0-9]*' "$log" | grep -o '[0-9]*$' | tail -1)
      speed=$((speed + ${s:-0}))
      c=$(grep -oE 'INITED cov: [0-9]+' "$log" | grep -oE '[0-9]+$' | head -1)
      [ "$cov0" = "?" ] && [ -n "$c" ] && cov0=$c
      c=$(grep -oE '^#[0-9]+[[:space:]]+(NEW|REDUCE|pulse|DONE|RELOAD).* cov: [0-9]+' "$log" | grep -oE '[0-9]+$' | tail -1)
      [ -n "$c" ] && ((c > cov1)) && cov1=$c
    done
    crashes=$(find "$work/$t/crashes" -type f | wc -l)
    bad=$(grep -lE 'ERROR: (AddressSanitizer|LeakSanitizer|libFuzzer)|runtime error:|SUMMARY: ' "$work/$t"/worker*.log | wc -l)
    local stopped
    stopped=$(grep -LxF 0 "$work/$t"/worker*.rc | wc -l)
    ((crashes > 0 || bad > 0 || stopped > 0)) && failed=1
    corpus=$(find "$work/$t/corpus" -type f | wc -l)
    printf '| %s | %d | %d | %d | %d | %d | %s | %d | %d |\n' "$t" "${workers[$t]}" "$runs" "$speed" "$crashes" \
      "$stopped" "$cov0" "$cov1" "$corpus" >> "$table"
  done
  echo >> "$table"
  echo "executions and exec/s: the sum over the target's workers; crashes: inputs saved for a crash, leak," \
    "timeout or out-of-memory; workers failed: exited non-zero (a finding, or could not start: see its log);" \
    "cov: libFuzzer's covered edges" >> "$table"
  cat "$table"
  (cd "$work" && tar czf "$out/crashes.tar.gz" */crashes)
  # The findings' reports and each log's last lines.
  local logs="$work/logs"
  mkdir -p "$logs"
  for t in "${targets[@]}"; do
    for log in "$work/$t"/worker*.log; do
      if grep -qE 'ERROR: |runtime error:|No such file' "$log"; then
        grep -A60 -m1 -E 'ERROR: |runtime error:|No such file' "$log" > "$logs/$t.$(basename "$log")"
      else
        tail -5 "$log" > "$logs/$t.$(basename "$log")"
      fi
    done
  done
  (cd "$work" && tar czf "$out/logs.tar.gz" logs)
  return $failed
}

case "${1:-}" in
  pack) shift; pack "$@" ;;
  run) shift; run "$@" ;;
  *) echo "usage: fuzz/campaign.sh pack BUILD SEEDS PACK | run PACK SECONDS OUT" >&2; exit 2 ;;
esac

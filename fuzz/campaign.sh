#!/usr/bin/env bash
# A fuzz campaign: every target at once, several workers for the slow ones, for a fixed time, on
# a machine with many cores; one campaign may span several runs (device calls). Two halves, so the
# binaries can be built on one machine and run on another:
#   fuzz/campaign.sh pack BUILD SEEDS PACK     stripped fuzz binaries, their seed corpora, the
#                                              per-worker rates of fuzz/rates.txt and the shared
#                                              libraries the run machine may lack -> PACK
#   fuzz/campaign.sh run PACK SECONDS OUT      runs every target in PACK for SECONDS; OUT gets
#                                              campaign.md (this run's table and the campaign's so
#                                              far), corpora.tar.gz (every corpus, minimised, and
#                                              history.tsv: the runs so far), crashes.tar.gz (every
#                                              crash, leak, timeout or out-of-memory input) and
#                                              logs.tar.gz
# Env of run:
#   CAMPAIGN_RESUME=FILE   an earlier run's corpora.tar.gz: its corpora are where this run starts,
#                          and its history counts towards the campaign's table
#   CAMPAIGN_CPUS=LIST     the CPUs to use ("0-7,12"), one worker pinned to each in turn (taskset),
#                          so the campaign can run beside other work; default every CPU
#   CAMPAIGN_GOAL=N        executions per target the campaign aims at (default 10,000,000)
#   WORKERS="fuzz_cli=2"   fixes a target's workers. Every other target gets one; with
#                          CAMPAIGN_PLAN_S (seconds the campaign still has, this run's included) the
#                          targets that can reach the goal in that time get, cheapest first, the
#                          workers that takes; each CPU left goes in turn to the target furthest in
#                          time from the goal. Time to the goal: executions still lacking over the
#                          target's rate (one worker's exec/s in the last run of the history, else
#                          the pack's rates.txt)
#   CAMPAIGN_MERGE=0       keeps the corpora whole; by default each is minimised with -merge=1 when
#                          that takes under CAMPAIGN_MERGE_S seconds (default 30)
#   CAMPAIGN_WORK          scratch folder (default /tmp/campaign)
#   CAMPAIGN_DRY=1         prints the workers each target would get and stops
# Workers of one target share its corpus folder (libFuzzer reloads it every second), and the
# tables sum their executions.
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
  cp "$(dirname "$0")/rates.txt" "$out/rates.txt"
  # Libraries that an Ubuntu 24.04 image without our Debian packages may not have.
  ldd "$out"/bin/fuzz_* | awk '/=> \// {print $1, $3}' | sort -u | while read -r name path; do
    case $name in
      libc.so* | libm.so* | libgcc_s.so* | libstdc++.so* | ld-linux*) ;;
      *) cp -L "$path" "$out/lib/$name" ;;
    esac
  done
  echo "pack $out: $(ls "$out/bin" | wc -l) targets, $(du -sh "$out" | cut -f1)"
}

# Expands a CPU list such as "0-3,8,10-11" into one CPU per line.
cpu_list() {
  local part a b
  for part in ${1//,/ }; do
    if [[ $part == *-* ]]; then
      a=${part%-*} b=${part#*-}
      seq "$a" "$b"
    else
      echo "$part"
    fi
  done
}

# Executions of one worker's log (its final stats, or the last status line of a worker that
# stopped on a finding and printed none).
log_runs() {
  local r
  r=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$1" | grep -o '[0-9]*$' | tail -1)
  [ -z "$r" ] && r=$(grep -oE '^#[0-9]+' "$1" | tr -d '#' | tail -1)
  echo "${r:-0}"
}

run() {
  local pack="$1" seconds="$2" out="$3"
  pack=$(realpath "$pack")
  mkdir -p "$out"
  out=$(realpath "$out")
  local work=${CAMPAIGN_WORK:-/tmp/campaign}
  local goal=${CAMPAIGN_GOAL:-10000000}
  rm -rf "$work"
  mkdir -p "$work"
  export LD_LIBRARY_PATH="$pack/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  export ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=1:allocator_may_return_null=1}"
  export UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}"
  mapfile -t targets < <(ls "$pack/bin" | sort)
  local t w
  # The runs so far of this campaign: corpora and history.tsv from an earlier run's corpora.tar.gz.
  : > "$work/history.tsv"
  if [ -n "${CAMPAIGN_RESUME:-}" ]; then
    tar -xzf "$CAMPAIGN_RESUME" -C "$work" || { echo "cannot read $CAMPAIGN_RESUME"; return 2; }
    echo "resumed from $CAMPAIGN_RESUME: $(cut -f1 "$work/history.tsv" | sort -u | wc -l) runs before"
  fi
  local cpus=()
  if [ -n "${CAMPAIGN_CPUS:-}" ]; then
    mapfile -t cpus < <(cpu_list "$CAMPAIGN_CPUS")
  else
    mapfile -t cpus < <(seq 0 $(($(nproc) - 1)))
  fi
  # Executions so far and the rate of one worker per target: the last run's in history.tsv, else
  # the pack's rates.txt (measured when it was built), else 1000/s.
  declare -A done_runs=() rate=() workers=() fixed=()
  for t in "${targets[@]}"; do done_runs[$t]=0 rate[$t]=1000; done
  if [ -f "$pack/rates.txt" ]; then
    while read -r t r; do [ -n "${rate[$t]+x}" ] && rate[$t]=$r; done < <(grep -v '^#' "$pack/rates.txt")
  fi
  # history.tsv: run, seconds, target, workers, executions, crashes, cov at end, corpus files, and
  # the share of a CPU each worker had (per mille: fewer CPUs than workers shared them), so that
  # the rate is one worker's on a CPU of its own.
  while IFS=$'\t' read -r _ s t w r _ _ _ share; do
    [ -n "${done_runs[$t]+x}" ] || continue
    done_runs[$t]=$((done_runs[$t] + r))
    ((s > 0 && w > 0 && r > 0)) && rate[$t]=$((r * 1000 / (s * w * ${share:-1000}) + 1))
  done < "$work/history.tsv"
  # Workers: WORKERS="t=n ..." fixes a target's; every other target gets one, then each free CPU
  # goes in turn to the target furthest in time from the goal at its rate.
  for kv in ${WORKERS:-}; do fixed[${kv%%=*}]=${kv#*=}; done
  local total=0
  for t in "${targets[@]}"; do
    workers[$t]=${fixed[$t]:-1}
    total=$((total + workers[$t]))
  done
  # CAMPAIGN_PLAN_S (the seconds the campaign still has, this run's included): first the targets
  # that can reach the goal in that time, cheapest first, get the workers that takes.
  if [ -n "${CAMPAIGN_PLAN_S:-}" ]; then
    local t need extra
    while read -r need t; do
      extra=$(((need + CAMPAIGN_PLAN_S - 1) / CAMPAIGN_PLAN_S - workers[$t]))
      ((extra > 0)) || continue
      ((total + extra <= ${#cpus[@]})) || continue
      workers[$t]=$((workers[$t] + extra))
      total=$((total + extra))
    done < <(for t in "${targets[@]}"; do
      [ -n "${fixed[$t]+x}" ] && continue
      ((goal > done_runs[$t])) && echo "$(((goal - done_runs[$t]) / rate[$t] + 1)) $t"
    done | sort -n)
  fi
  while ((total < ${#cpus[@]})); do
    local best="" best_time=0 left tt
    for t in "${targets[@]}"; do
      [ -n "${fixed[$t]+x}" ] && continue
      left=$((goal - done_runs[$t]))
      ((left > 0)) || continue
      tt=$((left / (rate[$t] * workers[$t] + 1)))
      ((tt > best_time)) && best=$t best_time=$tt
    done
    [ -n "$best" ] || break
    workers[$best]=$((workers[$best] + 1))
    total=$((total + 1))
  done
  echo "campaign: ${#targets[@]} targets, $total workers on ${#cpus[@]} CPUs (${CAMPAIGN_CPUS:-all}), $seconds s each"
  for t in "${targets[@]}"; do printf '%s=%d (%d done, %d/s) ' "$t" "${workers[$t]}" "${done_runs[$t]}" "${rate[$t]}"; done
  echo
  [ "${CAMPAIGN_DRY:-0}" = 1 ] && return 0  # only the plan
  local pids=() logs_of=() slot=0
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
      # Each worker on one CPU of the list (round robin), so the campaign can run beside other work.
      local cpu=${cpus[$((slot % ${#cpus[@]}))]}
      slot=$((slot + 1))
      # -rss_limit_mb bounds memory growth; -timeout flags one input running over 10 s as a hang;
      # -seed differs per worker and run so that they do not repeat each other's mutations.
      taskset -c "$cpu" "$pack/bin/$t" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 \
        -seed=$((1000 + 100 * $(cut -f1 "$work/history.tsv" | sort -u | wc -l) + i)) "${dict[@]}" \
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
  local run_id table="$out/campaign.md" failed=0 share=1000
  ((total > ${#cpus[@]})) && share=$((1000 * ${#cpus[@]} / total))
  run_id=$(date -u +%FT%H%M%SZ)
  {
    echo "Fuzz campaign run $run_id: $seconds s, $total workers on ${#cpus[@]} CPUs (${CAMPAIGN_CPUS:-all}), $(nproc) cores"
    echo
    echo "| target | workers | executions | exec/s | crashes | workers failed | cov at start | cov at end | corpus |"
    echo "|---|---:|---:|---:|---:|---:|---:|---:|---:|"
  } > "$table"
  for t in "${targets[@]}"; do
    local runs=0 speed=0 cov0="?" cov1=0 bad crashes corpus s c
    for log in "$work/$t"/worker*.log; do
      runs=$((runs + $(log_runs "$log")))
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
    printf '%s\t%d\t%s\t%d\t%d\t%d\t%d\t%d\t%d\n' "$run_id" "$seconds" "$t" "${workers[$t]}" "$runs" "$crashes" "$cov1" \
      "$corpus" "$share" >> "$work/history.tsv"
  done
  echo >> "$table"
  echo "executions and exec/s: the sum over the target's workers; crashes: inputs saved for a crash, leak," \
    "timeout or out-of-memory; workers failed: exited non-zero (a finding, or could not start: see its log);" \
    "cov: libFuzzer's covered edges" >> "$table"
  summary "$work/history.tsv" "$goal" >> "$table"
  cat "$table"
  # The corpora for the next run, minimised (-merge=1 keeps the inputs that add coverage) where
  # that finishes within CAMPAIGN_MERGE_S seconds per target; CAMPAIGN_MERGE=0 keeps them whole.
  if [ "${CAMPAIGN_MERGE:-1}" = 1 ]; then
    slot=0
    local merge_pids=()
    for t in "${targets[@]}"; do
      local cpu=${cpus[$((slot % ${#cpus[@]}))]}
      slot=$((slot + 1))
      (
        mkdir -p "$work/$t/merged"
        if timeout "${CAMPAIGN_MERGE_S:-30}" taskset -c "$cpu" "$pack/bin/$t" -merge=1 -timeout=10 -rss_limit_mb=2048 \
          "$work/$t/merged" "$work/$t/corpus" > "$work/$t/merge.log" 2>&1; then
          rm -rf "$work/$t/corpus" && mv "$work/$t/merged" "$work/$t/corpus"
        else
          rm -rf "$work/$t/merged"
        fi
      ) &
      merge_pids+=($!)
    done
    wait "${merge_pids[@]}"
  fi
  (cd "$work" && tar czf "$out/corpora.tar.gz" history.tsv */corpus)
  echo "corpora for the next run: $out/corpora.tar.gz ($(du -h "$out/corpora.tar.gz" | cut -f1))"
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

# The campaign so far, from history.tsv: per target the executions summed over every run.
summary() {
  local history="$1" goal="$2"
  echo
  echo "The campaign so far ($(cut -f1 "$history" | sort -u | wc -l) runs:" \
    "$(awk -F'\t' '!seen[$1]++ {printf "%s%s %d s", n++ ? ", " : "", $1, $2}' "$history"))"
  echo
  echo "| target | runs | workers per run | executions | crashes | cov at end | corpus | of $goal |"
  echo "|---|---:|---:|---:|---:|---:|---:|---:|"
  awk -F'\t' -v goal="$goal" '
    { if (!($3 in runs)) order[n++] = $3
      runs[$3]++; w[$3] = w[$3] (runs[$3] > 1 ? "+" : "") $4; ex[$3] += $5; cr[$3] += $6; cov[$3] = $7; corp[$3] = $8 }
    END { for (i = 0; i < n; i++) { t = order[i]
            printf "| %s | %d | %s | %d | %d | %d | %d | %.0f %% |\n", t, runs[t], w[t], ex[t], cr[t], cov[t], corp[t],
                   100 * ex[t] / goal } }' "$history"
}

case "${1:-}" in
  pack) shift; pack "$@" ;;
  run) shift; run "$@" ;;
  *) echo "usage: fuzz/campaign.sh pack BUILD SEEDS PACK | run PACK SECONDS OUT" >&2; exit 2 ;;
esac

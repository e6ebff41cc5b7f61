#!/usr/bin/env bash
# scripts/lsan.supp in the sanitized build: LeakSanitizer still reports a leak of ours made inside
# Qt's event loop (a suppression that names a library matches any frame of the allocation's stack,
# so one for libQt6Core would hide every leak in a slot), and Qt's own one-time allocations in a
# program that leaks nothing stay quiet.   usage: lsan_suppressions_test.sh PROBE
set -euo pipefail
probe="$1"
supp="$(cd "$(dirname "$0")/../.." && pwd)/scripts/lsan.supp"
export ASAN_OPTIONS="detect_leaks=1:abort_on_error=1"
export LSAN_OPTIONS="suppressions=$supp:print_suppressions=0"
export QT_QPA_PLATFORM=offscreen
failures=0
rc=0
out=$("$probe" 2>&1) || rc=$?
if [ "$rc" -ne 0 ] || grep -q "LeakSanitizer" <<<"$out"; then
  echo "FAIL a probe that leaks nothing of ours: rc=$rc"
  echo "$out"
  failures=$((failures + 1))
else
  echo "ok   a probe that leaks nothing of ours exits clean"
fi
rc=0
out=$("$probe" leak 2>&1) || rc=$?
if [ "$rc" -eq 0 ] || ! grep -q "detected memory leaks" <<<"$out" || ! grep -q "lose_memory" <<<"$out"; then
  echo "FAIL the probe's own leak inside the event loop was not reported: rc=$rc"
  echo "$out"
  failures=$((failures + 1))
else
  echo "ok   the probe's leak inside the event loop is reported ($(grep -c 'Direct leak' <<<"$out") direct leak records)"
fi
exit $((failures > 0))

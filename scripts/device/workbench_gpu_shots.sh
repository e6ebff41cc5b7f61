#!/usr/bin/env bash
# The workbench on the GPU machine, which has no Qt: Debian's Qt 6 runtime (and the other libraries
# Ubuntu lacks) carried unpacked in qt.tar.xz, the offscreen platform, the CUDA backend with GPU
# tracing, on a generated small model. Saves the window, the GPU timeline and kernel statistics
# panels, the session report, and the report reopened in the report window, to $OUT; diffs the
# kernel statistics of the live panel and of the reopened report (kernel_stats.tsv of each).
# Run from a staged folder holding bin/lazyscope, bin/lazyscope-cli, share/lazyscope and qt.tar.xz
# (see docs/profiling.md, "Screenshots from the GPU"). BACKEND=cpu runs the same steps on the CPU.
set -o pipefail
OUT=${OUT:-/tmp/out}
BACKEND=${BACKEND:-cuda}
QT=${QT_BUNDLE_DIR:-/tmp/qt}
mkdir -p "$OUT" "$QT" /tmp/lazyscope-home /tmp/lazyscope-xdg
tar xJf qt.tar.xz -C "$QT" || exit 1
export LD_LIBRARY_PATH="$QT/lib:/usr/local/cuda/lib64:/usr/local/cuda/extras/CUPTI/lib64:${LD_LIBRARY_PATH:-}"
export QT_PLUGIN_PATH="$QT/plugins" QT_QPA_PLATFORM=offscreen FONTCONFIG_FILE="$QT/fonts.conf"
sed -i "s|/tmp/qt|$QT|g" "$QT/fonts.conf"
export LAZYSCOPE_DATA_DIR="$PWD/share/lazyscope" HOME=/tmp/lazyscope-home XDG_RUNTIME_DIR=/tmp/lazyscope-xdg
missing=$(ldd bin/lazyscope | grep "not found")
[ -n "$missing" ] && { echo "missing libraries: $missing"; exit 1; }
bin/lazyscope-cli make-model --preset small --out /tmp/lazyscope-small --text-dir share/lazyscope/text || exit 1
trace=""
[ "$BACKEND" = cuda ] && trace="--trace-gpu"
t0=$(date +%s%N)
timeout 240 bin/lazyscope --model /tmp/lazyscope-small --backend "$BACKEND" $trace --demo \
  --screenshot "$OUT/workbench_$BACKEND.png" --size 1600x1000 --panel-shots "$OUT" \
  --save-report "$OUT/session_$BACKEND.db" 2>&1 | tee "$OUT/workbench_$BACKEND.log"
echo "workbench run: rc=$? in $(( ($(date +%s%N) - t0) / 1000000 )) ms" | tee -a "$OUT/workbench_$BACKEND.log"
# The saved report, reopened as on a machine without a model or a GPU.
mkdir -p "$OUT/report_panels"
timeout 60 bin/lazyscope --open-report "$OUT/session_$BACKEND.db" --screenshot "$OUT/report_$BACKEND.png" \
  --size 1500x950 --panel-shots "$OUT/report_panels" 2>&1 | tee -a "$OUT/workbench_$BACKEND.log"
# The live panel's kernel statistics against the reopened report's, row by row.
if diff "$OUT/kernel_stats.tsv" "$OUT/report_panels/kernel_stats.tsv" > "$OUT/kernel_stats.diff"; then
  echo "kernel statistics: live and reopened report identical ($(grep -vc '^#\|^name' "$OUT/kernel_stats.tsv") rows)" |
    tee -a "$OUT/workbench_$BACKEND.log"
else
  echo "kernel statistics DIFFER between live and reopened report:" | tee -a "$OUT/workbench_$BACKEND.log"
  tee -a "$OUT/workbench_$BACKEND.log" < "$OUT/kernel_stats.diff"
fi
ls -la "$OUT"

#!/usr/bin/env bash
# The profiler's GPU-machine call. Steps (default: all three):
#   reports  GPU-traced reports: generate --trace-gpu on a synthetic Llama-3.2-1B RAG request (lazy and
#            materialized; the default kernel detail, and once with --trace-kernel-steps all) and a
#            small workload --backend cuda --record; the nsys-style SQL tests (test_profiler GpuReport.*)
#            on both generate reports
#   tests    the tracer's GPU tests (test_kernels_cuda DeviceTrace*)
#   bench    bench_tracing_overhead (decode tok/s and TTFT untraced vs traced, 1B and 8B shapes)
# Binaries come from $BIN (lazyscope-cli, bench_tracing_overhead, test_profiler, test_kernels_cuda,
# built elsewhere for sm_90) when they start here; otherwise they are built here (build-dev).
# Run from the repository root on the GPU machine; reports and logs go to $OUT (at most 8 files).
set -o pipefail
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
steps=" ${*:-reports tests bench} "
has() { [[ "$steps" == *" $1 "* ]]; }
export PATH=/usr/local/cuda/bin:$PATH
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:/usr/local/cuda/extras/CUPTI/lib64:${LD_LIBRARY_PATH:-}
t0=$(date +%s)
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,temperature.gpu --format=csv,noheader
W=build-dev
mkdir -p $W
BIN=${BIN:-}
if [ -n "$BIN" ] && [ -x "$BIN/lazyscope-cli" ] && "$BIN/lazyscope-cli" --help > /dev/null 2>&1; then
  echo "== prebuilt binaries from $BIN"
else
  echo "== building here (prebuilt binaries missing or failing: ${BIN:-none}; $(ldd "$BIN/lazyscope-cli" 2>&1 | grep -c 'not found') libraries not found)"
  cmake -S . -B $W -G Ninja -DLAZYSCOPE_WITH_GUI=OFF -DCMAKE_CUDA_ARCHITECTURES=90 -DLAZYSCOPE_PYTHON=python3 \
    > "$W/build.log" 2>&1 || { tail -30 "$W/build.log"; exit 1; }
  ninja -C $W -j16 lazyscope-cli bench_tracing_overhead test_profiler test_kernels_cuda >> "$W/build.log" 2>&1 ||
    { grep -E "error|FAILED" "$W/build.log" | head -30; exit 1; }
  mkdir -p $W/bin
  cp $W/app/lazyscope-cli $W/bench/bench_tracing_overhead $W/tests/test_profiler $W/tests/test_kernels_cuda $W/bin/
  BIN=$W/bin
  echo "== build took $(( $(date +%s) - t0 )) s"
fi
CLI=$BIN/lazyscope-cli
if has reports; then
  # Eight 1,000-token documents, a 3-token prefix and a 32-token query; 24 new tokens.
  python3 -c 'import json; d=[[100+(i*7919+j*31)%120000 for j in range(1000)] for i in range(8)]
print(json.dumps({"prefix_ids":[1,2,3],"document_ids":d,"query_ids":list(range(40,72)),"max_new_tokens":24}))' > $W/rag.json
  for detail in 1 all; do
    db=$W/gpu_generate_$detail.db
    rm -f $db
    timeout 120 $CLI generate --synthetic llama-3.2-1b --backend cuda --kv-budget 2GiB --request $W/rag.json \
      --compare lazy,materialized --record $db --trace-gpu --trace-kernel-steps $detail 2>&1 | tail -4
    echo "== generate (kernel steps $detail) rc=$? $(stat -c %s $db 2>/dev/null) bytes"
    LAZYSCOPE_GPU_REPORT=$db timeout 60 $BIN/test_profiler --gtest_filter='GpuReport.*' 2>&1 | tail -12
    python3 - $db <<'PY'
import sqlite3, sys
db = sqlite3.connect(sys.argv[1])
q = lambda sql: db.execute(sql).fetchall()
print("device_trace:", q("SELECT request, kernels, graphs, kernel_detail_steps, graph_level_steps, api_calls, dropped_records, ROUND(flush_ms, 1) FROM device_trace"))
print("kernels, runtime, driver, graph rows:", q("SELECT (SELECT COUNT(*) FROM CUPTI_ACTIVITY_KIND_KERNEL), (SELECT COUNT(*) FROM CUPTI_ACTIVITY_KIND_RUNTIME), (SELECT COUNT(*) FROM CUPTI_ACTIVITY_KIND_DRIVER), (SELECT COUNT(*) FROM CUPTI_ACTIVITY_KIND_GRAPH_TRACE)"))
print("kernels joined through DRIVER, by name:", q("SELECT s.value, COUNT(*) FROM CUPTI_ACTIVITY_KIND_KERNEL k JOIN CUPTI_ACTIVITY_KIND_DRIVER d ON d.correlationId = k.correlationId JOIN StringIds s ON s.id = k.shortName GROUP BY s.value LIMIT 6"))
print("driver calls by name:", q("SELECT n.value, COUNT(*) FROM CUPTI_ACTIVITY_KIND_DRIVER d JOIN StringIds n ON n.id = d.nameId GROUP BY n.value ORDER BY 2 DESC LIMIT 8"))
print("kernels with no launch:", q("SELECT COUNT(*) FROM CUPTI_ACTIVITY_KIND_KERNEL WHERE correlationId NOT IN (SELECT correlationId FROM CUPTI_ACTIVITY_KIND_RUNTIME UNION SELECT correlationId FROM CUPTI_ACTIVITY_KIND_DRIVER)"))
print("top kernels:", q("SELECT s.value, COUNT(*), SUM(k.end-k.start) t FROM CUPTI_ACTIVITY_KIND_KERNEL k JOIN StringIds s ON s.id = k.shortName GROUP BY s.value ORDER BY t DESC LIMIT 5"))
print("graph rows per request:", q("SELECT e.int64Value, COUNT(*), ROUND(AVG(g.end - g.start)/1e3, 1) FROM CUPTI_ACTIVITY_KIND_GRAPH_TRACE g JOIN CUPTI_ACTIVITY_KIND_RUNTIME r ON r.correlationId = g.correlationId JOIN NVTX_EVENTS e ON e.eventType = 59 AND e.text LIKE 'request (%' AND r.start >= e.start AND r.end <= e.end GROUP BY e.int64Value"))
print("requests:", q("SELECT id, policy, ROUND(ttft_ms, 2), ROUND(decode_ms_per_token, 3) FROM requests"))
PY
  done
  cp $W/gpu_generate_1.db "$OUT/gpu_generate.db"
  rm -f $W/gpu_workload.db
  timeout 120 $CLI workload --backend cuda --synthetic llama-3.2-1b --documents 24 --doc-tokens 512 --docs-per-request 4 \
    --requests 32 --concurrency 4 --output-tokens 16 --policies lazy,materialized --kv-budget 1GiB \
    --record $W/gpu_workload.db 2>&1 | tail -6
  echo "== workload rc=$? $(stat -c %s $W/gpu_workload.db 2>/dev/null) bytes"
  timeout 30 $CLI session show $W/gpu_workload.db 2>&1 | tail -4
  cp $W/gpu_workload.db "$OUT/gpu_workload.db"
fi
if has tests; then
  echo "== GPU tests of the tracer at $(( $(date +%s) - t0 )) s"
  timeout 90 $BIN/test_kernels_cuda --gtest_filter='DeviceTrace*' > $W/tests.log 2>&1
  rc=$?
  tail -14 $W/tests.log | tee "$OUT/tests.log"
  echo "== GPU tests rc=$rc"
  if [ $rc -ge 128 ]; then  # a crash: where (cuda-gdb also debugs host code)
    timeout 60 cuda-gdb -batch -ex run -ex bt --args $BIN/test_kernels_cuda --gtest_filter='DeviceTrace*' 2>&1 |
      grep -vE "^\[New Thread|^\[Thread" | tail -30 | tee -a "$OUT/tests.log"
  fi
fi
if has bench; then
  echo "== tracing overhead bench at $(( $(date +%s) - t0 )) s"
  timeout ${BENCH_TIMEOUT:-200} $BIN/bench_tracing_overhead --repeats ${REPEATS:-5} 2>&1 | tee "$OUT/tracing_overhead.md"
fi
echo "== done at $(( $(date +%s) - t0 )) s"

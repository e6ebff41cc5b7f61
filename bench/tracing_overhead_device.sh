#!/usr/bin/env bash
# One GPU-machine call for the profiler: build, a GPU-traced generate --record with Nsight-style SQL on
# the report, the tracing-overhead bench, the lazy-overhead probe, then the tracer's GPU tests.
# Run from the repository root on the GPU machine; logs go to $OUT (at most 8 files come back).
set -o pipefail
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
export PATH=/usr/local/cuda/bin:$PATH
B=build-dev
t0=$(date +%s)
cmake -S . -B $B -G Ninja -DLAZYSCOPE_WITH_GUI=OFF -DCMAKE_CUDA_ARCHITECTURES=90 -DLAZYSCOPE_PYTHON=python3 \
  > "$OUT/build.log" 2>&1 || { tail -30 "$OUT/build.log"; exit 1; }
grep -E "NVTX|CUPTI" "$OUT/build.log"
ninja -C $B -j16 lazyscope-cli bench_tracing_overhead >> "$OUT/build.log" 2>&1 || { grep -E "error|FAILED" "$OUT/build.log" | head -30; exit 1; }
echo "== build took $(( $(date +%s) - t0 )) s"
CLI=$B/app/lazyscope-cli
python3 -c 'import json; d=[[100+(i*7919+j*31)%120000 for j in range(1000)] for i in range(8)]
print(json.dumps({"prefix_ids":[1,2,3],"document_ids":d,"query_ids":list(range(40,72)),"max_new_tokens":16}))' > $B/rag.json
rm -f $B/traced.db
timeout 90 $CLI generate --synthetic llama-3.2-1b --backend cuda --request $B/rag.json --record $B/traced.db --trace-gpu \
  > "$OUT/generate.log" 2>&1; echo "== generate rc=$?"; tail -4 "$OUT/generate.log"
timeout 30 $CLI session show $B/traced.db | tail -3
timeout 60 python3 - $B/traced.db > "$OUT/queries.txt" 2>&1 <<'PY'
import sqlite3, sys
db = sqlite3.connect(sys.argv[1])
def show(title, sql):
    print("## " + title)
    for row in db.execute(sql): print("  ", row)
show("export schema", "SELECT name, value FROM META_DATA_EXPORT")
show("GPU", "SELECT id, name, smCount, computeMajor, computeMinor, totalMemory, uuid FROM TARGET_INFO_GPU")
show("kernel summary by name (top 12)", """SELECT s.value, COUNT(*), SUM(k.end - k.start) AS total_ns, AVG(k.end - k.start)
  FROM CUPTI_ACTIVITY_KIND_KERNEL k JOIN StringIds s ON s.id = k.shortName GROUP BY s.value ORDER BY total_ns DESC LIMIT 12""")
show("launch config of the attention kernels", """SELECT DISTINCT d.value, k.gridX, k.gridY, k.gridZ, k.blockX, k.registersPerThread,
  k.staticSharedMemory, k.dynamicSharedMemory FROM CUPTI_ACTIVITY_KIND_KERNEL k JOIN StringIds d ON d.id = k.demangledName
  WHERE d.value LIKE '%decode_kernel%' OR d.value LIKE '%prefill_kernel%' LIMIT 8""")
show("API -> kernel join on correlationId", """SELECT n.value, r.eventClass, COUNT(*) FROM CUPTI_ACTIVITY_KIND_KERNEL k
  JOIN CUPTI_ACTIVITY_KIND_RUNTIME r ON r.correlationId = k.correlationId JOIN StringIds n ON n.id = r.nameId GROUP BY n.value, r.eventClass""")
show("kernels with no launch record / total", """SELECT (SELECT COUNT(*) FROM CUPTI_ACTIVITY_KIND_KERNEL k WHERE NOT EXISTS
  (SELECT 1 FROM CUPTI_ACTIVITY_KIND_RUNTIME r WHERE r.correlationId = k.correlationId)), (SELECT COUNT(*) FROM CUPTI_ACTIVITY_KIND_KERNEL)""")
show("kernels with no launch record, by name", """SELECT s.value, COUNT(*) FROM CUPTI_ACTIVITY_KIND_KERNEL k JOIN StringIds s ON s.id = k.shortName
  WHERE NOT EXISTS (SELECT 1 FROM CUPTI_ACTIVITY_KIND_RUNTIME r WHERE r.correlationId = k.correlationId) GROUP BY s.value""")
show("thread ids: NVTX vs API records", """SELECT (SELECT group_concat(DISTINCT globalTid % 0x1000000) FROM NVTX_EVENTS),
  (SELECT group_concat(DISTINCT globalTid % 0x1000000) FROM CUPTI_ACTIVITY_KIND_RUNTIME)""")
show("correlation ids with more than one API record", """SELECT COUNT(*) FROM (SELECT correlationId FROM CUPTI_ACTIVITY_KIND_RUNTIME
  GROUP BY correlationId HAVING COUNT(*) > 1)""")
show("graph kernels (graphNodeId set) by launch API", """SELECT n.value, COUNT(*) FROM CUPTI_ACTIVITY_KIND_KERNEL k
  JOIN CUPTI_ACTIVITY_KIND_RUNTIME r ON r.correlationId = k.correlationId JOIN StringIds n ON n.id = r.nameId
  WHERE k.graphNodeId IS NOT NULL GROUP BY n.value""")
show("NVTX domain", "SELECT domainId, text FROM NVTX_EVENTS WHERE eventType = 75")
show("NVTX ranges (first 8)", "SELECT text, end - start FROM NVTX_EVENTS WHERE eventType = 59 ORDER BY start LIMIT 8")
show("GPU time per NVTX range kind", """SELECT substr(e.text, 1, 12), COUNT(DISTINCT e.rowid), COUNT(*), SUM(k.end - k.start) / 1e6
  FROM NVTX_EVENTS e JOIN CUPTI_ACTIVITY_KIND_RUNTIME r ON r.globalTid = e.globalTid AND r.start >= e.start AND r.end <= e.end
  JOIN CUPTI_ACTIVITY_KIND_KERNEL k ON k.correlationId = r.correlationId WHERE e.eventType = 59 AND e.text NOT LIKE 'request%'
  GROUP BY substr(e.text, 1, 12)""")
show("memcpy by kind", """SELECT o.label, COUNT(*), SUM(m.bytes) FROM CUPTI_ACTIVITY_KIND_MEMCPY m JOIN ENUM_CUDA_MEMCPY_OPER o ON o.id = m.copyKind GROUP BY o.label""")
show("memsets", "SELECT COUNT(*), SUM(bytes) FROM CUPTI_ACTIVITY_KIND_MEMSET")
show("device_trace per request", "SELECT * FROM device_trace")
show("kernels inside their request span", """SELECT s.request, COUNT(*) FROM CUPTI_ACTIVITY_KIND_KERNEL k JOIN spans s ON s.category = 'range'
  AND s.name LIKE 'request%' AND k.start >= s.start_ms * 1e6 AND k.end <= (s.start_ms + s.duration_ms) * 1e6 GROUP BY s.request""")
PY
echo "== queries rc=$?"; head -c 2500 "$OUT/queries.txt"
echo "== tracing overhead bench"
timeout 130 $B/bench/bench_tracing_overhead --repeats ${REPEATS:-6} 2>&1 | tee "$OUT/tracing_overhead.md"
echo "== lazy-overhead probe"
timeout 45 $CLI overhead --backend cuda --shapes smollm2-135m,llama-3.1-8b --contexts 1024,4096,16384 --batches 1,16 \
  --repeats 11 --record $B/traced.db 2>&1 | tee "$OUT/overhead_probe.md"
echo "== GPU tests of the tracer (build then run) at $(( $(date +%s) - t0 )) s"
timeout 90 ninja -C $B -j16 test_kernels_cuda >> "$OUT/build.log" 2>&1 && \
  timeout 60 $B/tests/test_kernels_cuda --gtest_filter='DeviceTrace*' 2>&1 | tail -15 | tee "$OUT/tests.log"
echo "== done at $(( $(date +%s) - t0 )) s"

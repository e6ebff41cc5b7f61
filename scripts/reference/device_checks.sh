#!/usr/bin/env bash
# Reference checks on the GPU machine (PyTorch + transformers there): LazyScope's full-mode
# logits against an fp64 transformers forward of an HF-written bf16, sharded, llama3-rope
# checkpoint (issue: foundation), and against transformers loading the SmolLM2 GGUF (default
# model). Usage: scripts/reference/device_checks.sh OUT_DIR [SMOLLM2_GGUF]
set -uo pipefail
out="${1:?usage: device_checks.sh OUT_DIR [SMOLLM2_GGUF]}"
gguf="${2:-}"
root="$(cd "$(dirname "$0")/../.." && pwd)"
cd "$root"
mkdir -p "$out"
cli=build-device/app/lazyscope-cli
if [ ! -x "$cli" ]; then
  cmake -S . -B build-device -G Ninja -DCMAKE_BUILD_TYPE=Release -DLAZYSCOPE_WITH_GUI=OFF \
    -DLAZYSCOPE_BUILD_TESTS=OFF -DLAZYSCOPE_BUILD_BENCH=OFF -DCMAKE_CUDA_ARCHITECTURES=90 \
    -DLAZYSCOPE_PYTHON=python3 >"$out/configure.log" 2>&1 || { tail -30 "$out/configure.log"; exit 1; }
  ninja -C build-device -j16 lazyscope-cli >"$out/build.log" 2>&1 || { tail -40 "$out/build.log"; exit 1; }
fi
echo "== HF checkpoint (bf16, sharded, llama3 rope) vs fp64 transformers"
"$cli" make-model --preset tiny --seed 1 --out /tmp/ls-tiny >/dev/null
python3 scripts/reference/hf_check.py all --out /tmp/hf-llama --tokenizer-from /tmp/ls-tiny \
  --ref-out /tmp/hf-ref.json 2>&1 | tail -5
ls /tmp/hf-llama
for backend in cpu cuda; do
  "$cli" generate --model /tmp/hf-llama --request /tmp/hf-llama/request_ids.json --mode full --policy none \
    --max-new-tokens 1 --backend $backend --dump-logits /tmp/ls-dump-$backend.json >/dev/null 2>"$out/gen-$backend.log"
  tol=2e-3
  [ $backend = cuda ] && tol=1e-1
  echo "-- backend $backend (tolerance $tol)"
  python3 scripts/reference/hf_check.py compare /tmp/hf-ref.json /tmp/ls-dump-$backend.json --tol $tol 2>&1 | tail -4
done
if [ -n "$gguf" ] && [ -f "$gguf" ]; then
  echo "== SmolLM2-135M-Instruct GGUF vs transformers (fp32, same dequantized weights)"
  for backend in cpu cuda; do
    "$cli" generate --model "$gguf" --request scripts/reference/smollm2_request_ids.json --mode full --policy none \
      --backend $backend --dump-logits /tmp/smol-$backend.json 2>"$out/smol-gen-$backend.log" | tail -2
    tol=1e-2
    [ $backend = cuda ] && tol=2e-1
    echo "-- backend $backend (tolerance $tol)"
    python3 scripts/reference/smollm2_transformers.py --gguf "$gguf" --ids-file scripts/reference/smollm2_prompt_ids.json \
      --compare /tmp/smol-$backend.json --tolerance $tol 2>&1 | tail -4
  done
  echo "== lazy vs materialized on the GPU, SmolLM2"
  "$cli" generate --model "$gguf" --request scripts/reference/smollm2_request_ids.json --backend cuda \
    --compare lazy,materialized 2>&1 | tail -12
fi

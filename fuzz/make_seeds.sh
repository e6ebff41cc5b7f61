#!/usr/bin/env bash
# Writes seed corpora for every fuzz target from valid files: fuzz/make_seeds.sh CLI OUT
#   CLI: a built lazyscope-cli; OUT: gets one folder per target (fuzz_config/, fuzz_gguf/, ...).
# Python (LAZYSCOPE_PYTHON, default .venv/bin/python3) writes the safetensors and GGUF seeds.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cli="$(realpath "$1")"
out="$(realpath -m "$2")"
python="${LAZYSCOPE_PYTHON:-$root/.venv/bin/python3}"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
mkdir -p "$out"
seed() { mkdir -p "$out/$1"; cat > "$out/$1/$2"; }

# A tiny checkpoint: config.json, tokenizer.json, model.safetensors.
"$cli" make-model --preset tiny --out "$work/tiny" > /dev/null
mkdir -p "$out/fuzz_config" "$out/fuzz_tokenizer" "$out/fuzz_safetensors"
cp "$work/tiny/config.json" "$out/fuzz_config/tiny.json"
# The tokenizer seed keeps every section of the tiny model's tokenizer.json but only the
# vocabulary and merges of the target's fixed text (fuzz/small_seeds.py): 4 KB instead of 15 KB.
"$python" "$root/fuzz/small_seeds.py" tokenizer "$work/tiny/tokenizer.json" "$out/fuzz_tokenizer/tiny.json"
seed fuzz_config llama3_rope.json <<'J'
{"architectures":["LlamaForCausalLM"],"hidden_size":64,"intermediate_size":128,"num_attention_heads":4,
 "num_key_value_heads":2,"num_hidden_layers":2,"vocab_size":512,"max_position_embeddings":2048,
 "rms_norm_eps":1e-5,"rope_theta":500000.0,"tie_word_embeddings":true,"bos_token_id":1,"eos_token_id":2,
 "rope_scaling":{"rope_type":"llama3","factor":8.0,"low_freq_factor":1.0,"high_freq_factor":4.0,
 "original_max_position_embeddings":8192}}
J
seed fuzz_config rope_parameters.json <<'J'
{"architectures":["LlamaForCausalLM"],"hidden_size":64,"intermediate_size":128,"num_attention_heads":4,
 "num_hidden_layers":1,"vocab_size":300,"rope_parameters":{"rope_type":"default","rope_theta":10000.0}}
J
"$python" - "$out" <<'PY'
import sys, json, numpy as np
from safetensors.numpy import save_file
out = sys.argv[1]
save_file({"a": np.arange(6, dtype=np.float32).reshape(2, 3), "b": np.ones((4,), dtype=np.float16)},
          f"{out}/fuzz_safetensors/small.safetensors", metadata={"format": "pt"})
PY
"$python" - "$out" <<'PY'
import sys, numpy as np
from safetensors.numpy import save_file
out = sys.argv[1]
save_file({"x": np.zeros((3, 2), dtype=np.int64), "y": np.ones((2, 2), dtype=np.float32)},
          f"{out}/fuzz_safetensors/mixed.safetensors")
PY
seed fuzz_safetensors_index good.json <<'J'
{"metadata":{"total_size":24},"weight_map":{"model.embed_tokens.weight":"model-00001-of-00002.safetensors",
 "model.norm.weight":"model-00002-of-00002.safetensors"}}
J

# GGUF: a one-layer Llama with 32-wide tensors and one small tensor of every quant type
# (fuzz/small_seeds.py; 21 KB in all, where the test fixtures' files are 480 KB).
mkdir -p "$out/fuzz_gguf"
"$python" "$root/fuzz/small_seeds.py" gguf "$out/fuzz_gguf/tiny_llama.gguf" "$out/fuzz_gguf/quants.gguf"

# Requests, both forms.
seed fuzz_request text.json <<'J'
{"prefix":"You answer from the passages.","documents":["The Lune flows past Carrow.","Ada was born in Carrow."],
 "order":[1,0,1],"query":"Which river flows past Ada's town?","max_new_tokens":8,"titles":["Lune","Ada"]}
J
seed fuzz_request ids.json <<'J'
{"prefix_ids":[1,5,6],"document_ids":[[10,11,12],[20,21]],"order":[0,1],"query_ids":[30,31],"max_new_tokens":4}
J

# Corpora, one seed per loader, and a corpus store.
cp "$root/corpora/sample/passages.jsonl" "$work/passages.jsonl"
head -c 4000 "$root/corpora/sample/passages.jsonl" | sed '$d' | seed fuzz_corpus_jsonl passages.jsonl
seed fuzz_corpus_jsonl mixed.jsonl <<'J'
{"id":"p1","title":"Lune","text":"The Lune flows past Carrow."}
{"question":"Which river?","answers":["Lune"],"doc_ids":["p1"],"kind":"single"}
J
seed fuzz_corpus_hotpotqa dev.json <<'J'
[{"_id":"h1","question":"Which river flows past the town where Ada was born?","answer":"the Lune","type":"bridge",
  "supporting_facts":[["Ada Quill",0],["Carrow",1]],
  "context":[["Ada Quill",["Ada Quill was born in Carrow."," She built looms."]],["Carrow",["Carrow is a town."," It lies on the Lune."]]]}]
J
seed fuzz_corpus_2wiki dev.json <<'J'
[{"_id":"w1","type":"compositional","question":"Who is the mother of the director of Film X?","answer":"Mara Lind",
  "supporting_facts":[["Film X",0],["Oren Lind",1]],"evidences":[["Film X","director","Oren Lind"]],
  "context":[["Film X",["Film X is directed by Oren Lind."]],["Oren Lind",["Oren Lind is a director.","His mother is Mara Lind."]]]}]
J
seed fuzz_corpus_triviaqa dev.json <<'J'
{"Version":1.0,"Data":[{"QuestionId":"tq_1","Question":"Which river runs through Carrow?",
 "Answer":{"Value":"Lune","Aliases":["River Lune","Lune"]},
 "EntityPages":[{"DocSource":"TagMe","Filename":"Lune_River.txt","Title":"Lune River"}],
 "SearchResults":[{"Filename":"7/7_1.txt","Title":"Carrow page","Rank":0},{"Filename":"x.txt","Content":"inline text"}]}]}
J
printf 'document_id,set,question,answer1,answer2\nd1,train,Who builds the loom?,Ada,A weaver\r\nd1,train,"Where, then?",Carrow,"In ""Carrow"""\n' |
  seed fuzz_corpus_narrativeqa qaps.csv
printf 'document_id,set,question,answer1,summary\nd2,test,What?,x,"An inline summary."\n' |
  seed fuzz_corpus_narrativeqa inline.csv
head -n 12 "$root/corpora/sample/passages.jsonl" > "$work/small.jsonl"
"$cli" corpus import "$work/small.jsonl" --format jsonl --out "$work/store.db" > /dev/null
mkdir -p "$out/fuzz_corpus_store"
cp "$work/store.db" "$out/fuzz_corpus_store/sample.db"

# Session reports: a short synthetic run of two requests, and a workload run (its workload_*
# tables are what the workbench's Workload Lab reads back).
echo '{"prefix_ids":[1,2,3],"document_ids":[[10,11,12,13],[20,21,22]],"order":[1,0],"query_ids":[30,31],"max_new_tokens":3}' > "$work/req.json"
"$cli" generate --synthetic tiny --request "$work/req.json" --compare lazy,materialized --record "$work/s.db" > /dev/null 2>&1
"$cli" workload --shape tiny --documents 4 --doc-tokens 20 --docs-per-request 2 --requests 3 --concurrency 2 \
  --output-tokens 2 --policies none,lazy --kv-budget 64MiB --record "$work/w.db" > /dev/null
mkdir -p "$out/fuzz_session_report"
cp "$work/s.db" "$out/fuzz_session_report/tiny.db"
cp "$work/w.db" "$out/fuzz_session_report/workload.db"

# Command lines, one argument per line.
seed fuzz_cli cache_demo.txt <<'J'
cache-demo
--documents
20
--zipf
1.5
--block-size
16
J
seed fuzz_cli generate.txt <<'J'
generate
--synthetic
tiny
--request
r.json
--max-new-tokens
8
--kv-budget
64MiB
--compare
lazy,materialized
J
seed fuzz_cli corpus.txt <<'J'
corpus
import
data.jsonl
--format
jsonl
--out
c.db
--chunk-tokens
128
--chunk-overlap
16
J
printf 'corpus\nsearch\nc.db\nriver\n-k\n5\n' | seed fuzz_cli search.txt
printf 'session\ntrace\ns.db\n--out\nt.json\n' | seed fuzz_cli session.txt
printf 'make-model\n--preset\ntiny\n--out\nm\n--dtype\nf32\n' | seed fuzz_cli make_model.txt
printf 'tokenize\n--model\ntiny\nhello\n--pieces\n' | seed fuzz_cli tokenize.txt
printf 'workload\n--preset\npaper\n--requests\n50\n--sweep-kv-budget\n256MiB,1GiB\n--rate\n4.5\n--layout\nwindow\n' |
  seed fuzz_cli workload.txt
printf 'eval\n--model\ntiny\n-k\n3\n--max-new-tokens\n8\n--limit\n5\n--configs\nblock/lazy,full/none\n--kv-budget\n64MiB\n' |
  seed fuzz_cli eval.txt
printf 'overhead\n--shapes\n32/8/128,smollm2-135m\n--contexts\n1024,4096\n--batches\n1,4\n--timing-ms\n2.5\n--repeats\n5\n' |
  seed fuzz_cli overhead.txt
echo "seeds in $out: $(find "$out" -type f | wc -l) files"

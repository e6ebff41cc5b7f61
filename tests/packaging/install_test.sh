#!/usr/bin/env bash
# Installs the build into a temporary DESTDIR, moves the installed tree somewhere else, and runs
# both programs from there with a bare environment: they must find their data (tokenizer text,
# sample corpus) next to themselves, never in the source or build tree. Where user namespaces
# allow it, the source tree is also hidden behind an empty mount while they run.
# Usage: install_test.sh BUILD_DIR SOURCE_DIR HAVE_GUI(ON|OFF) HAVE_MAN_PAGES(ON|OFF) HAVE_ICONS(ON|OFF)
set -uo pipefail
build="$1" source="$2" have_gui="$3" have_man="$4" have_icons="$5"
work=$(mktemp -d "${TMPDIR:-/tmp}/lazyscope-install-test.XXXXXX")
trap 'rm -rf "$work"' EXIT
failures=0
ok() { echo "ok   $*"; }
bad() {
  echo "FAIL $*"
  failures=$((failures + 1))
}

DESTDIR="$work/dest" cmake --install "$build" --prefix /usr >"$work/install.log" 2>&1 ||
  { cat "$work/install.log"; echo "FAIL cmake --install (build every target first)"; exit 1; }
# Relocate: the programs may not rely on the prefix they were configured with either.
prefix="$work/elsewhere/opt-lazyscope"
mkdir -p "$(dirname "$prefix")"
mv "$work/dest/usr" "$prefix"
rm -rf "$work/dest"

for f in bin/lazyscope-cli share/lazyscope/lazyscope-data share/lazyscope/text/towns_and_rivers.txt \
  share/lazyscope/corpus/sample/passages.jsonl share/lazyscope/corpus/sample/questions.jsonl \
  share/doc/lazyscope/README.md share/doc/lazyscope/docs/design.md share/doc/lazyscope/docs/formats.md \
  share/applications/org.lazyscope.LazyScope.desktop share/metainfo/org.lazyscope.LazyScope.metainfo.xml \
  share/icons/hicolor/scalable/apps/org.lazyscope.LazyScope.svg \
  share/bash-completion/completions/lazyscope-cli share/bash-completion/completions/lazyscope; do
  if [ -e "$prefix/$f" ]; then ok "installed $f"; else bad "not installed: $f"; fi
done
if [ "$have_gui" = ON ]; then
  [ -x "$prefix/bin/lazyscope" ] && ok "installed bin/lazyscope" || bad "not installed: bin/lazyscope"
fi
if [ "$have_icons" = ON ]; then
  for size in 16 32 48 128 256; do
    icon="share/icons/hicolor/${size}x${size}/apps/org.lazyscope.LazyScope.png"
    if file "$prefix/$icon" 2>/dev/null | grep -q "PNG image data, $size x $size"; then ok "icon $icon"; else bad "icon $icon missing or not ${size}x${size}"; fi
  done
fi
if [ "$have_man" = ON ]; then
  for page in lazyscope-cli $([ "$have_gui" = ON ] && echo lazyscope); do
    man1="$prefix/share/man/man1/$page.1"
    if grep -q "^\.TH" "$man1" 2>/dev/null && grep -q "^\.SH OPTIONS" "$man1"; then ok "man page $page.1"; else bad "man page $page.1 missing or empty"; fi
  done
fi
if command -v appstreamcli >/dev/null; then
  if appstreamcli validate --no-net "$prefix/share/metainfo/org.lazyscope.LazyScope.metainfo.xml" >"$work/as.log" 2>&1; then
    ok "appstreamcli validate"
  else
    cat "$work/as.log"
    bad "appstreamcli validate"
  fi
fi

# The programs run with a bare environment: no LAZYSCOPE_* variables, a fresh home and cache.
home="$work/home"
mkdir -p "$home"
cat >"$work/request.json" <<'JSON'
{"prefix": "Answer briefly.", "documents": ["The bell of Pellworth rings at noon.", "Marra Voss built it."],
 "order": [1, 0], "query": "Who built the bell?", "max_new_tokens": 3}
JSON
hide=""
if unshare -rm true 2>/dev/null; then
  hidden=("$source")
  case "$(realpath "$build")/" in "$(realpath "$source")"/*) ;; *) hidden+=("$build") ;; esac
  for dir in "${hidden[@]}"; do
    hide+="mount -t tmpfs lazyscope-hidden '$dir' || { echo 'cannot hide $dir'; exit 97; }; "
  done
  echo "note ${hidden[*]} hidden behind empty mounts while the programs run"
else
  echo "note user namespaces are unavailable: the programs run from the moved copy, the source tree stays visible"
fi
run() {  # run NAME COMMAND... : runs from the installed copy, output in $work/NAME.log
  local name="$1"
  shift
  local quoted
  quoted=$(printf '%q ' "$@")
  local script="cd '$work' && exec env -i HOME='$home' PATH=/usr/bin:/bin QT_QPA_PLATFORM=offscreen $quoted"
  if [ -n "$hide" ]; then
    unshare -rm sh -c "$hide $script" >"$work/$name.log" 2>&1
  else
    sh -c "$script" >"$work/$name.log" 2>&1
  fi
}
expect() {  # expect NAME RC TEXT COMMAND...
  local name="$1" want="$2" text="$3"
  shift 3
  run "$name" "$@"
  local rc=$?
  if { [ "$want" = 0 ] && [ $rc -ne 0 ]; } || { [ "$want" != 0 ] && [ $rc -eq 0 ]; } ||
    ! grep -qF -- "$text" "$work/$name.log"; then
    bad "$name (exit $rc):"
    sed 's/^/     /' "$work/$name.log" | tail -20
  else
    ok "$name"
  fi
}
cli="$prefix/bin/lazyscope-cli"
expect "lazyscope-cli --help" 0 "generate" "$cli" --help
expect "lazyscope-cli --version names the data folder" 0 "$prefix/share/lazyscope" "$cli" --version
expect "make-model trains its tokenizer on the installed text" 0 "wrote tiny checkpoint" \
  "$cli" make-model --preset tiny --seed 3 --out "$work/tiny"
expect "a tiny generate" 0 "identical" "$cli" generate --model "$work/tiny" --request "$work/request.json" \
  --compare lazy,materialized --backend cpu
expect "the generated default model" 0 "prompt tokens" env LAZYSCOPE_MODEL_DIR="$work/models" \
  "$cli" generate --model tiny --request "$work/request.json" --backend cpu
expect "corpus search in the installed sample" 0 "p015" "$cli" corpus search "tidal lantern" -k 1
if [ "$have_gui" = ON ]; then
  expect "lazyscope --help" 0 "--kv-budget" "$prefix/bin/lazyscope" --help
fi
# The completion reads the installed program's own help.
cat >"$work/complete.sh" <<EOS
source '$prefix/share/bash-completion/completions/lazyscope-cli'
PATH='$prefix/bin':\$PATH
COMP_WORDS=(lazyscope-cli gen); COMP_CWORD=1; _lazyscope; echo "commands: \${COMPREPLY[*]}"
COMP_WORDS=(lazyscope-cli generate --comp); COMP_CWORD=2; _lazyscope; echo "options: \${COMPREPLY[*]}"
COMP_WORDS=(lazyscope-cli corpus se); COMP_CWORD=2; _lazyscope; echo "nested: \${COMPREPLY[*]}"
EOS
expect "bash completion: commands" 0 "commands: generate" bash "$work/complete.sh"
expect "bash completion: options" 0 "options: --compare" bash "$work/complete.sh"
expect "bash completion: nested commands" 0 "nested: search" bash "$work/complete.sh"

# Without its data the installed program says what is missing, naming its own data folder:
# proof that it never falls back to the source tree.
rm -rf "$prefix/share/lazyscope/text"
expect "missing installed text is an error naming it" 1 "$prefix/share/lazyscope/text" \
  "$cli" make-model --preset tiny --out "$work/tiny2"

if ((failures)); then
  echo "$failures check(s) failed"
  exit 1
fi
echo "all install checks passed"

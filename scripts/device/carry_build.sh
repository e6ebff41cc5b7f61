#!/usr/bin/env bash
# Builds the CUDA test and benchmark binaries here, where no GPU is needed (sm_90 and the sm_90a
# object alone), for a base git revision and for the working tree, and packs them for the device
# tool's `carry`: .devbin/bins.tar.xz with base/ and new/ (stripped; a few MB compressed). The
# device machine then runs them without building (scripts/device/carried_run.sh), both in the same
# call, so every comparison is base against new on one GPU.
# Usage: scripts/device/carry_build.sh [BASE_REF]   (default HEAD)
# Needs: nvcc at /usr/local/cuda, the packages of scripts/setup.sh. .devbin/ must be git-ignored
# (echo /.devbin/ >> .git/info/exclude) so that only what carry names travels.
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
base_ref="${1:-HEAD}"
targets="test_kernels_cuda bench_cuda_attention bench_cuda_end_to_end"
args=(-G Ninja -DLAZYSCOPE_WITH_GUI=OFF -DCMAKE_CUDA_ARCHITECTURES=90 -DLAZYSCOPE_BUILD_BENCH=ON -DLAZYSCOPE_PYTHON=python3)
build() {  # source dir, build dir, output dir (logs in the build dir)
  mkdir -p "$2"
  cmake -S "$1" -B "$2" "${args[@]}" > "$2/configure.log"
  ninja -C "$2" -j "$(nproc)" $targets > "$2/build.log"
  mkdir -p "$3"
  cp "$2/tests/test_kernels_cuda" "$2/bench/bench_cuda_attention" "$2/bench/bench_cuda_end_to_end" "$3/"
  strip "$3"/*
}
mkdir -p "$root/.devbin"
worktree="$root/build-carry-base-src"
rm -rf "$worktree" && git -C "$root" worktree prune
git -C "$root" worktree add --detach "$worktree" "$base_ref" > /dev/null
build "$worktree" "$root/build-carry-base" "$root/.devbin/base"
git -C "$root" worktree remove --force "$worktree"
build "$root" "$root/build-carry-new" "$root/.devbin/new"
(cd "$root/.devbin" && rm -f bins.tar.xz && tar cJf bins.tar.xz base new)
echo "carry .devbin/bins.tar.xz ($(du -h "$root/.devbin/bins.tar.xz" | cut -f1)): base = $base_ref, new = the working tree"

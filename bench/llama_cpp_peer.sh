#!/bin/sh
# Builds llama.cpp's llama-bench as a speed peer for bench_cpu_speed: its source comes from the
# llama-cpp-python source distribution on PyPI (which vendors llama.cpp). A benchmark tool only,
# never a dependency of LazyScope; everything lands under DEST (default build/peers/llama.cpp).
#
#   bench/llama_cpp_peer.sh [DEST]        prints the path of llama-bench when done
#   then: llama-bench -m MODEL.gguf -t 1 -p 512 -n 128
set -eu
dest=${1:-build/peers/llama.cpp}
python=${PYTHON:-python3}
mkdir -p "$dest"
dest=$(cd "$dest" && pwd)
bench="$dest/build/bin/llama-bench"
if [ ! -x "$bench" ]; then
  if [ ! -d "$dest/src" ]; then
    "$python" -m pip download --no-binary llama-cpp-python --no-deps -d "$dest/sdist" llama-cpp-python
    archive=$(ls "$dest"/sdist/llama_cpp_python-*.tar.gz | head -n 1)
    mkdir -p "$dest/src"
    tar -xzf "$archive" -C "$dest/src" --strip-components=1
  fi
  # Native build (AVX-512/VNNI where the processor has them), CPU backend only, no downloads.
  cmake -S "$dest/src/vendor/llama.cpp" -B "$dest/build" -DCMAKE_BUILD_TYPE=Release \
    -DGGML_NATIVE=ON -DGGML_CUDA=OFF -DLLAMA_CURL=OFF -DLLAMA_BUILD_TESTS=OFF \
    -DLLAMA_BUILD_SERVER=OFF >"$dest/cmake.log"
  cmake --build "$dest/build" --target llama-bench -j "${JOBS:-2}" >"$dest/build.log"
fi
echo "$bench"

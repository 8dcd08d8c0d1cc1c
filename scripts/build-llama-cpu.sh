#!/usr/bin/env bash
# Builds a small CPU-only llama.cpp (just llama-completion: llama-cli needs the server and web UI at this build) from a real source tree, for check-build's
# test with a real binary. Cached: does nothing when OUT/bin/llama-completion exists.
#
#   scripts/build-llama-cpu.sh SRC OUT
set -euo pipefail
src=$1
out=$2
if [ -x "$out/bin/llama-completion" ]; then
    echo "build-llama-cpu: $out/bin/llama-completion exists (cached)"
    exit 0
fi
gen=()
command -v ninja >/dev/null 2>&1 && gen=(-G Ninja)
cmake -S "$src" -B "$out" "${gen[@]}" -DCMAKE_BUILD_TYPE=Release -DGGML_NATIVE=OFF \
    -DLLAMA_CURL=OFF -DLLAMA_OPENSSL=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF \
    -DLLAMA_BUILD_SERVER=OFF -DBUILD_SHARED_LIBS=OFF >"$out.configure.log" 2>&1 \
    || { tail -30 "$out.configure.log"; exit 1; }
cmake --build "$out" --target llama-completion -j "$(getconf _NPROCESSORS_ONLN)"

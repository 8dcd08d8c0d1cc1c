#!/usr/bin/env bash
# Builds a small CPU-only llama.cpp from a real source tree, for check-build's tests with real
# binaries: llama-completion (llama-cli needs the server and web UI at this build) and
# test-backend-ops (for `check-build --exercise`; it needs LLAMA_BUILD_TESTS=ON). Cached: does
# nothing when both exist in OUT/bin. Static (GGML_BACKEND_DL off too, or a value left in OUT's
# CMake cache by an earlier configure stops it).
#
#   scripts/build-llama-cpu.sh SRC OUT
set -euo pipefail
src=$1
out=$2
if [ -x "$out/bin/llama-completion" ] && [ -x "$out/bin/test-backend-ops" ]; then
    echo "build-llama-cpu: $out/bin/llama-completion and test-backend-ops exist (cached)"
    exit 0
fi
gen=()
command -v ninja >/dev/null 2>&1 && gen=(-G Ninja)
cmake -S "$src" -B "$out" "${gen[@]}" -DCMAKE_BUILD_TYPE=Release -DGGML_NATIVE=OFF \
    -DLLAMA_CURL=OFF -DLLAMA_OPENSSL=OFF -DLLAMA_BUILD_TESTS=ON -DLLAMA_BUILD_EXAMPLES=OFF \
    -DLLAMA_BUILD_SERVER=OFF -DBUILD_SHARED_LIBS=OFF -DGGML_BACKEND_DL=OFF >"$out.configure.log" 2>&1 \
    || { tail -30 "$out.configure.log"; exit 1; }
cmake --build "$out" --target llama-completion test-backend-ops -j "$(getconf _NPROCESSORS_ONLN)"

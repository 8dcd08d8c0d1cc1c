#!/usr/bin/env bash
# Builds small CPU-only llama.cpp trees from a real source tree, for tests with real binaries.
#
#   scripts/build-llama-cpu.sh SRC OUT
#       check-build's build: llama-completion (llama-cli needs the server and web UI at this build)
#       and test-backend-ops (for `check-build --exercise`; it needs LLAMA_BUILD_TESTS=ON), and
#       llama-perplexity, llama-bench, llama-quantize (for `check-build --exercise inference`; they
#       share libllama and common with llama-completion, so they add only their own sources).
#       Cached: does nothing when they all exist in OUT/bin. Static (GGML_BACKEND_DL off too, or a value left
#       in OUT's CMake cache by an earlier configure stops it).
#
#   scripts/build-llama-cpu.sh --package SRC OUT [PACKAGE_FLAGS...]
#       the release self-check's build: llama-cli and llama-completion with the flags a generated
#       release workflow gives every Linux build (PACKAGE_FLAGS: its GPUPROBE_PACKAGE_ARGS, $ORIGIN
#       RPATH, GGML_BACKEND_DL, ...; scripts/test.sh reads them from `gpuprobe workflow` output),
#       plus -DCMAKE_BUILD_TYPE=Release -DGGML_NATIVE=OFF (what every plan gives) and, because CI
#       reaches package registries only, -DLLAMA_USE_PREBUILT_UI=OFF (no web UI download);
#       -DLLAMA_BUILD_BORINGSSL=ON (BoringSSL from its git host, Windows flags only today) would
#       become -DLLAMA_OPENSSL=OFF, and -DGGML_CPU_ALL_VARIANTS=ON becomes OFF (one CPU module, not a
#       dozen: CI time). Packs OUT/pkg/llama-cpu.tar.gz with templates/package.sh, and
#       OUT/pkg/llama-cpu-no-origin.tar.gz from the same objects relinked with CMake's default build
#       RPATH instead of $ORIGIN (it must fail the self-check), then relinks OUT back. Cached: does
#       nothing when OUT/.gpuprobe-flags holds the same flags and both archives exist.
set -euo pipefail

gen=()
command -v ninja >/dev/null 2>&1 && gen=(-G Ninja)
jobs=$(getconf _NPROCESSORS_ONLN)

if [ "${1:-}" != --package ]; then
    src=$1
    out=$2
    if [ -x "$out/bin/llama-completion" ] && [ -x "$out/bin/test-backend-ops" ] \
        && [ -x "$out/bin/llama-perplexity" ] && [ -x "$out/bin/llama-bench" ] && [ -x "$out/bin/llama-quantize" ]; then
        echo "build-llama-cpu: $out/bin/llama-completion, test-backend-ops, llama-perplexity, llama-bench, llama-quantize exist (cached)"
        exit 0
    fi
    cmake -S "$src" -B "$out" "${gen[@]}" -DCMAKE_BUILD_TYPE=Release -DGGML_NATIVE=OFF \
        -DLLAMA_CURL=OFF -DLLAMA_OPENSSL=OFF -DLLAMA_BUILD_TESTS=ON -DLLAMA_BUILD_EXAMPLES=OFF \
        -DLLAMA_BUILD_SERVER=OFF -DBUILD_SHARED_LIBS=OFF -DGGML_BACKEND_DL=OFF >"$out.configure.log" 2>&1 \
        || { tail -30 "$out.configure.log"; exit 1; }
    cmake --build "$out" --target llama-completion test-backend-ops llama-perplexity llama-bench llama-quantize -j "$jobs"
    exit 0
fi

shift
src=$1
out=$2
shift 2
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
flags=(-DCMAKE_BUILD_TYPE=Release -DGGML_NATIVE=OFF -DLLAMA_USE_PREBUILT_UI=OFF)
for f in "$@"; do
    case "$f" in
        -DLLAMA_BUILD_BORINGSSL=*) flags+=(-DLLAMA_OPENSSL=OFF) ;;
        # A dozen CPU variants cost ~30 min on CI's 2 cores; one CPU backend module still makes
        # the package load its backends through GGML_BACKEND_DL, which is what is checked here.
        -DGGML_CPU_ALL_VARIANTS=ON) flags+=(-DGGML_CPU_ALL_VARIANTS=OFF) ;;
        *) flags+=("$f") ;;
    esac
done
stamp="$out/.gpuprobe-flags"
pkg="$out/pkg"
if [ -x "$out/bin/llama-cli" ] && [ -f "$pkg/llama-cpu.tar.gz" ] && [ -f "$pkg/llama-cpu-no-origin.tar.gz" ] \
    && [ "$(cat "$stamp" 2>/dev/null)" = "${flags[*]}" ]; then
    echo "build-llama-cpu: $out is built and packed with these flags (cached)"
    exit 0
fi
# Other flags, or a build from an older version of this script: start from an empty tree (the
# CMake cache keeps old values such as BUILD_SHARED_LIBS otherwise).
rm -rf "$out"
mkdir -p "$out"
configure() {
    cmake -S "$src" -B "$out" "${gen[@]}" "$@" >"$out.configure.log" 2>&1 \
        || { tail -30 "$out.configure.log"; exit 1; }
}
build() { cmake --build "$out" --target llama-cli llama-completion -j "$jobs"; }
t0=$(date +%s)
echo "build-llama-cpu: cmake ${flags[*]}"
configure "${flags[@]}"
build
echo "build-llama-cpu: built in $(( $(date +%s) - t0 )) s"
bash "$root/templates/package.sh" "$out" "$src" "$pkg" llama-cpu | tail -n 3

# The negative case: the same objects relinked without the install RPATH.
configure -DCMAKE_BUILD_WITH_INSTALL_RPATH=OFF
build >/dev/null
bash "$root/templates/package.sh" "$out" "$src" "$pkg" llama-cpu-no-origin | tail -n 1
configure "${flags[@]}"
build >/dev/null
printf '%s' "${flags[*]}" > "$stamp"
echo "build-llama-cpu: done in $(( $(date +%s) - t0 )) s"

#!/bin/sh
# Build the single-source probe program probes/gpuprobe-probe.cpp with warnings as errors.
#
# Usage: scripts/build-probe.sh hip|cuda OUTDIR [ARCH...]
#   hip:  hipcc, --offload-arch for each ARCH (default: gfx906 gfx1030); ARCH may carry target
#         features (gfx90a:xnack-). Output: OUTDIR/gpuprobe-probe-hip
#   cuda: nvcc, static cudart; always sm_75 (SASS + PTX for newer GPUs) plus SASS for each ARCH
#         (sm_90 or 90). Output: OUTDIR/gpuprobe-probe-cuda
# Compilers: $HIPCC / $NVCC, else $GPUPROBE_HIPCC / $GPUPROBE_NVCC, else on PATH, else from
# .cache/tools/env.sh (scripts/install-toolchains.sh). Extra flags: $GPUPROBE_PROBE_CFLAGS.
set -eu

usage() { echo "usage: $0 hip|cuda OUTDIR [ARCH...]" >&2; exit 2; }
[ $# -ge 2 ] || usage
backend=$1
out=$2
shift 2

here=$(cd "$(dirname "$0")/.." && pwd)
src=$here/probes/gpuprobe-probe.cpp
env_sh=${GPUPROBE_TOOLS:-$here/.cache/tools}/env.sh
extra=${GPUPROBE_PROBE_CFLAGS:-}
mkdir -p "$out"

# find_tool VAR NAME: $VAR, else $GPUPROBE_VAR, else NAME on PATH, else after sourcing env.sh.
find_tool() {
    eval "t=\${$1:-\${GPUPROBE_$1:-}}"
    if [ -z "$t" ] && command -v "$2" >/dev/null 2>&1; then t=$2; fi
    if [ -z "$t" ] && [ -f "$env_sh" ]; then
        # shellcheck disable=SC1090
        . "$env_sh"
        eval "t=\${GPUPROBE_$1:-}"
    fi
    if [ -z "$t" ] || ! command -v "$t" >/dev/null 2>&1; then
        echo "build-probe: $2 not found; run scripts/install-toolchains.sh" >&2
        exit 1
    fi
    echo "$t"
}

case "$backend" in
hip)
    hipcc=$(find_tool HIPCC hipcc)
    [ $# -gt 0 ] || set -- gfx906 gfx1030
    archs=""
    for a in "$@"; do archs="$archs --offload-arch=$a"; done
    bin=$out/gpuprobe-probe-hip
    # shellcheck disable=SC2086
    set -x
    # hipcc picks the NVIDIA platform when it sees nvcc on PATH; this is an AMD build.
    HIP_PLATFORM=amd "$hipcc" -x hip -std=c++17 -O2 -Wall -Wextra -Werror $archs $extra "$src" -o "$bin"
    ;;
cuda)
    nvcc=$(find_tool NVCC nvcc)
    gencode="-gencode arch=compute_75,code=[sm_75,compute_75]"
    for a in "$@"; do
        n=${a#sm_}
        n=${n#compute_}
        case "$n" in ''|*[!0-9a-z]*) echo "build-probe: bad CUDA arch: $a" >&2; exit 2 ;; esac
        [ "$n" = 75 ] || gencode="$gencode -gencode arch=compute_$n,code=sm_$n"
    done
    bin=$out/gpuprobe-probe-cuda
    # shellcheck disable=SC2086
    set -x
    "$nvcc" -x cu -std=c++17 -O2 -cudart=static $gencode -Werror all-warnings \
        -Xcompiler -Wall,-Wextra,-Werror $extra "$src" -o "$bin"
    ;;
*) usage ;;
esac
set +x
echo "$bin"

#!/bin/sh
# Build the single-source probe program probes/gpuprobe-probe.cpp with warnings as errors.
#
# Usage: scripts/build-probe.sh hip|cuda OUTDIR [ARCH...]
#        scripts/build-probe.sh hip-clang OUTDIR HIP_ROOT [ARCH...]
#   hip:  hipcc, --offload-arch for each ARCH (default: gfx906 gfx1030); ARCH may carry target
#         features (gfx90a:xnack-). Output: OUTDIR/gpuprobe-probe-hip
#   hip-clang: clang++-19 with lld against the HIP header tree HIP_ROOT (include/hip/ and
#         bin/.hipVersion, as scripts/install-toolchains.sh lays them out from PyPI wheels), host and
#         device code, code objects for each ARCH (default: gfx906 gfx1030 gfx1100 gfx1151 gfx1201),
#         without ROCm's device library (the kernels need none). Compile only: no HIP runtime library
#         of that generation is at hand to link against. Output: OUTDIR/gpuprobe-probe-hip-MAJOR.MINOR.o
#   cuda: nvcc, static cudart; always sm_75 (SASS + PTX for newer GPUs) plus SASS for each ARCH
#         (sm_90 or 90). Output: OUTDIR/gpuprobe-probe-cuda
# Both HIP builds first compile probes/compat-hip-check.cpp (compile-time checks of what the probe
# relies on in these headers) and check that -Werror catches a warning in the project's own code.
# Compilers: $HIPCC / $HIP_CLANG / $NVCC, else $GPUPROBE_HIPCC / $GPUPROBE_HIP_CLANG / $GPUPROBE_NVCC,
# else on PATH (hipcc, clang++-19, nvcc), else from .cache/tools/env.sh (scripts/install-toolchains.sh).
# Extra flags: $GPUPROBE_PROBE_CFLAGS.
set -eu

usage() {
    echo "usage: $0 hip|cuda OUTDIR [ARCH...]  or  $0 hip-clang OUTDIR HIP_ROOT [ARCH...]" >&2
    exit 2
}
[ $# -ge 2 ] || usage
backend=$1
out=$2
shift 2

here=$(cd "$(dirname "$0")/.." && pwd)
src=$here/probes/gpuprobe-probe.cpp
check_src=$here/probes/compat-hip-check.cpp
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

# hip_checks COMPILER FIRST_ARCH [FLAG...]: the compile-time checks (syntax only, host and one device
# architecture), then the proof that -Werror reaches the project's code: one planted warning must
# fail the build, and for that reason.
hip_checks() {
    cc=$1
    arch=$2
    shift 2
    echo "build-probe: compile-time checks (probes/compat-hip-check.cpp)" >&2
    # shellcheck disable=SC2086
    "$cc" -x hip -std=c++17 -fsyntax-only --offload-arch="$arch" "$@" $extra "$check_src"
    # shellcheck disable=SC2086
    if planted=$("$cc" -x hip -std=c++17 -fsyntax-only --offload-arch="$arch" -Wall -Wextra -Werror \
        -DGP_CHECK_WARNING_SELFTEST "$@" $extra "$check_src" 2>&1); then
        echo "build-probe: a planted warning compiled cleanly: -Werror does not reach the project's code" >&2
        exit 1
    fi
    case "$planted" in
        *compat-hip-check.cpp*-Werror,-Wunused-parameter*) ;;
        *)
            echo "build-probe: the planted-warning build failed for another reason:" >&2
            printf '%s\n' "$planted" >&2
            exit 1 ;;
    esac
}

case "$backend" in
hip)
    hipcc=$(find_tool HIPCC hipcc)
    [ $# -gt 0 ] || set -- gfx906 gfx1030
    archs=""
    for a in "$@"; do archs="$archs --offload-arch=$a"; done
    bin=$out/gpuprobe-probe-hip
    # hipcc picks the NVIDIA platform when it sees nvcc on PATH; this is an AMD build.
    export HIP_PLATFORM=amd
    # hipcc adds its link flags even to a syntax-only run.
    hip_checks "$hipcc" "$1" -Wno-unused-command-line-argument
    # shellcheck disable=SC2086
    set -x
    "$hipcc" -x hip -std=c++17 -O2 -Wall -Wextra -Werror $archs $extra "$src" -o "$bin"
    ;;
hip-clang)
    [ $# -ge 1 ] || usage
    root=$1
    shift
    version_h=$root/include/hip/hip_version.h
    if ! [ -f "$version_h" ] || ! [ -f "$root/bin/.hipVersion" ]; then
        echo "build-probe: $root is no HIP header tree (needs include/hip/hip_version.h and bin/.hipVersion); run scripts/install-toolchains.sh" >&2
        exit 1
    fi
    major=$(sed -n 's/^#define HIP_VERSION_MAJOR \([0-9][0-9]*\).*/\1/p' "$version_h")
    minor=$(sed -n 's/^#define HIP_VERSION_MINOR \([0-9][0-9]*\).*/\1/p' "$version_h")
    if [ -z "$major" ] || [ -z "$minor" ]; then
        echo "build-probe: no HIP_VERSION_MAJOR/MINOR in $version_h" >&2
        exit 1
    fi
    clang=$(find_tool HIP_CLANG clang++-19)
    [ $# -gt 0 ] || set -- gfx906 gfx1030 gfx1100 gfx1151 gfx1201
    archs=""
    for a in "$@"; do archs="$archs --offload-arch=$a"; done
    bin=$out/gpuprobe-probe-hip-$major.$minor.o
    # --hip-path puts the tree after /usr/include (-idirafter), where Debian's 5.2 headers may be;
    # -isystem puts it first and keeps it a system directory (no project warnings from it).
    # -nogpulib: no ROCm device library exists here for gfx11/gfx12, and the kernels need none.
    hip_checks "$clang" "$1" --hip-path="$root" -isystem "$root/include" -nogpulib \
        -DGP_EXPECT_HIP_MAJOR="$major" -DGP_EXPECT_HIP_MINOR="$minor" -DGP_CHECK_REQUIRE_LAYOUT
    # shellcheck disable=SC2086
    set -x
    "$clang" -x hip -std=c++17 -O2 -Wall -Wextra -Werror --hip-path="$root" -isystem "$root/include" \
        -nogpulib $archs $extra -c "$src" -o "$bin"
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

#!/bin/sh
# Install the toolchains gpuprobe's CI needs to build the probe program on a GPU-less
# Debian 12 machine (run as root):
#   HIP:  Debian's hipcc (ROCm 5.2.3, clang 15) and libamdhip64-dev, from apt.
#   CUDA: nvcc 13 + headers + static cudart from PyPI, in a venv at $GPUPROBE_TOOLS/cuda.
# Idempotent: what is already there is not fetched again.
# At the end it writes $GPUPROBE_TOOLS/env.sh; `. .cache/tools/env.sh` puts nvcc and ptxas on PATH
# and sets CUDA_HOME, CUDA_PATH, GPUPROBE_NVCC, GPUPROBE_PTXAS, GPUPROBE_HIPCC.
#
# Usage: scripts/install-toolchains.sh [--hip-only | --cuda-only]
# Env:   GPUPROBE_TOOLS (default: $PWD/.cache/tools), PYTHON (default: python3)
set -eu

want_hip=1
want_cuda=1
for arg in "$@"; do
    case "$arg" in
        --hip-only) want_cuda=0 ;;
        --cuda-only) want_hip=0 ;;
        -h|--help)
            sed -n '2,12p' "$0" | sed 's/^# \{0,1\}//'
            exit 0 ;;
        *) echo "install-toolchains: unknown argument: $arg" >&2; exit 2 ;;
    esac
done
if [ "$want_hip" = 0 ] && [ "$want_cuda" = 0 ]; then
    echo "install-toolchains: --hip-only and --cuda-only exclude each other" >&2
    exit 2
fi

TOOLS=${GPUPROBE_TOOLS:-$PWD/.cache/tools}
PYTHON=${PYTHON:-python3}
mkdir -p "$TOOLS"
TOOLS=$(cd "$TOOLS" && pwd)
VENV=$TOOLS/cuda
# PyPI wheels (CUDA 13): nvcc (pulls nvidia-nvvm), cudart + cuda.h/cudaTypedefs.h, crt headers.
# Pinned: src/probe/cuda/sys.rs is bindgen output over this cuda.h, and a test checks it is current.
CUDA_WHEELS="nvidia-cuda-nvcc==13.5.37 nvidia-cuda-runtime==13.5.37 nvidia-cuda-crt==13.5.37 nvidia-nvvm==13.5.37"

log() { echo "install-toolchains: $*" >&2; }

# ---- apt: one update, one install, only for what is missing -------------------------------
apt_pkgs=""
if [ "$want_hip" = 1 ]; then
    if ! [ -x /usr/bin/hipcc ]; then apt_pkgs="$apt_pkgs hipcc"; fi
    if ! [ -f /usr/include/hip/hip_runtime.h ]; then apt_pkgs="$apt_pkgs libamdhip64-dev"; fi
fi
if [ "$want_cuda" = 1 ] && ! [ -x "$VENV/bin/python" ]; then
    if ! command -v "$PYTHON" >/dev/null 2>&1; then
        apt_pkgs="$apt_pkgs python3 python3-venv"
    elif ! "$PYTHON" -c 'import venv, ensurepip' >/dev/null 2>&1; then
        apt_pkgs="$apt_pkgs python3-venv"
    fi
fi
if [ -n "$apt_pkgs" ]; then
    if [ "$(id -u)" != 0 ]; then
        log "need root for: apt-get install$apt_pkgs"
        exit 1
    fi
    log "apt-get install$apt_pkgs"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update
    # shellcheck disable=SC2086
    apt-get install -y $apt_pkgs
fi

# ---- CUDA venv ----------------------------------------------------------------------------
CUDA_ROOT=""
find_cuda_root() {
    CUDA_ROOT=$("$VENV/bin/python" - <<'EOF' 2>/dev/null || true
import os, sysconfig
root = os.path.join(sysconfig.get_paths()["purelib"], "nvidia", "cu13")
print(root if os.path.isfile(os.path.join(root, "bin", "nvcc")) else "")
EOF
)
}
if [ "$want_cuda" = 1 ]; then
    if ! [ -x "$VENV/bin/python" ]; then
        log "creating venv $VENV"
        "$PYTHON" -m venv "$VENV"
    fi
    find_cuda_root
    if [ -z "$CUDA_ROOT" ] || ! [ -f "$CUDA_ROOT/include/cudaTypedefs.h" ] \
        || ! [ -f "$CUDA_ROOT/lib/libcudart_static.a" ]; then
        log "pip install $CUDA_WHEELS"
        # shellcheck disable=SC2086
        "$VENV/bin/python" -m pip install --disable-pip-version-check -q $CUDA_WHEELS
        find_cuda_root
    fi
    if [ -z "$CUDA_ROOT" ]; then
        log "nvcc not found under $VENV after pip install"
        exit 1
    fi
fi

# ---- env.sh -------------------------------------------------------------------------------
ENV_SH=$TOOLS/env.sh
tmp=$ENV_SH.tmp.$$
{
    echo "# Written by scripts/install-toolchains.sh; source it: . $ENV_SH"
    if [ "$want_cuda" = 1 ] || [ -n "$CUDA_ROOT" ]; then
        echo "export CUDA_HOME='$CUDA_ROOT'"
        echo "export CUDA_PATH='$CUDA_ROOT'"
        echo "export CUDA_TOOLKIT_ROOT_DIR='$CUDA_ROOT'"
        echo "export GPUPROBE_CUDA_ROOT='$CUDA_ROOT'"
        echo "export GPUPROBE_CUDA_INCLUDE='$CUDA_ROOT/include'"
        echo "export GPUPROBE_NVCC='$CUDA_ROOT/bin/nvcc'"
        echo "export GPUPROBE_PTXAS='$CUDA_ROOT/bin/ptxas'"
        echo "case \":\$PATH:\" in *':$CUDA_ROOT/bin:'*) ;; *) export PATH='$CUDA_ROOT/bin':\"\$PATH\" ;; esac"
    fi
    if [ "$want_hip" = 1 ]; then
        echo "export GPUPROBE_HIPCC='/usr/bin/hipcc'"
        echo "export GPUPROBE_HIP_INCLUDE='/usr/include'"
    fi
} >"$tmp"
# A later --hip-only / --cuda-only run keeps the other half of an earlier env.sh.
if [ -f "$ENV_SH" ]; then
    if [ "$want_cuda" = 0 ]; then grep -E "CUDA|GPUPROBE_NVCC|GPUPROBE_PTXAS|PATH" "$ENV_SH" | grep -v '^#' >>"$tmp" || true; fi
    if [ "$want_hip" = 0 ]; then grep -E "GPUPROBE_HIP" "$ENV_SH" >>"$tmp" || true; fi
fi
mv "$tmp" "$ENV_SH"

if [ "$want_hip" = 1 ]; then
    log "hipcc: $(/usr/bin/hipcc --version 2>/dev/null | grep -E 'HIP version|clang version' | tr '\n' ' ')"
fi
if [ -n "$CUDA_ROOT" ]; then
    log "nvcc: $("$CUDA_ROOT/bin/nvcc" --version | tail -n 2 | head -n 1)"
fi
log "wrote $ENV_SH"
cat "$ENV_SH"

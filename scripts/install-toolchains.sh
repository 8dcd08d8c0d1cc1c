#!/bin/sh
# Install the toolchains gpuprobe's CI needs to build the probe program on a GPU-less
# Debian 12 machine (run as root):
#   HIP:  Debian's hipcc (ROCm 5.2.3, clang 15) and libamdhip64-dev, from apt; Debian's clang-19,
#         lld-19, llvm-19 and clang-tools-19 (offload bundler); and the HIP 6.1, 6.2 and 7.1 header
#         trees from PyPI triton wheels, unpacked to $GPUPROBE_TOOLS/hip-headers/<major.minor>.
#   CUDA: nvcc 13 + headers + static cudart from PyPI, in a venv at $GPUPROBE_TOOLS/cuda (whose pip
#         also fetches the triton wheels).
# Idempotent: what is already there is not fetched again.
# At the end it writes $GPUPROBE_TOOLS/env.sh; `. .cache/tools/env.sh` puts nvcc and ptxas on PATH
# and sets CUDA_HOME, CUDA_PATH, GPUPROBE_NVCC, GPUPROBE_PTXAS, GPUPROBE_HIPCC, GPUPROBE_HIP_CLANG,
# GPUPROBE_HIP_LLVM_BIN, GPUPROBE_HIP_HEADERS and GPUPROBE_HIP_GENERATIONS.
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
            sed -n '2,17p' "$0" | sed 's/^# \{0,1\}//'
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
# HIP header generations for clang-19, GENERATION=WHEEL: triton's wheels carry AMD's HIP headers under
# triton/backends/amd/include/hip/ (hip_version.h: 3.2.0 has 6.1.40091, 3.4.0 6.2.41134, 3.9.0
# 7.1.25424; checked again after every download). Only that tree is kept; the wheels (155 to 290 MB
# each) are deleted at once.
HIP_HEADER_WHEELS="6.1=triton==3.2.0 6.2=triton==3.4.0 7.1=triton==3.9.0"
HIP_HEADERS=$TOOLS/hip-headers
LLVM19=/usr/lib/llvm-19/bin

log() { echo "install-toolchains: $*" >&2; }

# ---- apt: one update, one install, only for what is missing -------------------------------
apt_pkgs=""
if [ "$want_hip" = 1 ]; then
    if ! [ -x /usr/bin/hipcc ]; then apt_pkgs="$apt_pkgs hipcc"; fi
    if ! [ -f /usr/include/hip/hip_runtime.h ]; then apt_pkgs="$apt_pkgs libamdhip64-dev"; fi
    if ! [ -x /usr/bin/clang++-19 ]; then apt_pkgs="$apt_pkgs clang-19"; fi
    if ! [ -x "$LLVM19/ld.lld" ]; then apt_pkgs="$apt_pkgs lld-19"; fi
    if ! [ -x "$LLVM19/llvm-readelf" ]; then apt_pkgs="$apt_pkgs llvm-19"; fi
    if ! [ -x "$LLVM19/clang-offload-bundler" ]; then apt_pkgs="$apt_pkgs clang-tools-19"; fi
fi
if ! [ -x "$VENV/bin/python" ]; then
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
    apt-get install -y --no-install-recommends $apt_pkgs
fi

# ---- the tools venv (pip for the CUDA wheels and the triton wheels) ----------------------------
if ! [ -x "$VENV/bin/python" ]; then
    log "creating venv $VENV"
    "$PYTHON" -m venv "$VENV"
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

# ---- HIP header trees from triton wheels ----------------------------------------------------
# unpack_hip_headers WHEEL_DIR ROOT GENERATION: ROOT/include/hip from the one wheel in WHEEL_DIR, and
# ROOT/bin/.hipVersion (clang's --hip-path wants it) from its hip_version.h.
unpack_hip_headers() {
    "$PYTHON" - "$@" <<'EOF'
import glob, os, re, shutil, sys, zipfile

wheel_dir, root, generation = sys.argv[1:]
wheels = glob.glob(os.path.join(wheel_dir, "*.whl"))
if len(wheels) != 1:
    sys.exit(f"expected one wheel in {wheel_dir}, found {len(wheels)}")
prefix = "triton/backends/amd/include/hip/"
count = 0
with zipfile.ZipFile(wheels[0]) as z:
    for info in z.infolist():
        if info.is_dir() or not info.filename.startswith(prefix):
            continue
        rel = info.filename[len(prefix):]
        parts = rel.split("/")
        if rel.startswith("/") or ".." in parts or "" in parts:
            sys.exit(f"{wheels[0]}: refusing member {info.filename!r}")
        out = os.path.join(root, "include", "hip", *parts)
        os.makedirs(os.path.dirname(out), exist_ok=True)
        with z.open(info) as src, open(out, "wb") as dst:
            shutil.copyfileobj(src, dst)
        count += 1
version_h = os.path.join(root, "include", "hip", "hip_version.h")
if not os.path.isfile(version_h):
    sys.exit(f"{wheels[0]} has no {prefix}hip_version.h")
text = open(version_h, encoding="utf-8").read()
version = {}
for key in ("MAJOR", "MINOR", "PATCH"):
    m = re.search(rf"^#define HIP_VERSION_{key} (\d+)", text, re.M)
    if m is None:
        sys.exit(f"{version_h}: no HIP_VERSION_{key}")
    version[key] = m.group(1)
found = f"{version['MAJOR']}.{version['MINOR']}"
if found != generation:
    sys.exit(f"{wheels[0]} carries HIP {found}, not {generation}")
os.makedirs(os.path.join(root, "bin"))
with open(os.path.join(root, "bin", ".hipVersion"), "w", encoding="utf-8") as f:
    for key, value in version.items():
        f.write(f"HIP_VERSION_{key}={value}\n")
print(f"{count} files, hip_version.h {found}.{version['PATCH']}")
EOF
}

HIP_GENERATIONS=""
if [ "$want_hip" = 1 ]; then
    mkdir -p "$HIP_HEADERS"
    for spec in $HIP_HEADER_WHEELS; do
        gen=${spec%%=*}
        wheel=${spec#*=}
        HIP_GENERATIONS="${HIP_GENERATIONS:+$HIP_GENERATIONS }$gen"
        root=$HIP_HEADERS/$gen
        if [ "$(cat "$root/.source" 2>/dev/null || true)" = "$wheel" ] \
            && [ -f "$root/include/hip/hip_version.h" ] && [ -f "$root/bin/.hipVersion" ]; then
            continue
        fi
        work=$HIP_HEADERS/.work-$gen
        rm -rf "$work"
        mkdir -p "$work/wheel"
        log "HIP $gen headers: pip download $wheel"
        "$VENV/bin/python" -m pip download --disable-pip-version-check --no-cache-dir --no-deps \
            --only-binary=:all: -q -d "$work/wheel" "$wheel"
        size=$(du -sm "$work/wheel" | cut -f1)
        kept=$(unpack_hip_headers "$work/wheel" "$work/root" "$gen")
        log "HIP $gen headers: $kept; from a $size MB wheel, deleted"
        echo "$wheel" >"$work/root/.source"
        rm -rf "$root"
        mv "$work/root" "$root"
        rm -rf "$work"
    done
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
        echo "export GPUPROBE_HIP_CLANG='/usr/bin/clang++-19'"
        echo "export GPUPROBE_HIP_LLVM_BIN='$LLVM19'"
        echo "export GPUPROBE_HIP_HEADERS='$HIP_HEADERS'"
        echo "export GPUPROBE_HIP_GENERATIONS='$HIP_GENERATIONS'"
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
    log "clang for HIP $HIP_GENERATIONS: $(/usr/bin/clang++-19 --version | head -n 1)"
fi
if [ -n "$CUDA_ROOT" ]; then
    log "nvcc: $("$CUDA_ROOT/bin/nvcc" --version | tail -n 2 | head -n 1)"
fi
log "wrote $ENV_SH"
cat "$ENV_SH"

#!/bin/sh
# Assemble probes/smoke.ptx with ptxas for several GPU architectures (no GPU needed).
# Usage: scripts/check-ptx.sh [ARCH...]     (default: sm_75 sm_80 sm_90 sm_120)
# Finds ptxas as $PTXAS, $GPUPROBE_PTXAS, on PATH, or via .cache/tools/env.sh
# (written by scripts/install-toolchains.sh).
set -eu

here=$(cd "$(dirname "$0")/.." && pwd)
ptx=$here/probes/smoke.ptx
env_sh=${GPUPROBE_TOOLS:-$here/.cache/tools}/env.sh

ptxas=${PTXAS:-${GPUPROBE_PTXAS:-}}
if [ -z "$ptxas" ] && ! command -v ptxas >/dev/null 2>&1 && [ -f "$env_sh" ]; then
    # shellcheck disable=SC1090
    . "$env_sh"
    ptxas=${GPUPROBE_PTXAS:-}
fi
ptxas=${ptxas:-ptxas}
if ! command -v "$ptxas" >/dev/null 2>&1; then
    echo "check-ptx: ptxas not found; run scripts/install-toolchains.sh --cuda-only" >&2
    exit 1
fi

[ $# -gt 0 ] || set -- sm_75 sm_80 sm_90 sm_120
echo "check-ptx: $("$ptxas" --version | tail -n 2 | head -n 1)"
status=0
for arch in "$@"; do
    case "$arch" in sm_*) ;; *) arch=sm_$arch ;; esac
    if out=$("$ptxas" -arch="$arch" -v "$ptx" -o /dev/null 2>&1); then
        regs=$(printf '%s\n' "$out" | sed -n 's/.*Used \([0-9]*\) registers.*/\1/p' | tr '\n' ' ')
        echo "check-ptx: $arch ok (registers per entry: ${regs% })"
    else
        echo "check-ptx: $arch FAILED" >&2
        printf '%s\n' "$out" >&2
        status=1
    fi
done
exit $status

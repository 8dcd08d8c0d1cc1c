#!/bin/sh
# Builds the bare CUDA probe program (probes/gpuprobe-probe.cpp with nvcc, scripts/build-probe.sh)
# and saves its raw stdout on this machine's GPUs, for tests/protocol.rs, which reads every line
# of it through the protocol's Rust types and requires the same JSON back. Made for a GPU machine
# with nvcc (no Rust needed). Copy the folder's *.jsonl to tests/fixtures/probe-output/NAME/
# (tests/protocol.rs reads every *.jsonl under tests/fixtures/).
#
# Usage: scripts/capture-probe-output.sh OUT [ARCH]
#   OUT   folder for the files (created)
#   ARCH  the GPUs' architecture for nvcc (default: sm_90)
# Writes, each the probe's stdout unedited (stderr and exit status in OUT/log.txt):
#   list.jsonl               --list (every device, no smoke test)
#   device0.jsonl            --device 0 (one GPU: its facts and the smoke test)
#   device0-no-smoke.jsonl   --device 0 --no-smoke
#   device0-cycles1.jsonl    --device 0 --cycles 1
#   deviceN.jsonl            --device N for every other device (all GPUs)
#   out-of-range.jsonl       --device COUNT (a device the runtime does not show)
#   peers.jsonl              --peers (with two or more devices)
#   plan.jsonl               --plan 2097152 150000000000
# Exit 0 when every run gave a stream ending in `done` (a failed smoke test is still a result).
set -u
[ $# -ge 1 ] || { echo "usage: $0 OUT [ARCH]" >&2; exit 2; }
out=$1
arch=${2:-sm_90}
here=$(cd "$(dirname "$0")/.." && pwd)
# nvcc: $NVCC, PATH, or the usual install places (newest first), as scripts/gpu-verify.sh finds it.
if [ -z "${NVCC:-}" ] && ! command -v nvcc >/dev/null 2>&1; then
    for c in /usr/local/cuda/bin/nvcc $(ls -d /usr/local/cuda-*/bin/nvcc 2>/dev/null | sort -rV); do
        if [ -x "$c" ]; then NVCC=$c; export NVCC; break; fi
    done
fi
mkdir -p "$out/build"
log=$out/log.txt
: >"$log"
sh "$here/scripts/build-probe.sh" cuda "$out/build" "$arch" >>"$log" 2>&1 || {
    echo "build failed; see $log" >&2
    tail -20 "$log" >&2
    exit 1
}
probe=$out/build/gpuprobe-probe-cuda
status=0

# run NAME ARGS...: the probe's stdout into OUT/NAME.jsonl, with a timeout.
run() {
    name=$1
    shift
    echo "== $name: $*" >>"$log"
    timeout 300 "$probe" "$@" >"$out/$name.jsonl" 2>>"$log"
    rc=$?
    echo "exit $rc" >>"$log"
    last=$(tail -n 1 "$out/$name.jsonl")
    if [ "$rc" -ne 0 ]; then
        echo "$name: exit $rc" >&2
        status=1
    elif [ "$name" != plan ] && [ "$last" != '{"event":"done"}' ]; then
        echo "$name: the stream does not end in done" >&2
        status=1
    fi
}

run list --list
count=$(sed -n 's/.*"device_count":\([0-9]*\).*/\1/p' "$out/list.jsonl" | head -n 1)
count=${count:-0}
echo "devices: $count"
run device0 --device 0
run device0-no-smoke --device 0 --no-smoke
run device0-cycles1 --device 0 --cycles 1
i=1
while [ "$i" -lt "$count" ]; do
    run "device$i" --device "$i"
    i=$((i + 1))
done
run out-of-range --device "$count"
if [ "$count" -ge 2 ]; then
    run peers --peers
fi
run plan --plan 2097152 150000000000
rm -rf "$out/build"
for f in "$out"/*.jsonl; do
    printf '%s: %s lines\n' "${f##*/}" "$(wc -l <"$f")"
done
[ "$status" -eq 0 ] && echo "CAPTURED" || echo "SOME RUNS FAILED (see $log)"
exit "$status"

#!/bin/sh
# Benchmark, not a test: times `gpuprobe detect` (warm) against the bare single-source probe
# program doing the same driver init + VMM smoke work on the same GPU, alternating runs in one
# session, and prints medians and the ratio.
#
# Usage: scripts/bench-detect.sh GPUPROBE PROBE [RUNS]
#   GPUPROBE  the gpuprobe binary;  PROBE  gpuprobe-probe built with nvcc (scripts/build-probe.sh)
# Both see one GPU (CUDA_VISIBLE_DEVICES, default 0) so the work is the same: init, device facts,
# 200 cycles x 4 chunks of the smoke test. Needs python3 for the statistics.
set -eu
gp=$1
probe=$2
runs=${3:-9}
CUDA_VISIBLE_DEVICES=${CUDA_VISIBLE_DEVICES:-0}
export CUDA_VISIBLE_DEVICES
now() { python3 -c 'import time; print(time.monotonic())'; }
# Warm-up: first driver load, page cache, JIT cache for the PTX.
"$gp" detect --backend cuda --json >/dev/null
"$probe" --device 0 >/dev/null
: >"${TMPDIR:-/tmp}/bench-gp.txt"
: >"${TMPDIR:-/tmp}/bench-probe.txt"
i=0
while [ "$i" -lt "$runs" ]; do
    t0=$(now); "$gp" detect --backend cuda --json >/dev/null; t1=$(now)
    echo "$t0 $t1" | awk '{printf "%.6f\n", $2-$1}' >>"${TMPDIR:-/tmp}/bench-gp.txt"
    t0=$(now); "$probe" --device 0 >/dev/null; t1=$(now)
    echo "$t0 $t1" | awk '{printf "%.6f\n", $2-$1}' >>"${TMPDIR:-/tmp}/bench-probe.txt"
    i=$((i + 1))
done
python3 - "${TMPDIR:-/tmp}/bench-gp.txt" "${TMPDIR:-/tmp}/bench-probe.txt" <<'PY'
import statistics, sys
gp = [float(x) for x in open(sys.argv[1])]
pr = [float(x) for x in open(sys.argv[2])]
mg, mp = statistics.median(gp), statistics.median(pr)
print(f"runs: {len(gp)} each, alternating")
print(f"gpuprobe detect --backend cuda: median {mg*1000:.1f} ms (min {min(gp)*1000:.1f}, max {max(gp)*1000:.1f})")
print(f"bare probe --device 0:          median {mp*1000:.1f} ms (min {min(pr)*1000:.1f}, max {max(pr)*1000:.1f})")
print(f"ratio gpuprobe / bare: {mg/mp:.2f}x (target: within 1.20x)")
PY

#!/bin/sh
# The CUDA-path verification run on a real NVIDIA GPU (used through the device tool; needs the
# driver, nvcc and python3). Writes everything under OUT (default ./gpu-verify-out).
#
# Usage: scripts/gpu-verify.sh GPUPROBE [OUT]
set -u
gp=$1
out=${2:-gpu-verify-out}
here=$(cd "$(dirname "$0")/.." && pwd)
mkdir -p "$out"
log() { echo "== $*"; }
log machine; nvidia-smi -L; nvcc --version | tail -2
log detect; "$gp" detect | tee "$out/detect.txt"; echo "rc=$?"
"$gp" detect --json >"$out/detect.json"; echo "detect --json rc=$?"
log cmake-flags; "$gp" cmake-flags --explain >"$out/cmake-flags.sh" 2>"$out/explain.txt"; echo "rc=$?"; cat "$out/cmake-flags.sh"
"$gp" cmake-flags --from "$out/detect.json" --format json >"$out/plan.json"; echo "plan rc=$?"
log "libcuda hidden (bind-mounted /dev/null over it in a private mount namespace)"
lib=$(ldconfig -p | awk '/libcuda.so.1 /{print $NF; exit}')
echo "libcuda: $lib"
unshare -m sh -c "mount --bind /dev/null '$lib' && '$gp' detect; echo rc=\$?; '$gp' detect --require-gpu >/dev/null; echo require-gpu rc=\$?" 2>&1 | tee "$out/hidden.txt"
log "tiny timeout (0.05 s): the hang path on real hardware"
"$gp" detect --timeout 0.05 | tee "$out/timeout.txt"
log "nvcc-built probe program vs the CUDA backend"
arch=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader | head -1 | tr -d .)
sh "$here/scripts/build-probe.sh" cuda "$out/probe" "sm_$arch" && "$out/probe/gpuprobe-probe-cuda" --device 0 >"$out/probe-device0.jsonl"; echo "probe rc=$?"
python3 - "$out/detect.json" "$out/probe-device0.jsonl" <<'PY'
import json, sys
rep = json.load(open(sys.argv[1]))
d = rep["devices"][0]
ev = [json.loads(l) for l in open(sys.argv[2])]
dev = next(e for e in ev if e["event"] == "device")
sm = next(e for e in ev if e["event"] == "smoke")
rows = [("arch", d["arch"], dev["arch"]), ("vmm", d["vmm_supported"], dev["vmm_supported"]),
        ("granularity_min", d["granularity_min"], dev["granularity_min"]),
        ("granularity_recommended", d["granularity_recommended"], dev["granularity_recommended"]),
        ("smoke outcome", d["smoke"]["outcome"], sm["outcome"]), ("cycles", d["smoke"]["cycles_done"], sm["cycles_done"]),
        ("chunk_bytes", d["smoke"]["chunk_bytes"], sm["chunk_bytes"]),
        ("smoke ms", round(d["smoke"]["elapsed_ms"] or 0, 1), round(sm["elapsed_ms"], 1))]
print(f"{'field':<24} {'gpuprobe (Rust, driver API + PTX)':<36} {'probe program (nvcc)'}")
for n, a, b in rows:
    print(f"{n:<24} {str(a):<36} {b}  {'same' if a == b or n == 'smoke ms' else 'DIFFERENT'}")
PY
log benchmark
sh "$here/scripts/bench-detect.sh" "$gp" "$out/probe/gpuprobe-probe-cuda" 9 | tee "$out/bench.txt"

#!/usr/bin/env bash
# The smoke test on a busy, shared NVIDIA GPU (issue #28), in one call on a GPU machine:
#   (a) ROUNDS rounds of JOBS concurrent `gpuprobe detect --json`;
#   (b) BESIDE detects, one after another, beside a running GPU workload that allocates and frees
#       VRAM in a loop and keeps the GPU busy (python3 with torch where it imports with CUDA, else
#       a small CUDA program built here with nvcc; plain allocations, never managed memory).
# Every report goes into OUTDIR/reports.jsonl (one JSON object a line: phase, round, job, exit
# code, seconds, the report); OUTDIR/table.txt is the table printed at the end, OUTDIR/summary.json
# its numbers, OUTDIR/workload.log what the workload said. Name OUTDIR <machine>-concurrent: it is
# meant to be committed as tests/fixtures/<machine>-concurrent/ (tests/concurrent_fixture.rs reads it).
#
# Usage: scripts/concurrent-detect.sh GPUPROBE OUTDIR [ROUNDS] [JOBS] [BESIDE]   (5 8 10 by default)
# Takes about 3-6 minutes on one H200; every detect has its own timeout.
set -euo pipefail

gpuprobe=${1:?usage: concurrent-detect.sh GPUPROBE OUTDIR [ROUNDS] [JOBS] [BESIDE]}
outdir=${2:?usage: concurrent-detect.sh GPUPROBE OUTDIR [ROUNDS] [JOBS] [BESIDE]}
rounds=${3:-5}
jobs=${4:-8}
beside=${5:-10}
# Per detect: the smoke test's own deadline, and a hard stop above it.
detect_timeout=150
[ -x "$gpuprobe" ] || { echo "concurrent-detect: $gpuprobe is not an executable gpuprobe" >&2; exit 2; }
command -v python3 >/dev/null || { echo "concurrent-detect: python3 is needed to collect the reports" >&2; exit 2; }
gpuprobe=$(cd "$(dirname "$gpuprobe")" && pwd)/$(basename "$gpuprobe")
mkdir -p "$outdir"
outdir=$(cd "$outdir" && pwd)
work=$(mktemp -d)
workload_pid=
cleanup() {
    if [ -n "$workload_pid" ]; then kill "$workload_pid" 2>/dev/null || true; wait "$workload_pid" 2>/dev/null || true; fi
    rm -rf "$work"
}
trap cleanup EXIT

# One detect: report in $work/PHASE-R-J.json, exit code and seconds in .meta.
detect() {
    local name=$1 t0 rc=0
    t0=$(date +%s%N)
    timeout -k 10 $((detect_timeout + 30)) "$gpuprobe" detect --json --backend cuda --timeout "$detect_timeout" \
        >"$work/$name.json" 2>"$work/$name.err" || rc=$?
    echo "$rc $((($(date +%s%N) - t0) / 1000000))" >"$work/$name.meta"
}

start=$(date +%s)
echo "concurrent-detect: $("$gpuprobe" --version 2>/dev/null || echo gpuprobe), $rounds rounds of $jobs, then $beside beside a workload"
nvidia-smi --query-gpu=name,memory.total,memory.used,driver_version --format=csv >"$work/gpu.txt" 2>&1 || true

# (a) concurrent rounds
for r in $(seq 1 "$rounds"); do
    pids=()
    for j in $(seq 1 "$jobs"); do
        detect "concurrent-$r-$j" &
        pids+=("$!")
    done
    for p in "${pids[@]}"; do wait "$p" || true; done
    echo "  round $r done ($(($(date +%s) - start)) s)"
done

# (b) beside a workload
cat >"$work/churn.py" <<'EOF'
import random, sys, time
import torch
dev = torch.device("cuda")
a = torch.randn(8192, 8192, device=dev)
b = torch.randn(8192, 8192, device=dev)
print("ready torch", torch.__version__, flush=True)
end = time.time() + float(sys.argv[1])
i = 0
while time.time() < end:
    # Plain allocations of 256 MiB to 6 GiB, held across a few matmuls, then handed back to the
    # driver (empty_cache), so free VRAM moves both ways while the probe runs.
    held = [torch.empty(random.randint(64, 1536) * (1 << 22), dtype=torch.uint8, device=dev) for _ in range(4)]
    for _ in range(4):
        a = (a @ b).clamp_(-1, 1)
    torch.cuda.synchronize()
    del held
    if i % 2 == 0:
        torch.cuda.empty_cache()
    i += 1
print("iterations", i, flush=True)
EOF
cat >"$work/churn.cu" <<'EOF'
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <cuda_runtime.h>
__global__ void spin(float* p, size_t n, int rounds) {
    size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
    if (i >= n) return;
    float v = p[i];
    for (int k = 0; k < rounds; ++k) v = v * 0.999f + 0.001f;
    p[i] = v;
}
int main(int argc, char** argv) {
    const double seconds = argc > 1 ? atof(argv[1]) : 120;
    const size_t n = 64u << 20;
    float* work = nullptr;
    if (cudaMalloc(&work, n * sizeof(float)) != cudaSuccess) { puts("cudaMalloc failed"); return 1; }
    printf("ready nvcc\n");
    fflush(stdout);
    const time_t end = time(nullptr) + (time_t)seconds;
    unsigned long it = 0;
    srand(1);
    while (time(nullptr) < end) {
        void* held[4] = {nullptr, nullptr, nullptr, nullptr};
        for (int k = 0; k < 4; ++k) {
            size_t bytes = (size_t)(64 + rand() % 1472) << 22;  // 256 MiB .. 6 GiB
            if (cudaMalloc(&held[k], bytes) != cudaSuccess) held[k] = nullptr;
            else cudaMemset(held[k], 0, bytes);
        }
        spin<<<(unsigned)((n + 255) / 256), 256>>>(work, n, 2000);
        cudaDeviceSynchronize();
        for (int k = 0; k < 4; ++k) if (held[k]) cudaFree(held[k]);
        ++it;
    }
    printf("iterations %lu\n", it);
    return 0;
}
EOF
workload=none
if python3 -c 'import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)' >/dev/null 2>&1; then
    python3 "$work/churn.py" 600 >"$work/workload.log" 2>&1 &
    workload_pid=$!
    workload="python3+torch"
elif command -v nvcc >/dev/null && nvcc -O2 -o "$work/churn" "$work/churn.cu" >"$work/workload.log" 2>&1; then
    "$work/churn" 600 >>"$work/workload.log" 2>&1 &
    workload_pid=$!
    workload="nvcc-built CUDA program"
fi
if [ -n "$workload_pid" ]; then
    for _ in $(seq 1 120); do
        grep -q '^ready' "$work/workload.log" 2>/dev/null && break
        kill -0 "$workload_pid" 2>/dev/null || break
        sleep 0.5
    done
fi
if [ -n "$workload_pid" ] && grep -q '^ready' "$work/workload.log"; then
    echo "  workload: $workload (pid $workload_pid)"
    for k in $(seq 1 "$beside"); do
        detect "beside-1-$k"
        kill -0 "$workload_pid" 2>/dev/null || { echo "  the workload stopped early" >&2; break; }
    done
    kill "$workload_pid" 2>/dev/null || true
    wait "$workload_pid" 2>/dev/null || true
else
    echo "  no workload could start (no torch with CUDA, no nvcc): phase (b) skipped" >&2
    workload="none"
fi
workload_pid=
cp "$work/workload.log" "$outdir/workload.log" 2>/dev/null || true
cp "$work/gpu.txt" "$outdir/gpu.txt"

# Collect: one JSON line per detect, a summary and the table.
WORK=$work OUT=$outdir WORKLOAD=$workload ROUNDS=$rounds JOBS=$jobs python3 - <<'EOF'
import glob, json, os, re
work, out = os.environ["WORK"], os.environ["OUT"]
rows, counts = [], {}
for meta in sorted(glob.glob(os.path.join(work, "*.meta")), key=lambda p: [int(x) if x.isdigit() else x for x in re.split(r"[-.]", os.path.basename(p))]):
    name = os.path.basename(meta)[:-5]
    phase, rnd, job = name.split("-")
    rc, ms = open(meta).read().split()
    with open(os.path.join(work, name + ".json"), errors="replace") as f:
        text = f.read()
    try:
        report = json.loads(text)
    except ValueError:
        report = None
    err = open(os.path.join(work, name + ".err"), errors="replace").read()[-2000:]
    smokes = []
    if report:
        for d in report.get("devices", []):
            smokes.append(d.get("smoke", {}))
    rows.append({"phase": phase, "round": int(rnd), "job": int(job), "exit": int(rc),
                 "seconds": int(ms) / 1000, "stderr_tail": err if report is None else "",
                 "report": report})
    c = counts.setdefault(phase, {"detects": 0, "no_report": 0, "outcomes": {}, "shared": 0, "with_notes": 0})
    c["detects"] += 1
    if report is None:
        c["no_report"] += 1
    for s in smokes:
        o = s.get("outcome", "?")
        c["outcomes"][o] = c["outcomes"].get(o, 0) + 1
        c["shared"] += bool((s.get("sharing") or {}).get("shared"))
        c["with_notes"] += bool(s.get("notes"))
with open(os.path.join(out, "reports.jsonl"), "w") as f:
    for r in rows:
        f.write(json.dumps(r, separators=(",", ":")) + "\n")
summary = {"workload": os.environ["WORKLOAD"], "phases": counts}
with open(os.path.join(out, "summary.json"), "w") as f:
    json.dump(summary, f, indent=1)
names = ["pass", "partial", "fail", "hang", "crash", "bad-output", "not-run"]
lines = ["| phase | detects | " + " | ".join(names) + " | shared GPU seen | with notes |",
         "|---|---|" + "---|" * len(names) + "---|---|"]
for phase, c in counts.items():
    label = {"concurrent": f"{os.environ['JOBS']} concurrent detects x {os.environ['ROUNDS']} rounds", "beside": "beside " + os.environ["WORKLOAD"]}.get(phase, phase)
    lines.append(f"| {label} | {c['detects']} | " + " | ".join(str(c["outcomes"].get(n, 0)) for n in names)
                 + f" | {c['shared']} | {c['with_notes']} |")
table = "\n".join(lines)
open(os.path.join(out, "table.txt"), "w").write(table + "\n")
print(table)
EOF
echo "concurrent-detect: $(ls "$outdir" | wc -l) files in $outdir, $(($(date +%s) - start)) s"

#!/bin/sh
# Benchmark, not a test: two gpuprobe binaries side by side (e.g. before and after a change), in
# one session on the same GPUs: `detect --backend cuda --json` on GPU 0 alone and on every GPU,
# with and without the smoke test, every configuration once per round, rounds alternating,
# medians, and B / A ratios printed last.
#
# Usage: scripts/bench-ab.sh A B [ROUNDS]     A, B: gpuprobe binaries;  ROUNDS: default 5
set -eu
a=$1
b=$2
rounds=${3:-5}
for g in "$a" "$b"; do
    [ -x "$g" ] || { echo "bench-ab: $g is not executable" >&2; exit 2; }
done
case "$rounds" in ''|*[!0-9]*) echo "bench-ab: ROUNDS must be a number" >&2; exit 2 ;; esac
exec python3 - "$a" "$b" "$rounds" <<'PY'
import os, statistics, subprocess, sys, time

a, b, rounds = sys.argv[1], sys.argv[2], int(sys.argv[3])
try:
    n = len([l for l in subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True,
             timeout=60).stdout.splitlines() if l.startswith("GPU ")])
except (OSError, subprocess.SubprocessError):
    n = 1
base = {k: v for k, v in os.environ.items() if k != "CUDA_VISIBLE_DEVICES"}
views = [("1", "0")] + ([(str(n), ",".join(str(i) for i in range(n)))] if n > 1 else [])
configs = []
for label, vis in views:
    for extra, tag in (([], ""), (["--no-smoke"], "-nosm")):
        for name, gp in (("A", a), ("B", b)):
            configs.append((f"{name}-{label}{tag}", dict(base, CUDA_VISIBLE_DEVICES=vis),
                            [gp, "detect", "--backend", "cuda", "--json"] + extra))
times = {c[0]: [] for c in configs}
for _ in range(rounds):
    for name, env, cmd in configs:
        # Every run starts on GPUs that the previous run's processes are gone from.
        time.sleep(0.3)
        t0 = time.perf_counter()
        r = subprocess.run(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=600)
        times[name].append((time.perf_counter() - t0) * 1000)
        if r.returncode not in (0, 1):
            print(f"{name}: exit {r.returncode}", file=sys.stderr)
print(f"bench-ab: {n} GPU(s), {rounds} rounds (medians, ms); A = {a}, B = {b}")
med = {k: statistics.median(v) for k, v in times.items()}
for k, v in times.items():
    print(f"  {k:<12} median {med[k]:8.1f}   min {min(v):8.1f}   max {max(v):8.1f}")
print("ratios (B / A):")
for label, _ in views:
    for tag in ("", "-nosm"):
        print(f"  {label} GPU(s){tag:<6} {med[f'B-{label}{tag}'] / med[f'A-{label}{tag}']:.2f}x")
PY

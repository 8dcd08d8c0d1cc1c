#!/bin/sh
# Benchmark, not a test: `gpuprobe detect` against the bare single-source probe program doing the
# same work, on one GPU and on two, in one session: every configuration once per round, rounds
# alternating, medians over the rounds, ratios printed last.
#
# Usage: scripts/bench-detect.sh GPUPROBE PROBE [ROUNDS] [OUT]
#   GPUPROBE  the gpuprobe binary;  PROBE  gpuprobe-probe built with nvcc (scripts/build-probe.sh)
#   ROUNDS    rounds (default 5);    OUT    where the raw times go (default: none kept)
#
# Configurations (the same work side by side):
#   gp-1        CUDA_VISIBLE_DEVICES=0 gpuprobe detect --backend cuda --json
#   bare-1      CUDA_VISIBLE_DEVICES=0 probe --device 0          (the C++ floor for gp-1)
#   gp-2        gpuprobe detect --backend cuda --json            (both GPUs in one shared child)
#   gp-2-iso    gp-2 with --isolate                              (2 device children + peer child)
#   bare-2      probe --device 0 & probe --device 1 & probe --peers & wait   (the C++ floor for gp-2-iso)
#   gp-1-nosm   gp-1 with --no-smoke;  gp-2-nosm, gp-2-iso-nosm  gp-2, gp-2-iso with --no-smoke
# With one GPU only the -1 configurations run. Needs python3 (timing and statistics).
set -eu
gp=$1
probe=$2
rounds=${3:-5}
out=${4:-}
[ -x "$gp" ] || { echo "bench-detect: $gp is not executable" >&2; exit 2; }
[ -x "$probe" ] || { echo "bench-detect: $probe is not executable" >&2; exit 2; }
case "$rounds" in ''|*[!0-9]*) echo "bench-detect: ROUNDS must be a number" >&2; exit 2 ;; esac
exec python3 - "$gp" "$probe" "$rounds" "$out" <<'PY'
import os, statistics, subprocess, sys, time

gp, probe, rounds, out = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]

def gpus():
    try:
        r = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True, timeout=60)
        return len([l for l in r.stdout.splitlines() if l.startswith("GPU ")])
    except (OSError, subprocess.SubprocessError):
        return 1

n = gpus()
env = {k: v for k, v in os.environ.items() if k != "CUDA_VISIBLE_DEVICES"}
one = dict(env, CUDA_VISIBLE_DEVICES="0")
detect = [gp, "detect", "--backend", "cuda", "--json"]
configs = [
    ("gp-1", one, [detect]),
    ("bare-1", one, [[probe, "--device", "0"]]),
    ("gp-1-nosm", one, [detect + ["--no-smoke"]]),
]
if n >= 2:
    two = dict(env, CUDA_VISIBLE_DEVICES="0,1")
    configs += [
        ("gp-2", two, [detect]),
        ("gp-2-iso", two, [detect + ["--isolate"]]),
        ("bare-2", two, [[probe, "--device", "0"], [probe, "--device", "1"], [probe, "--peers"]]),
        ("gp-2-nosm", two, [detect + ["--no-smoke"]]),
        ("gp-2-iso-nosm", two, [detect + ["--isolate", "--no-smoke"]]),
    ]

def run(cmds, e):
    # A GPU that the previous run's process is still being torn down on (gpuprobe does not
    # wait for that) would slow this run: every run starts after a pause.
    time.sleep(0.3)
    t0 = time.perf_counter()
    ps = [subprocess.Popen(c, env=e, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL) for c in cmds]
    codes = [p.wait(timeout=600) for p in ps]
    t = time.perf_counter() - t0
    if any(codes):
        sys.exit(f"bench-detect: {cmds} exited {codes}")
    return t

# Warm-up: driver load, page cache, the PTX JIT cache.
for _, e, cmds in configs:
    run(cmds, e)
times = {name: [] for name, _, _ in configs}
for _ in range(rounds):
    for name, e, cmds in configs:
        times[name].append(run(cmds, e))
if out:
    with open(out, "w") as f:
        for name, ts in times.items():
            f.write(name + " " + " ".join(f"{t:.6f}" for t in ts) + "\n")

med = {k: statistics.median(v) for k, v in times.items()}
print(f"bench-detect: {n} GPU(s), {rounds} rounds, every configuration once per round (medians, ms)")
for name, _, _ in configs:
    ts = times[name]
    print(f"  {name:<13} median {med[name]*1000:8.1f}   min {min(ts)*1000:8.1f}   max {max(ts)*1000:8.1f}")
def ratio(a, b, target, what):
    if a in med and b in med:
        r = med[a] / med[b]
        verdict = "ok" if target is None or r <= target else "OVER"
        t = f"target <= {target:.2f}x" if target else "reference"
        print(f"  ratio {a:>13} / {b:<13} {r:5.2f}x  ({t}: {what}) {verdict if target else ''}")
print("ratios:")
ratio("gp-2-iso", "gp-1", None, "two GPUs vs one, detect --isolate: one child per device")
ratio("gp-2", "gp-2-iso", None, "two GPUs, shared child vs one child per device")
ratio("gp-2-nosm", "gp-2-iso-nosm", None, "the same with --no-smoke")
ratio("gp-2-iso", "bare-2", None, "two GPUs isolated, gpuprobe vs the bare C++ probes (same process layout)")
ratio("gp-2", "bare-2", None, "two GPUs, gpuprobe vs the bare C++ probes")
ratio("gp-1", "bare-1", 1.10, "one GPU, gpuprobe vs the bare C++ probe")
ratio("gp-2", "gp-1", 1.30, "two GPUs vs one, detect")
ratio("gp-2-nosm", "gp-1-nosm", 1.30, "two GPUs vs one, detect --no-smoke")
PY

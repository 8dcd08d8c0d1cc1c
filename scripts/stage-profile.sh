#!/bin/sh
# Benchmark aid, not a test: where a CUDA probe child spends its time, stage by stage.
#
# Runs process layouts of `gpuprobe __child cuda` (the same children `gpuprobe detect` starts),
# stamps every protocol line as it arrives (every `stage` event is flushed before its stage
# starts, probes/PROTOCOL.md), and charges the time up to a device's next line to the stage it
# last announced. Prints, per layout and device, the median over ROUNDS of: time to `hello`
# (process start, driver load, cuInit), each stage's total, and when `done` came, stdout closed
# and the process was reaped (the last two: the kernel tearing the process's GPU state down).
#
# Usage: scripts/stage-profile.sh GPUPROBE [ROUNDS] [CYCLES]
# Layouts (with one GPU only the first two run):
#   one          CUDA_VISIBLE_DEVICES=0  __child cuda --all --peers           (detect on one GPU)
#   one-nosm     the same with --no-smoke
#   shared       both GPUs visible, one child: --all --peers                  (detect's default)
#   shared-nosm  the same with --no-smoke
#   split        one child per GPU, each started with only its GPU visible (CUDA_VISIBLE_DEVICES=i),
#                all at once; no peer checks (they need both GPUs in one process)
#   split-nosm   the same with --no-smoke
#   iso          one child per GPU with both visible (--device i), as `detect --isolate` starts them
set -eu
gp=$1
rounds=${2:-3}
cycles=${3:-200}
[ -x "$gp" ] || { echo "stage-profile: $gp is not executable" >&2; exit 2; }
case "$rounds$cycles" in *[!0-9]*) echo "stage-profile: ROUNDS and CYCLES must be numbers" >&2; exit 2 ;; esac
exec python3 - "$gp" "$rounds" "$cycles" <<'PY'
import json, os, selectors, statistics, subprocess, sys, time
from collections import defaultdict

gp, rounds, cycles = sys.argv[1], int(sys.argv[2]), sys.argv[3]
try:
    n = len([l for l in subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True,
             timeout=60).stdout.splitlines() if l.startswith("GPU ")])
except (OSError, subprocess.SubprocessError):
    n = 1
base = {k: v for k, v in os.environ.items() if k != "CUDA_VISIBLE_DEVICES"}
child = [gp, "__child", "cuda", "--cycles", cycles]

def env(vis):
    return dict(base, CUDA_VISIBLE_DEVICES=vis)

layouts = [
    ("one", [(env("0"), child + ["--all", "--peers"])]),
    ("one-nosm", [(env("0"), child + ["--all", "--no-smoke"])]),
]
if n >= 2:
    both = ",".join(str(i) for i in range(n))
    layouts += [
        ("shared", [(env(both), child + ["--all", "--peers"])]),
        ("shared-nosm", [(env(both), child + ["--all", "--no-smoke"])]),
        ("split", [(env(str(i)), child + ["--device", "0"]) for i in range(n)]),
        ("split-nosm", [(env(str(i)), child + ["--device", "0", "--no-smoke"]) for i in range(n)]),
        ("iso", [(env(both), child + ["--device", str(i)]) for i in range(n)]),
    ]

def run(procs):
    """One layout once: {(proc, device): {stage: ms}} plus the wall time."""
    t0 = time.perf_counter()
    sel = selectors.DefaultSelector()
    ps = []
    for k, (e, cmd) in enumerate(procs):
        p = subprocess.Popen(cmd, env=e, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
        os.set_blocking(p.stdout.fileno(), False)
        sel.register(p.stdout, selectors.EVENT_READ, (k, p, bytearray()))
        ps.append(p)
    cur, last = {}, {}
    acc = defaultdict(lambda: defaultdict(float))
    open_ = len(ps)
    deadline = t0 + 120
    while open_ and time.perf_counter() < deadline:
        for key, _ in sel.select(timeout=1):
            k, p, buf = key.data
            chunk = p.stdout.read()
            now = (time.perf_counter() - t0) * 1000
            if not chunk:
                sel.unregister(p.stdout)
                open_ -= 1
                acc[(k, "-")]["@eof"] = now
                p.wait()
                acc[(k, "-")]["@reaped"] = (time.perf_counter() - t0) * 1000
                continue
            buf += chunk
            while b"\n" in buf:
                line, _, rest = bytes(buf).partition(b"\n")
                buf[:] = rest
                try:
                    ev = json.loads(line)
                except ValueError:
                    continue
                name = ev.get("event")
                # The shared child tags each device thread's lines with `device`; a child of
                # one device tags nothing.
                dev = ev.get("device")
                who = (k, dev if isinstance(dev, int) and not isinstance(dev, bool) else "-")
                if name == "hello" and "device" not in ev:
                    acc[(k, "-")]["@hello"] = now
                    continue
                if who in cur:
                    acc[who][cur[who]] += now - last[who]
                elif who[1] != "-":
                    hello = acc[(k, "-")].get("@hello", 0.0)
                    acc[who]["(before first stage)"] += now - hello
                last[who] = now
                if name == "stage":
                    cur[who] = ev.get("stage", "?")
                elif name == "done":
                    acc[(k, "-")]["@done"] = now
                elif name in ("device", "smoke", "peer", "peers_done"):
                    cur[who] = f"(after {name})"
    for p in ps:
        if p.poll() is None:
            p.kill()
        p.wait()
    return acc, (time.perf_counter() - t0) * 1000

print(f"stage-profile: {n} GPU(s), {rounds} rounds, {cycles} cycles; medians in ms")
for name, procs in layouts:
    runs = []
    for _ in range(rounds):
        runs.append(run(procs))
    walls = [w for _, w in runs]
    print(f"\n{name}: wall median {statistics.median(walls):.1f} (min {min(walls):.1f}, max {max(walls):.1f})")
    keys = sorted({w for acc, _ in runs for w in acc}, key=str)
    for who in keys:
        stages = sorted({s for acc, _ in runs for s in acc.get(who, {})})
        cells = []
        for s in stages:
            vals = [acc[who][s] for acc, _ in runs if s in acc.get(who, {})]
            cells.append(f"{s} {statistics.median(vals):.1f}")
        print(f"  proc {who[0]} device {who[1]}: " + ", ".join(cells))
PY

#!/bin/sh
# The CUDA-path verification on a real NVIDIA machine (1 or 2 GPUs), in one call: builds the bare
# probe program with nvcc, runs detect on one GPU and on all (the shared child, and --isolate:
# one child per device), compares the Rust CUDA backend with the probe program, checks that both
# grow pools by the same schedule, plants faults in the probe program to see the smoke test catch
# them on real hardware, checks the hang and no-driver paths, runs the benchmark, and prints a
# compact table, then the benchmark's, last. About 2 minutes with 5 rounds on two GPUs (each step
# is stamped with the seconds since the start).
#
# Usage: scripts/gpu-verify.sh GPUPROBE [OUT] [ROUNDS]
#   GPUPROBE  a gpuprobe binary (e.g. target/release/gpuprobe; no Rust needed here)
#   OUT       where every output goes (default ./gpu-verify-out);  ROUNDS  benchmark rounds (default 5)
# Needs: the NVIDIA driver, nvcc (PATH, $NVCC, or /usr/local/cuda*/bin), python3; root for the
# hidden-libcuda step (skipped otherwise).
set -u
gp=$1
out=${2:-gpu-verify-out}
rounds=${3:-5}
here=$(cd "$(dirname "$0")/.." && pwd)
case "$gp" in /*) ;; *) gp=$(pwd)/$gp ;; esac
mkdir -p "$out"
out=$(cd "$out" && pwd)
t0=$(date +%s)
log() { echo "== [$(( $(date +%s) - t0 )) s] $*"; }

# nvcc: $NVCC, PATH, or the usual install places (newest first).
nvcc=${NVCC:-}
if [ -z "$nvcc" ]; then nvcc=$(command -v nvcc 2>/dev/null || true); fi
if [ -z "$nvcc" ]; then
    for c in /usr/local/cuda/bin/nvcc $(ls -d /usr/local/cuda-*/bin/nvcc 2>/dev/null | sort -rV); do
        if [ -x "$c" ]; then nvcc=$c; break; fi
    done
fi
[ -x "$gp" ] || { echo "gpu-verify: $gp is not executable" >&2; exit 2; }
[ -n "$nvcc" ] || { echo "gpu-verify: nvcc not found (PATH, \$NVCC, /usr/local/cuda*/bin)" >&2; exit 2; }
export NVCC="$nvcc"
export PTXAS="${PTXAS:-$(dirname "$nvcc")/ptxas}"

log machine
nvidia-smi -L | tee "$out/gpus.txt"
"$nvcc" --version | tail -2
ngpu=$(grep -c '^GPU ' "$out/gpus.txt")
arch=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader | head -1 | tr -d '. ')

log "probe program (nvcc, sm_$arch) and the PTX through ptxas"
sh "$here/scripts/check-ptx.sh" "sm_$arch" >"$out/check-ptx.txt" 2>&1; echo "check-ptx rc=$?" | tee -a "$out/check-ptx.txt"
sh "$here/scripts/build-probe.sh" cuda "$out/probe" "sm_$arch" >"$out/build-probe.txt" 2>&1
echo "build rc=$?"
probe=$out/probe/gpuprobe-probe-cuda
# Planted faults (GPUPROBE_TEST_FAULT, see probes/gpuprobe-probe.cpp), built in parallel.
GPUPROBE_PROBE_CFLAGS=-DGPUPROBE_TEST_FAULT=1 sh "$here/scripts/build-probe.sh" cuda "$out/fault1" "sm_$arch" >"$out/build-fault1.txt" 2>&1 &
f1=$!
GPUPROBE_PROBE_CFLAGS=-DGPUPROBE_TEST_FAULT=2 sh "$here/scripts/build-probe.sh" cuda "$out/fault2" "sm_$arch" >"$out/build-fault2.txt" 2>&1 &
f2=$!
GPUPROBE_PROBE_CFLAGS=-DGPUPROBE_TEST_FAULT=3 sh "$here/scripts/build-probe.sh" cuda "$out/fault3" "sm_$arch" >"$out/build-fault3.txt" 2>&1 &
f3=$!

log "detect: one GPU, then all $ngpu"
CUDA_VISIBLE_DEVICES=0 "$gp" detect --backend cuda --json >"$out/detect-1gpu.json"; echo "detect 1 GPU rc=$?"
"$gp" detect --backend cuda --json >"$out/detect.json"; echo "detect rc=$?"
"$gp" detect --backend cuda --isolate --json >"$out/detect-iso.json"; echo "detect --isolate rc=$?"
"$gp" detect --backend cuda --verbose | tee "$out/detect.txt"
"$gp" cmake-flags --from "$out/detect.json" --format json >"$out/plan.json" 2>"$out/plan-explain.txt"; echo "plan rc=$?"

log "bare probe program on device 0, and the growth schedule of both"
CUDA_VISIBLE_DEVICES=0 "$probe" --device 0 >"$out/probe-device0.jsonl"; echo "probe rc=$?"
gran=$(python3 -c 'import json,sys; d=json.load(open(sys.argv[1]))["devices"][0]; print(d["granularity_recommended"] or 2097152, d["smoke"]["vram_free_before"] or 0)' "$out/detect-1gpu.json")
# shellcheck disable=SC2086
"$gp" __child cuda --plan $gran >"$out/plan-rust.json"
# shellcheck disable=SC2086
"$probe" --plan $gran >"$out/plan-probe.json"

log "planted faults"
wait "$f1"; echo "fault1 build rc=$?"
wait "$f2"; echo "fault2 build rc=$?"
wait "$f3"; echo "fault3 build rc=$?"
CUDA_VISIBLE_DEVICES=0 "$out/fault1/gpuprobe-probe-cuda" --device 0 --cycles 5 >"$out/fault1.jsonl"; echo "fault1 rc=$?"
CUDA_VISIBLE_DEVICES=0 "$out/fault2/gpuprobe-probe-cuda" --device 0 --cycles 5 >"$out/fault2.jsonl"; echo "fault2 rc=$?"
CUDA_VISIBLE_DEVICES=0 "$out/fault3/gpuprobe-probe-cuda" --device 0 --cycles 5 >"$out/fault3.jsonl"; echo "fault3 rc=$?"

log "tiny timeout (0.05 s): the hang path on real hardware"
"$gp" detect --backend cuda --json --timeout 0.05 >"$out/timeout.json"; echo "rc=$?"

log "libcuda hidden (bind-mounted /dev/null over it in a private mount namespace)"
lib=$(ldconfig -p | awk '/libcuda.so.1 /{print $NF; exit}')
if [ "$(id -u)" = 0 ] && [ -n "$lib" ] && command -v unshare >/dev/null 2>&1; then
    unshare -m sh -c "mount --bind /dev/null '$lib' && '$gp' detect --backend cuda --json" >"$out/hidden.json" 2>"$out/hidden.err"
    echo "rc=$?"
else
    echo "skipped (needs root, unshare and a libcuda.so.1 in the ld cache)"
fi

log benchmark
sh "$here/scripts/bench-detect.sh" "$gp" "$probe" "$rounds" "$out/bench-raw.txt" | tee "$out/bench.txt"

log summary
python3 - "$out" <<'PY'
import json, os, sys
out = sys.argv[1]
def load(name):
    try:
        with open(os.path.join(out, name)) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None
def events(name):
    try:
        with open(os.path.join(out, name)) as f:
            return [json.loads(l) for l in f if l.strip().startswith("{")]
    except (OSError, ValueError):
        return []
def ev(evs, kind):
    return next((e for e in evs if e.get("event") == kind), {})
def ms(v):
    return "-" if v is None else f"{v:.0f}"
def mib(v):
    return "-" if v is None else f"{v / 2**20:.0f} MiB"
rows = []
def row(check, value, verdict=""):
    rows.append((check, str(value), verdict))

one, all_, iso = load("detect-1gpu.json"), load("detect.json"), load("detect-iso.json")
for label, rep in (("1 GPU", one), ("all GPUs", all_), ("all, --isolate", iso)):
    if not rep:
        row(f"detect {label}", "no report", "FAIL")
        continue
    for d in rep["devices"]:
        s, g, t = d["smoke"], d["smoke"].get("growth") or {}, d.get("timings") or {}
        ok = s["outcome"] == "pass"
        row(f"{label}: dev {d['index']} smoke",
            f"{s['outcome']}, {s.get('cycles_done')} cycles x {s.get('chunks_per_cycle')} growths, "
            f"chunks {mib(g.get('smallest_chunk_bytes'))}..{mib(g.get('largest_chunk_bytes'))}, "
            f"pool {mib(g.get('largest_pool_bytes'))}, host-checked {mib(g.get('host_checked_bytes'))}",
            "ok" if ok else "FAIL")
        row(f"{label}: dev {d['index']} ms",
            f"start {ms(t.get('start_ms'))}, init {ms(t.get('driver_init_ms'))}, ctx {ms(t.get('context_ms'))}, "
            f"queries {ms(t.get('queries_ms'))}, smoke {ms(t.get('smoke_ms'))} (long phase {ms(g.get('long_phase_ms'))}), wall {ms(t.get('wall_ms'))}")
    for p in rep.get("peers", []):
        row(f"{label}: peer {p['from']}-{p['to']}", f"{p['outcome']}: {p.get('reason') or 'copy ok'}",
            "ok" if p["outcome"] == "pass" else "FAIL")
    for b in (rep.get("probe_run") or {}).get("backends", []):
        pr = b.get("peer")
        extra = ""
        if pr:
            reads = ", ".join(str(v.get("read_ok")) for v in pr.get("pairs", []))
            extra = f"; peers start {ms(pr['start_ms'])}, contexts {ms(pr.get('contexts_ms'))}, wall {ms(pr['wall_ms'])}, VMM reads {reads}"
        crash = b.get("shared_crash")
        if crash:
            extra += f"; SHARED CHILD {crash['how']}, re-run isolated {crash['rerun_isolated']}"
        row(f"{label}: orchestration", f"mode {b.get('mode')}, counted {b['counted']} from {b['count_source']}, total {ms(rep['probe_run']['wall_ms'])} ms{extra}")

# The shared child (default) on every GPU: one process, every device passes, every pair checked in
# it (n >= 2), and the same facts and verdicts as one child per device.
def run_of(rep):
    return ((rep or {}).get("probe_run") or {}).get("backends", [{}])[0]
if all_:
    n = len(all_["devices"])
    b = run_of(all_)
    pairs = all_.get("peers", [])
    want = n * (n - 1) // 2
    ok = (b.get("mode") == "shared" and not b.get("shared_crash") and n >= 1
          and all(d["smoke"]["outcome"] == "pass" for d in all_["devices"])
          and len(pairs) == want and all(p["outcome"] == "pass" for p in pairs)
          and (n < 2 or all(v.get("read_ok") for v in (b.get("peer") or {}).get("pairs", []))))
    row("shared child: all devices and pairs", f"mode {b.get('mode')}, {n} devices, {len(pairs)}/{want} pairs "
        + ", ".join(f"{p['from']}-{p['to']} {p['outcome']}" for p in pairs), "ok" if ok else "FAIL")
if all_ and iso:
    key = lambda d: (d["index"], d["arch"], d["pci_bus_id"], d["vmm_supported"], d["granularity_recommended"],
                     d["smoke"]["outcome"], d["smoke"].get("cycles_done"))
    same = [key(d) for d in all_["devices"]] == [key(d) for d in iso["devices"]]
    peers_same = [(p["from"], p["to"], p["outcome"]) for p in all_.get("peers", [])] == \
                 [(p["from"], p["to"], p["outcome"]) for p in iso.get("peers", [])]
    row("shared vs --isolate: facts, verdicts", "same" if same and peers_same else "DIFFER",
        "ok" if same and peers_same and run_of(iso).get("mode") == "isolated" else "FAIL")

pe = events("probe-device0.jsonl")
dev, sm = ev(pe, "device"), ev(pe, "smoke")
if one and one["devices"] and sm:
    d = one["devices"][0]
    g = d["smoke"].get("growth") or {}
    pairs = [("arch", d["arch"], dev.get("arch")), ("vmm", d["vmm_supported"], dev.get("vmm_supported")),
             ("granularity", d["granularity_recommended"], dev.get("granularity_recommended")),
             ("outcome", d["smoke"]["outcome"], sm.get("outcome")), ("cycles", d["smoke"]["cycles_done"], sm.get("cycles_done")),
             ("growths/cycle", d["smoke"]["chunks_per_cycle"], sm.get("chunks_per_cycle")),
             ("largest pool", g.get("largest_pool_bytes"), sm.get("largest_pool_bytes")),
             ("host checked", g.get("host_checked_bytes"), sm.get("host_checked_bytes"))]
    diff = [n for n, a, b in pairs if a != b]
    row("Rust backend vs nvcc probe", "same" if not diff else "differ in " + ", ".join(diff),
        "ok" if not diff else "FAIL")
    row("smoke ms: Rust vs probe", f"{ms(d['smoke'].get('elapsed_ms'))} vs {ms(sm.get('elapsed_ms'))}")
pr, pp = load("plan-rust.json"), load("plan-probe.json")
row("growth schedule, Rust vs probe", "same" if pr and pr == pp else "DIFFERENT", "ok" if pr and pr == pp else "FAIL")
f1 = ev(events("fault1.jsonl"), "smoke")
row("planted fault 1 (write skipped)", f"{f1.get('outcome')} at {f1.get('failed_stage')}, cycle {f1.get('failed_cycle')}, {f1.get('mismatches')} words",
    "ok" if f1.get("outcome") == "fail" and f1.get("failed_stage") == "verify" else "FAIL")
f2 = ev(events("fault2.jsonl"), "smoke")
row("planted fault 2 (access off by a page)", f"{f2.get('outcome')} at {f2.get('failed_stage')}, whole range helped {f2.get('whole_range_access_helped')}",
    "ok" if f2.get("outcome") == "fail" and f2.get("failed_stage") == "set_access" else "FAIL")
f3 = ev(events("fault3.jsonl"), "smoke")
row("planted fault 3 (2 words zeroed after the GPU checks)", f"{f3.get('outcome')} at {f3.get('failed_stage')}, {f3.get('mismatches')} words, first at byte {f3.get('first_bad_offset')}",
    "ok" if f3.get("outcome") == "fail" and f3.get("failed_stage") == "host_compare" and f3.get("mismatches") == 2
    and f3.get("first_bad_offset") == 12345 * 4 else "FAIL")
to = load("timeout.json")
if to:
    b = to["backends"][0]
    row("--timeout 0.05", f"backend {b['status']}; devices " + ", ".join(d["smoke"]["outcome"] for d in to["devices"]),
        "ok" if b["status"] == "hang" or any(d["smoke"]["outcome"] == "hang" for d in to["devices"]) else "FAIL")
hid = load("hidden.json")
if hid:
    b = hid["backends"][0]
    row("libcuda hidden", f"backend {b['status']}, {len(hid['devices'])} devices from {', '.join(sorted({d['source'] for d in hid['devices']}))}",
        "ok" if b["status"] == "no-driver" else "FAIL")
w = max(len(r[0]) for r in rows)
print(f"{'check':<{w}}  result")
for c, v, verdict in rows:
    print(f"{c:<{w}}  {v}{'  [' + verdict + ']' if verdict else ''}")
PY
log "benchmark (from $out/bench.txt)"
cat "$out/bench.txt" 2>/dev/null || echo "bench: no output [FAIL]"

#!/bin/sh
# Takes a dump of this machine with `gpuprobe detect --dump`, replays it at once, and checks
# that the replay gives the same report. Made for a real GPU machine (no Rust needed: a
# prebuilt gpuprobe). The dump is what tests/fixtures/dumps/ wants: copy it there.
#
# Usage: scripts/capture-dump.sh GPUPROBE NAME [OUT]
#   NAME  the machine, as the fixture file will be named (e.g. nvidia-2x-h200-driver580)
#   OUT   folder for the files (default: $OUT, else ./capture-dump-out)
# Writes OUT/NAME.json (the dump), OUT/NAME.detect.json (what detect printed), OUT/NAME.replay.json
# (what the replay printed), OUT/NAME.detect.txt (the table). Exit 0 only when the replay matches.
set -u
gp=$1
name=$2
out=${3:-${OUT:-capture-dump-out}}
mkdir -p "$out"
dump=$out/$name.json
echo "== machine"
(nvidia-smi -L 2>/dev/null || true; uname -r)
echo "== detect --dump (the smoke test runs: about a second per GPU)"
"$gp" detect --json --dump "$dump" >"$out/$name.detect.json" || { echo "detect failed rc=$?"; exit 1; }
"$gp" detect >"$out/$name.detect.txt" 2>&1
cat "$out/$name.detect.txt"
echo "== replay (nothing is probed)"
GPUPROBE_REPLAY=$dump "$gp" detect --json >"$out/$name.replay.json" || { echo "replay failed rc=$?"; exit 1; }
echo "== inputs recorded"
python3 - "$dump" <<'PY' || true
import json, sys
d = json.load(open(sys.argv[1]))
i = d["inputs"]
print("redacted:", ", ".join(d["redacted"]) or "nothing")
print("files:", len([v for v in i["files"].values() if v is not None]), "children:", ", ".join(sorted(i["children"])))
print("tools:", ", ".join(k for k, v in i["tools"].items() if v))
PY
# The replay prints the redacted report; what detect printed differs only where redaction
# replaced something (the dump's own report is the reference the tests use).
if python3 - "$dump" "$out/$name.replay.json" <<'PY'
import json, sys
dumped = json.load(open(sys.argv[1]))["report"]
replayed = json.load(open(sys.argv[2]))
for r in (dumped, replayed):
    r.pop("gpuprobe_version", None)
sys.exit(0 if dumped == replayed else 1)
PY
then
    echo "REPLAY MATCHES: $dump replays to the report it holds"
else
    echo "REPLAY DIFFERS: compare $out/$name.replay.json with the report in $dump"
    exit 1
fi
